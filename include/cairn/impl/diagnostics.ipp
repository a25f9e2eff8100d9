// Definitions of <cairn/diagnostics.hpp>: inline in a header-only build, compiled once by
// <cairn/config/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/diagnostics.hpp>

#include <cstdio>
#include <mutex>

namespace cairn::detail {

struct sink_state {
  std::mutex mutex;
  diagnostic_sink sink = print_to_stderr;
};

CAIRN_DECL void print_to_stderr(severity level, diagnostic const& d) {
  char const* label = level == severity::info ? "info" : level == severity::warning ? "warning" : "deprecated";
  std::fprintf(stderr, "cairn: %s: %s\n", label, d.to_string().c_str());
}

CAIRN_DECL sink_state& sink() {
  static sink_state state;
  return state;
}

} // namespace cairn::detail

namespace cairn {

CAIRN_DECL diagnostic_sink set_diagnostic_sink(diagnostic_sink sink) {
  auto& state = detail::sink();
  std::scoped_lock lock(state.mutex);
  if (!sink) sink = detail::print_to_stderr;
  return std::exchange(state.sink, std::move(sink));
}

CAIRN_DECL void emit(severity level, diagnostic const& d) {
  auto& state = detail::sink();
  std::scoped_lock lock(state.mutex);
  state.sink(level, d);
}

} // namespace cairn
