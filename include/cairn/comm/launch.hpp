#pragma once

// Local distributed runs, what `cairn launch -n N -- PROGRAM ARGS…` does: N local processes with
// the torchrun variables, their output prefixed with their rank, signals forwarded, and all
// stopped when one fails. No libtorch.

#include <cairn/detail/decl.hpp>
#include <cairn/detail/spawn.hpp>
#include <cairn/error.hpp>

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
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

namespace cairn::comm {

struct launch_options {
  int processes = 0;
  int port = 0; ///< 0: a free one
  std::vector<std::string> command;
  /// The exit status of a rank that stopped in agreement with the others (cairn's trainers exit
  /// with `cairn::preempted_exit_status`, 75, after a signal and a checkpoint): the others are
  /// finishing the same stop, so they are waited for (`agreed_stop_grace`) rather than signalled,
  /// since a second signal would abort them.
  int agreed_stop_status = 75;
  std::chrono::seconds agreed_stop_grace{120};
};

namespace detail {

inline int forwarded_signal_pipe[2] = {-1, -1};

CAIRN_DECL void on_signal(int signal);

CAIRN_DECL int free_port();

/// One rank's child process and the ends of its output pipes.
struct rank_process {
  int rank = 0;
  pid_t pid = -1;
  int out = -1, err = -1;
  std::string out_partial, err_partial;
  bool running = true;
  int status = 0;
};

CAIRN_DECL void emit_lines(int rank, std::string& partial, char const* data, std::size_t size, FILE* to,
                           bool flush_all);

inline int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

} // namespace detail

/// Runs the processes; returns 0 when all succeed, else the exit code of the first that failed.
CAIRN_DECL int launch(launch_options const& options);

} // namespace cairn::comm

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/comm/impl/launch.ipp>
#endif
