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
  state().signal.store(0);
  state().at_ns.store(0);
  state().window_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(window).count());
  struct sigaction action {};
  action.sa_handler = &on_signal;
  sigemptyset(&action.sa_mask);
  for (int s : signals_) sigaddset(&action.sa_mask, s); // one handler at a time
  action.sa_flags = SA_RESTART;
  previous_.resize(signals_.size());
  for (std::size_t i = 0; i < signals_.size(); ++i) ::sigaction(signals_[i], &action, &previous_[i]);
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
  // A second request: as if nothing had caught it.
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

} // namespace cairn
