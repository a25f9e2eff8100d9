// Definitions of <cairn/training/preemption.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/training/preemption.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <ctime>
#include <utility>
#include <vector>

namespace cairn {

namespace detail {
/// CLOCK_MONOTONIC in nanoseconds: clock_gettime is async-signal-safe.
inline std::int64_t monotonic_ns() noexcept {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return std::int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}
} // namespace detail

CAIRN_DECL stop_signals::stop_signals(std::vector<int> signals, std::chrono::milliseconds window)
    : signals_(std::move(signals)) {
  auto& s = state();
  bool lingering = s.lingering.exchange(false); // the handlers of the one before are still there
  s.signal.store(0);
  s.at_ns.store(0);
  s.window_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(window).count());
  struct sigaction action {};
  action.sa_handler = &on_signal;
  sigemptyset(&action.sa_mask);
  for (int signal : signals_) sigaddset(&action.sa_mask, signal); // one handler at a time
  action.sa_flags = SA_RESTART;
  previous_.resize(signals_.size());
  for (std::size_t i = 0; i < signals_.size(); ++i) {
    auto signal = signals_[i];
    ::sigaction(signal, nullptr, &previous_[i]);
    // Ignored when it starts (nohup ignores SIGHUP: the run is to outlive its terminal): left so.
    if (previous_[i].sa_handler == SIG_IGN) continue;
    ::sigaction(signal, &action, nullptr);
    if (signal <= 0 || signal >= NSIG) continue;
    if (lingering && previous_[i].sa_handler == &on_signal) previous_[i] = s.previous[signal]; // the true one
    s.previous[signal] = previous_[i];
  }
}

CAIRN_DECL stop_signals::~stop_signals() {
  if (received() != 0) {
    // A stop was requested: copies of it may still be on their way (from the process group and
    // from a launcher) while the program exits with its checkpoint. The handler stays and gives
    // each signal back to the handler before once the window has passed.
    state().lingering.store(true);
    return;
  }
  for (std::size_t i = 0; i < signals_.size(); ++i) ::sigaction(signals_[i], &previous_[i], nullptr);
}

CAIRN_DECL stop_signals::shared& stop_signals::state() noexcept {
  static shared flag;
  return flag;
}

CAIRN_DECL void stop_signals::on_signal(int signal) {
  auto& s = state();
  auto now = detail::monotonic_ns();
  int expected = 0;
  if (s.signal.compare_exchange_strong(expected, signal)) {
    s.at_ns.store(now);
    return;
  }
  // The same request arriving again (from the process group and from the launcher).
  if (now - s.at_ns.load() < s.window_ns.load()) return;
  if (s.lingering.load() && signal > 0 && signal < NSIG) {
    // The object is gone and the window has passed: the signal goes where it went before.
    ::sigaction(signal, &s.previous[signal], nullptr);
  } else {
    // A second request: as if nothing had caught it.
    ::signal(signal, SIG_DFL);
  }
  ::raise(signal);
}

} // namespace cairn
