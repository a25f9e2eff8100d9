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
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <netinet/in.h>
#include <optional>
#include <poll.h>
#include <spawn.h>
#include <string>
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

CAIRN_DECL int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw error(std::string("cannot open a socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    throw error(std::string("cannot find a free port: ") + std::strerror(errno));
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

CAIRN_DECL void emit_lines(int rank, std::string& partial, char const* data, std::size_t size, FILE* to,
                           bool flush_all) {
  partial.append(data, size);
  std::size_t start = 0;
  for (auto newline = partial.find('\n'); newline != std::string::npos; newline = partial.find('\n', start)) {
    std::fprintf(to, "[rank %d] %.*s\n", rank, static_cast<int>(newline - start), partial.data() + start);
    start = newline + 1;
  }
  partial.erase(0, start);
  if (flush_all && !partial.empty()) {
    std::fprintf(to, "[rank %d] %s\n", rank, partial.c_str());
    partial.clear();
  }
  std::fflush(to);
}

} // namespace cairn::comm::detail

namespace cairn::comm {

CAIRN_DECL int launch(launch_options const& options) {
  using namespace std::chrono;
  int port = options.port ? options.port : detail::free_port();
  if (::pipe2(detail::forwarded_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    throw error(std::string("cannot create a pipe: ") + std::strerror(errno));
  struct sigaction action {};
  action.sa_handler = detail::on_signal;
  for (int s : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(s, &action, nullptr);

  std::vector<detail::rank_process> ranks;
  for (int r = 0; r < options.processes; ++r) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
      throw error(std::string("cannot create a pipe: ") + std::strerror(errno));
    std::map<std::string, std::string> variables{
        {"RANK", std::to_string(r)},       {"WORLD_SIZE", std::to_string(options.processes)},
        {"LOCAL_RANK", std::to_string(r)}, {"LOCAL_WORLD_SIZE", std::to_string(options.processes)},
        {"MASTER_ADDR", "127.0.0.1"},      {"MASTER_PORT", std::to_string(port)}};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err[1], 2);
    pid_t pid = 0;
    int failed = cairn::detail::spawn(options.command, variables, &actions, pid);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    ::close(err[1]);
    if (failed) {
      for (auto& p : ranks) ::kill(p.pid, SIGKILL);
      throw error("cannot start '" + options.command[0] + "': " + std::strerror(failed));
    }
    ranks.push_back({r, pid, out[0], err[0], {}, {}, true, 0});
  }

  int result = 0;
  std::optional<steady_clock::time_point> stopping;    // when the others were asked to stop
  std::optional<steady_clock::time_point> agreed_stop; // when a rank stopped in agreement
  std::optional<steady_clock::time_point> all_exited;  // grandchildren may still hold the pipes
  auto stop_all = [&](int signal) {
    for (auto& p : ranks)
      if (p.running) ::kill(p.pid, signal);
  };
  for (;;) {
    std::vector<pollfd> fds{{detail::forwarded_signal_pipe[0], POLLIN, 0}};
    for (auto& p : ranks) {
      if (p.out >= 0) fds.push_back({p.out, POLLIN, 0});
      if (p.err >= 0) fds.push_back({p.err, POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 100);
    unsigned char signal = 0;
    while (::read(detail::forwarded_signal_pipe[0], &signal, 1) == 1) stop_all(signal);
    for (auto& p : ranks) {
      for (auto [fd, partial, to] :
           {std::tuple{&p.out, &p.out_partial, stdout}, std::tuple{&p.err, &p.err_partial, stderr}}) {
        if (*fd < 0) continue;
        pollfd probe{*fd, POLLIN, 0};
        if (::poll(&probe, 1, 0) <= 0) continue;
        char buffer[65536];
        auto n = ::read(*fd, buffer, sizeof buffer);
        if (n > 0) {
          detail::emit_lines(p.rank, *partial, buffer, static_cast<std::size_t>(n), to, false);
        } else if (n == 0 || errno != EINTR) {
          detail::emit_lines(p.rank, *partial, nullptr, 0, to, true);
          ::close(*fd);
          *fd = -1;
        }
      }
      if (p.running && ::waitpid(p.pid, &p.status, WNOHANG) == p.pid) {
        p.running = false;
        int code = detail::exit_code(p.status);
        if (code != 0 && result == 0) {
          result = code;
          if (code == options.agreed_stop_status) {
            agreed_stop = steady_clock::now();
          } else {
            std::fprintf(stderr, "cairn launch: rank %d exited with status %d; stopping the others\n", p.rank, code);
            stop_all(SIGTERM);
            stopping = steady_clock::now();
          }
        }
      }
    }
    bool any_running = std::any_of(ranks.begin(), ranks.end(), [](auto const& p) { return p.running; });
    bool any_open = std::any_of(ranks.begin(), ranks.end(), [](auto const& p) { return p.out >= 0 || p.err >= 0; });
    if (!any_running && !any_open) break;
    if (!any_running && !all_exited) all_exited = steady_clock::now();
    if (all_exited && steady_clock::now() - *all_exited > seconds(1)) break;
    if (agreed_stop && !stopping && any_running && steady_clock::now() - *agreed_stop > options.agreed_stop_grace) {
      std::fprintf(stderr, "cairn launch: ranks still running %lld s after one stopped with status %d; stopping them\n",
                   static_cast<long long>(options.agreed_stop_grace.count()), options.agreed_stop_status);
      stop_all(SIGTERM);
      stopping = steady_clock::now();
    }
    if (stopping && steady_clock::now() - *stopping > seconds(10)) {
      stop_all(SIGKILL);
      stopping = steady_clock::now();
    }
  }
  return result;
}

} // namespace cairn::comm
