#pragma once

// Distributed runs, what `cairn launch -n N [--nnodes M --node-rank R --master-addr HOST
// --master-port P] -- PROGRAM ARGS…` does: N processes on this node with the torchrun variables,
// their output prefixed with their rank, signals forwarded, and all stopped when one fails. A
// job of M nodes runs one launcher on each, all given the same address and port (node 0's,
// where its rank 0 holds the rendezvous). No libtorch.

#include <cairn/detail/decl.hpp>
#include <cairn/error.hpp>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <sys/types.h>
#include <sys/wait.h>
#include <vector>

namespace cairn::comm {

struct launch_options {
  int processes = 0; ///< ranks on this node
  int port = 0;      ///< the rendezvous port; 0: a free one (one node only)
  int nnodes = 1;    ///< nodes of the job, each with its own launcher and `processes` ranks
  int node_rank = 0; ///< this node's index: its ranks are node_rank * processes + 0 … processes - 1
  std::string master_addr = "127.0.0.1"; ///< the host of node 0, where the rendezvous is
  std::vector<std::string> command;
  /// The exit status of a rank that stopped in agreement with the others (cairn's trainers exit
  /// with `cairn::preempted_exit_status`, 75, after a signal and a checkpoint): the others are
  /// finishing the same stop, so they are waited for (`agreed_stop_grace`) rather than signalled,
  /// since a second signal would abort them.
  int agreed_stop_status = 75;
  std::chrono::seconds agreed_stop_grace{120};
  /// A stop signal the launcher receives within this time of the one it forwarded is the same
  /// request (a scheduler signalling every process of the job) and is not forwarded again; one
  /// after it is forwarded, and aborts the ranks.
  std::chrono::milliseconds stop_signal_window{2000};
};

namespace detail {

inline int forwarded_signal_pipe[2] = {-1, -1};

CAIRN_DECL void on_signal(int signal);

CAIRN_DECL int free_port();

/// One rank's child process (the leader of a process group of its own, so that stopping it
/// stops what it started too) and the ends of its output pipes.
struct rank_process {
  int rank = 0;
  pid_t pid = -1;
  int out = -1, err = -1;
  std::string out_partial, err_partial;
  bool running = true;
  int status = 0;
};

/// The longest line kept waiting for its end: a longer one is printed in pieces of this size.
inline constexpr std::size_t max_line_length = std::size_t{1} << 16;

/// Appends `size` bytes of rank `rank`'s output to `partial` and prints every whole line in it
/// to `to`, prefixed; with `flush_all`, what is left too. Linear in the bytes appended.
CAIRN_DECL void emit_lines(int rank, std::string& partial, char const* data, std::size_t size, FILE* to,
                           bool flush_all);

/// The open files `processes` ranks take in the launcher, with a margin.
constexpr std::size_t files_needed(int processes) { return 2 * static_cast<std::size_t>(processes) + 32; }

/// Raises the open-file limit as far as allowed to what `processes` ranks need; an error naming
/// both numbers when the hard limit is lower, before any rank starts.
CAIRN_DECL void reserve_resources(int processes);

inline int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

/// Forwards SIGINT, SIGTERM, SIGHUP and SIGUSR1 to the ranks through `forwarded_signal_pipe`
/// (not those the launcher was started ignoring).
CAIRN_DECL void forward_stop_signals();

/// Sends `signal` to the process group of each rank (each still running, with `running_only`).
CAIRN_DECL void signal_groups(std::vector<rank_process> const& ranks, int signal, bool running_only);

/// On a failure to start: kills every rank started, with its group, and waits for it.
CAIRN_DECL void abandon(std::vector<rank_process>& ranks);

/// Starts the next rank (rank `ranks.size()`) with its environment and output pipes; on a
/// failure, abandons the ranks started and throws.
CAIRN_DECL void start_rank(launch_options const& options, int port, std::vector<rank_process>& ranks);

/// Prints what a rank wrote since the last call, line by line; closes a pipe at its end.
CAIRN_DECL void forward_output(rank_process& p);

/// The launcher's loop over its running ranks: output forwarded, stop signals forwarded once
/// per request, the first failure stopping the others (TERM, then KILL after 10 s), an agreed
/// stop given its grace.
struct supervisor {
  explicit supervisor(launch_options const& o) : options(o) {}
  launch_options const& options;
  std::vector<rank_process> ranks;
  int result = 0;
  std::optional<std::chrono::steady_clock::time_point> stopping;     ///< when the others were asked to stop
  std::optional<std::chrono::steady_clock::time_point> agreed_stop;  ///< when a rank stopped in agreement
  std::optional<std::chrono::steady_clock::time_point> all_exited;   ///< grandchildren may still hold the pipes
  std::optional<std::chrono::steady_clock::time_point> forwarded_at; ///< the last stop signal forwarded

  CAIRN_DECL int run();
  CAIRN_DECL void wait_for_events();
  CAIRN_DECL void forward_signals();
  CAIRN_DECL void reap(rank_process& p);
  CAIRN_DECL void stop_others();
  CAIRN_DECL bool finished();
};

} // namespace detail

/// The torchrun variables of local rank `local_rank` of a launch, at rendezvous port `port`.
CAIRN_DECL std::map<std::string, std::string> rank_variables(launch_options const& options, int local_rank, int port);

/// Runs the processes; returns 0 when all succeed, else the exit code of the first that failed.
/// Nothing it started outlives a failure: when a rank cannot be started, every rank already
/// started is killed with its process group and waited for before the error is thrown.
CAIRN_DECL int launch(launch_options const& options);

} // namespace cairn::comm

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/comm/impl/launch.ipp>
#endif
