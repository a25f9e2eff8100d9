#pragma once

// Stopping cleanly on a signal: clusters preempt with SIGTERM (SLURM can send SIGUSR1 ahead of
// time), people press Ctrl-C. No libtorch.

#include <cairn/detail/decl.hpp>

#include <atomic>
#include <csignal>
#include <utility>
#include <vector>

namespace cairn {

/// The signals a run stops on by default: SIGTERM, SIGINT and SIGUSR1.
inline std::vector<int> default_stop_signals() { return {SIGTERM, SIGINT, SIGUSR1}; }

/// The exit status of a run stopped by a signal after saving its checkpoint: 75 (EX_TEMPFAIL,
/// "try again"), so that a requeueing script can tell it from success (0) and from failure.
inline constexpr int preempted_exit_status = 75;

/// Catches `signals` while it lives: the first one only sets a flag that the training loop reads
/// between iterations (`received()`); a second one, of any of them, ends the process at once as
/// that signal would have. The handlers before it are restored when it goes. One at a time per
/// process.
class stop_signals {
public:
  CAIRN_DECL explicit stop_signals(std::vector<int> signals = default_stop_signals());
  stop_signals(stop_signals const&) = delete;
  stop_signals& operator=(stop_signals const&) = delete;
  ~stop_signals() {
    for (std::size_t i = 0; i < signals_.size(); ++i) ::sigaction(signals_[i], &previous_[i], nullptr);
  }

  /// The first signal received, or 0.
  [[nodiscard]] int received() const noexcept { return received_flag().load(); }

private:
  CAIRN_DECL static std::atomic<int>& received_flag() noexcept;
  CAIRN_DECL static void on_signal(int signal);

  std::vector<int> signals_;
  std::vector<struct sigaction> previous_;
};

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/training/impl/preemption.ipp>
#endif
