// Definitions of <cairn/training/preemption.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/training/preemption.hpp>

#include <atomic>
#include <csignal>
#include <utility>
#include <vector>

namespace cairn {

CAIRN_DECL stop_signals::stop_signals(std::vector<int> signals) : signals_(std::move(signals)) {
  received_flag().store(0);
  struct sigaction action {};
  action.sa_handler = &on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  previous_.resize(signals_.size());
  for (std::size_t i = 0; i < signals_.size(); ++i) ::sigaction(signals_[i], &action, &previous_[i]);
}

CAIRN_DECL std::atomic<int>& stop_signals::received_flag() noexcept {
  static std::atomic<int> flag{0};
  return flag;
}

CAIRN_DECL void stop_signals::on_signal(int signal) {
  int expected = 0;
  if (received_flag().compare_exchange_strong(expected, signal)) return;
  // A second signal: as if nothing had caught it.
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

} // namespace cairn
