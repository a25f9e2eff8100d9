#pragma once

// Stopping cleanly on a signal: clusters preempt with SIGTERM (SLURM can send SIGUSR1 ahead of
// time), people press Ctrl-C, a closed terminal or ssh session sends SIGHUP. No libtorch.

#include <cairn/detail/decl.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <utility>
#include <vector>

namespace cairn {

/// The signals a run stops on by default: SIGTERM, SIGINT, SIGUSR1 and SIGHUP.
inline std::vector<int> default_stop_signals() { return {SIGTERM, SIGINT, SIGUSR1, SIGHUP}; }

/// How long after a stop signal another one is the same request (2 s): a signal sent to a
/// job's whole process group (Ctrl-C, a scheduler, a cgroup stop) reaches each rank directly
/// and again through its launcher a moment later.
inline constexpr std::chrono::milliseconds default_stop_signal_window{2000};

/// The exit status of a run stopped by a signal after saving its checkpoint: 75 (EX_TEMPFAIL,
/// "try again"), so that a requeueing script can tell it from success (0) and from failure.
inline constexpr int preempted_exit_status = 75;

/// Catches `signals` while it lives: the first one only sets a flag that the training loop reads
/// between iterations (`received()`); any of them within `window` after it is the same request
/// (ignored); one after that ends the process at once, as that signal would have. The handlers
/// before it are restored when it goes; after a stop request, only once its window has passed
/// (a copy of the request still on its way must not kill a process that is exiting cleanly). A
/// signal ignored when it starts stays ignored (nohup ignores SIGHUP). One at a time per process.
class stop_signals {
public:
  CAIRN_DECL explicit stop_signals(std::vector<int> signals = default_stop_signals(),
                                   std::chrono::milliseconds window = default_stop_signal_window);
  stop_signals(stop_signals const&) = delete;
  stop_signals& operator=(stop_signals const&) = delete;
  CAIRN_DECL ~stop_signals();

  /// The first signal received, or 0.
  [[nodiscard]] int received() const noexcept { return state().signal.load(); }

private:
  struct shared {
    std::atomic<int> signal{0};
    std::atomic<std::int64_t> at_ns{0};     // CLOCK_MONOTONIC of the first signal
    std::atomic<std::int64_t> window_ns{0}; // repeats within it are the same request
    std::atomic<bool> lingering{false};     // the object is gone; its handlers stay for the window
    struct sigaction previous[NSIG] {};     // the handlers before, by signal number
  };
  CAIRN_DECL static shared& state() noexcept;
  CAIRN_DECL static void on_signal(int signal);

  std::vector<int> signals_;
  std::vector<struct sigaction> previous_;
};

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/training/impl/preemption.ipp>
#endif
