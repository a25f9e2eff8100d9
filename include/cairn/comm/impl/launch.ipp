// Definitions of <cairn/comm/launch.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/comm/launch.hpp>
#include <cairn/detail/spawn.hpp>
#include <cairn/error.hpp>

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <netinet/in.h>
#include <optional>
#include <poll.h>
#include <string>
#include <string_view>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <tuple>
#include <unistd.h>
#include <vector>

namespace cairn::comm::detail {

CAIRN_DECL void on_signal(int signal) {
  unsigned char byte = static_cast<unsigned char>(signal);
  [[maybe_unused]] auto ignored = ::write(forwarded_signal_pipe[1], &byte, 1);
}

// A port for a one-node job's rendezvous that nothing listens on now, below the kernel's range of
// ephemeral ports (32768 and up on Linux): a port the kernel handed out (bind to port 0) is free
// only until the store binds it, and any server started on port 0 or outgoing connection in the
// meantime may take it; nothing takes a port below that range unasked. Launchers starting at once
// try different ports first (each from its own pid on).
CAIRN_DECL int free_port() {
  constexpr int first = 20000, count = 12000;
  auto const start = static_cast<int>(::getpid() % count);
  for (int i = 0; i < count; ++i) {
    int const port = first + (start + 7919 * i) % count;
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw comm_error(comm_errc::launch, std::string("cannot open a socket: ") + std::strerror(errno));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    bool const bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    ::close(fd);
    if (bound) return port;
  }
  throw comm_error(comm_errc::launch,
                   "cannot find a free port in [20000, 32000) for the rendezvous: pass --master-port");
}

CAIRN_DECL void emit_lines(int rank, std::string& partial, char const* data, std::size_t size, FILE* to,
                           bool flush_all) {
  auto searched = partial.size(); // the bytes before have no newline
  partial.append(data, size);
  std::size_t start = 0;
  for (auto newline = partial.find('\n', searched); newline != std::string::npos; newline = partial.find('\n', start)) {
    std::fprintf(to, "[rank %d] %.*s\n", rank, static_cast<int>(newline - start), partial.data() + start);
    start = newline + 1;
  }
  // A line that never ends (a progress bar with \r, binary output) is printed in pieces instead
  // of growing without bound.
  while (partial.size() - start >= max_line_length) {
    std::fprintf(to, "[rank %d] %.*s\n", rank, static_cast<int>(max_line_length), partial.data() + start);
    start += max_line_length;
  }
  partial.erase(0, start);
  if (flush_all && !partial.empty()) {
    std::fprintf(to, "[rank %d] %s\n", rank, partial.c_str());
    partial.clear();
  }
  std::fflush(to);
}

CAIRN_DECL void reserve_resources(int processes) {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0) return;
  auto needed = static_cast<rlim_t>(files_needed(processes));
  if (files.rlim_cur != RLIM_INFINITY && files.rlim_cur < needed) {
    auto raised = files;
    raised.rlim_cur = files.rlim_max == RLIM_INFINITY ? needed : std::min(needed, files.rlim_max);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) files = raised;
    if (files.rlim_cur < needed)
      throw comm_error(comm_errc::launch, "-n " + std::to_string(processes) + " needs about " + std::to_string(needed) +
                                              " open files in the launcher (two pipes a rank); the limit is " +
                                              std::to_string(files.rlim_cur) +
                                              " (ulimit -n): raise it, or start fewer ranks. No rank was started");
  }
}

} // namespace cairn::comm::detail

namespace cairn::comm::detail {

CAIRN_DECL void forward_stop_signals() {
  if (::pipe2(forwarded_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    throw comm_error(comm_errc::launch, std::string("cannot create a pipe: ") + std::strerror(errno));
  struct sigaction action {};
  action.sa_handler = on_signal;
  // Forwarded once per stop request; a signal ignored when the launcher starts stays ignored (nohup
  // ignores SIGHUP: the job is to outlive the terminal).
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGUSR1}) {
    struct sigaction before {};
    ::sigaction(s, nullptr, &before);
    if (before.sa_handler != SIG_IGN) ::sigaction(s, &action, nullptr);
  }
}

CAIRN_DECL void signal_groups(std::vector<rank_process> const& ranks, int signal, bool running_only) {
  for (auto const& p : ranks)
    if (p.running || !running_only) ::kill(-p.pid, signal);
}

CAIRN_DECL void abandon(std::vector<rank_process>& ranks) {
  signal_groups(ranks, SIGKILL, false);
  for (auto& p : ranks) {
    if (p.running) ::waitpid(p.pid, nullptr, 0);
    for (int fd : {p.out, p.err})
      if (fd >= 0) ::close(fd);
  }
}

CAIRN_DECL void start_rank(launch_options const& options, int port, std::vector<rank_process>& ranks) {
  int local = static_cast<int>(ranks.size());
  int r = options.node_rank * options.processes + local; // the job's rank, in messages and prefixes
  auto refuse = [&](int reason, std::string const& what) {
    abandon(ranks);
    throw comm_error(comm_errc::launch, what + ": " + std::strerror(reason) +
                                            (local > 0 ? "; the ranks started before it were stopped" : ""));
  };
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) refuse(errno, "cannot create a pipe for rank " + std::to_string(r));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    auto reason = errno;
    ::close(out[0]);
    ::close(out[1]);
    refuse(reason, "cannot create a pipe for rank " + std::to_string(r));
  }
  auto variables = rank_variables(options, local, port);
  pid_t pid = -1;
  cairn::detail::process_options how;
  how.own_group = true; // a Ctrl-C reaches it once, through the launcher; stopping it stops what it started
  how.parent_death_signal = SIGKILL; // gone with the launcher, however the launcher ends
  how.stdin_null = true;             // out of the terminal's group, reading it would stop the rank
  how.stdout_fd = out[1];
  how.stderr_fd = err[1];
  int failed = cairn::detail::start_process(options.command, variables, how, pid);
  ::close(out[1]);
  ::close(err[1]);
  if (failed) {
    ::close(out[0]);
    ::close(err[0]);
    refuse(failed, "cannot start '" + options.command[0] + "' as rank " + std::to_string(r));
  }
  ranks.push_back({r, pid, out[0], err[0], {}, {}, true, 0});
}

CAIRN_DECL void forward_output(rank_process& p) {
  for (auto [fd, partial, to] :
       {std::tuple{&p.out, &p.out_partial, stdout}, std::tuple{&p.err, &p.err_partial, stderr}}) {
    if (*fd < 0) continue;
    pollfd probe{*fd, POLLIN, 0};
    if (::poll(&probe, 1, 0) <= 0) continue;
    char buffer[65536];
    auto n = ::read(*fd, buffer, sizeof buffer);
    if (n > 0) {
      emit_lines(p.rank, *partial, buffer, static_cast<std::size_t>(n), to, false);
    } else if (n == 0 || errno != EINTR) {
      emit_lines(p.rank, *partial, nullptr, 0, to, true);
      ::close(*fd);
      *fd = -1;
    }
  }
}

CAIRN_DECL void supervisor::wait_for_events() {
  std::vector<pollfd> fds{{forwarded_signal_pipe[0], POLLIN, 0}};
  for (auto& p : ranks) {
    if (p.out >= 0) fds.push_back({p.out, POLLIN, 0});
    if (p.err >= 0) fds.push_back({p.err, POLLIN, 0});
  }
  ::poll(fds.data(), fds.size(), 100);
}

CAIRN_DECL void supervisor::forward_signals() {
  unsigned char signal = 0;
  while (::read(forwarded_signal_pipe[0], &signal, 1) == 1) {
    auto now = std::chrono::steady_clock::now();
    if (forwarded_at && now - *forwarded_at < options.stop_signal_window) continue; // the same request
    forwarded_at = now;
    signal_groups(ranks, signal, true);
  }
}

CAIRN_DECL void supervisor::reap(rank_process& p) {
  if (!p.running || ::waitpid(p.pid, &p.status, WNOHANG) != p.pid) return;
  p.running = false;
  int code = exit_code(p.status);
  if (code == 0 || result != 0) return;
  result = code;
  if (code == options.agreed_stop_status) {
    agreed_stop = std::chrono::steady_clock::now();
  } else {
    std::fprintf(stderr, "cairn launch: rank %d exited with status %d; stopping the others\n", p.rank, code);
    stop_others();
  }
}

CAIRN_DECL void supervisor::stop_others() {
  signal_groups(ranks, SIGTERM, true);
  stopping = std::chrono::steady_clock::now();
}

CAIRN_DECL bool supervisor::finished() {
  using namespace std::chrono;
  bool any_running = std::any_of(ranks.begin(), ranks.end(), [](auto const& p) { return p.running; });
  bool any_open = std::any_of(ranks.begin(), ranks.end(), [](auto const& p) { return p.out >= 0 || p.err >= 0; });
  if (!any_running && !any_open) return true;
  auto now = steady_clock::now();
  if (!any_running && !all_exited) all_exited = now;
  if (all_exited && now - *all_exited > seconds(1)) return true;
  if (agreed_stop && !stopping && any_running && now - *agreed_stop > options.agreed_stop_grace) {
    std::fprintf(stderr, "cairn launch: ranks still running %lld s after one stopped with status %d; stopping them\n",
                 static_cast<long long>(options.agreed_stop_grace.count()), options.agreed_stop_status);
    stop_others();
  }
  if (stopping && now - *stopping > seconds(10)) {
    signal_groups(ranks, SIGKILL, true);
    stopping = now;
  }
  return false;
}

CAIRN_DECL int supervisor::run() {
  for (;;) {
    wait_for_events();
    forward_signals();
    for (auto& p : ranks) {
      forward_output(p);
      reap(p);
    }
    if (finished()) break;
  }
  for (auto& p : ranks)
    for (int fd : {p.out, p.err})
      if (fd >= 0) ::close(fd);
  // A failed job leaves nothing behind: what its ranks started (still holding their process
  // groups) goes with it.
  if (result != 0 && result != options.agreed_stop_status) signal_groups(ranks, SIGKILL, false);
  return result;
}

} // namespace cairn::comm::detail

namespace cairn::comm {

CAIRN_DECL std::map<std::string, std::string> rank_variables(launch_options const& options, int local_rank, int port) {
  return {{"RANK", std::to_string(options.node_rank * options.processes + local_rank)},
          {"WORLD_SIZE", std::to_string(options.nnodes * options.processes)},
          {"LOCAL_RANK", std::to_string(local_rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(options.processes)},
          {"GROUP_RANK", std::to_string(options.node_rank)},
          {"MASTER_ADDR", options.master_addr},
          {"MASTER_PORT", std::to_string(port)}};
}

CAIRN_DECL int launch(launch_options const& options) {
  if (options.processes < 1) throw comm_error(comm_errc::launch, "launch needs at least one process");
  if (options.port < 0 || options.port > 65535)
    throw comm_error(comm_errc::launch, "port " + std::to_string(options.port) + " is not a TCP port (1 to 65535)");
  if (options.nnodes < 1 || options.node_rank < 0 || options.node_rank >= options.nnodes)
    throw comm_error(comm_errc::launch, "--node-rank " + std::to_string(options.node_rank) + " is not a node of " +
                                            std::to_string(options.nnodes) + " (0 to nnodes - 1)");
  if (options.nnodes > 1 && options.port == 0)
    throw comm_error(comm_errc::launch, "a job of " + std::to_string(options.nnodes) +
                                            " nodes needs --master-port: every node's ranks meet at node 0's");
  if (options.master_addr.empty()) throw comm_error(comm_errc::launch, "--master-addr is empty");
  detail::reserve_resources(options.processes);
  int port = options.port ? options.port : detail::free_port();
  detail::forward_stop_signals();
  // Each rank leads a process group of its own: a signal to the launcher's group (Ctrl-C at a
  // terminal) reaches the ranks once, through the launcher, and stopping a rank's group stops
  // whatever it started.
  detail::supervisor job(options);
  for (int r = 0; r < options.processes; ++r) detail::start_rank(options, port, job.ranks);
  return job.run();
}

} // namespace cairn::comm
