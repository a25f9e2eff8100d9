// Definitions of <cairn/diagnostics.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/diagnostics.hpp>

#include <cstdio>
#include <mutex>
#include <unistd.h>

namespace cairn::detail {

struct sink_state {
  std::mutex mutex;
  diagnostic_sink sink = print_to_stderr;
};

CAIRN_DECL void print_to_stderr(severity level, diagnostic const& d) {
  // Progress on a terminal: one line, rewritten in place and cleared when the work ends or
  // another message comes. Called under the sink's lock.
  static bool progress_line_open = false;
  static bool terminal = ::isatty(2) == 1;
  if (terminal && progress_line_open) {
    std::fputs("\r\033[K", stderr);
    progress_line_open = false;
  }
  if (level == severity::progress) {
    if (d.message.empty()) return;
    if (terminal) {
      std::fprintf(stderr, "cairn: %s", d.to_string().c_str());
      progress_line_open = true;
      std::fflush(stderr);
      return;
    }
  }
  char const* label = level == severity::info       ? "info"
                      : level == severity::warning  ? "warning"
                      : level == severity::progress ? "progress"
                                                    : "deprecated";
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
