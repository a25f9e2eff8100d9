// Definitions of <cairn/progress.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/diagnostics.hpp>
#include <cairn/progress.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

namespace cairn {

CAIRN_DECL std::string size_text(double bytes) {
  char const* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", bytes, units[unit]);
  return text;
}

CAIRN_DECL progress_timing set_progress_timing(progress_timing timing) {
  progress_timing previous{std::chrono::milliseconds(detail::progress_first_ms.exchange(timing.first.count())),
                           std::chrono::milliseconds(detail::progress_every_ms.exchange(timing.every.count()))};
  return previous;
}

CAIRN_DECL progress_scope::~progress_scope() {
  if (active() != this) return;
  active() = nullptr;
  if (reported_) emit(severity::progress, {path_, ""});
}

CAIRN_DECL void progress_scope::add(std::uint64_t bytes) noexcept {
  done_ += bytes;
  if (quiet_) return;
  auto now = std::chrono::steady_clock::now();
  auto first = std::chrono::milliseconds(detail::progress_first_ms.load());
  auto every = std::chrono::milliseconds(detail::progress_every_ms.load());
  if (now - started_ < first || (reported_ && now - last_ < every)) return;
  last_ = now;
  reported_ = true;
  try {
    emit(severity::progress, {path_, text(std::chrono::duration<double>(now - started_).count())});
  } catch (...) { // progress never fails the work
  }
}

CAIRN_DECL progress_scope*& progress_scope::active() noexcept {
  thread_local progress_scope* scope = nullptr;
  return scope;
}

CAIRN_DECL std::string progress_scope::text(double seconds) const {
  double rate = seconds > 0 ? double(done_) / seconds : 0;
  std::string out = what_ + ": " + size_text(double(done_));
  if (total_ > 0) {
    // An estimate of the total can fall short (a format that writes more than the state).
    double fraction = std::min(0.99, double(done_) / double(total_));
    out += " of " + size_text(double(total_)) + " (" + std::to_string(int(fraction * 100)) + "%)";
  }
  out += ", " + size_text(rate) + "/s";
  if (total_ > done_ && rate > 0)
    out += ", " + std::to_string(std::int64_t(double(total_ - done_) / rate + 0.5)) + " s left";
  return out;
}

} // namespace cairn
