#pragma once

#include <cairn/error.hpp>

#include <cstdio>
#include <functional>
#include <mutex>
#include <string_view>
#include <utility>

namespace cairn {

/// What a diagnostic that is not an error is about.
enum class severity { info, warning, deprecation };

/// Receives every warning, deprecation and progress message cairn emits.
using diagnostic_sink = std::function<void(severity, diagnostic const&)>;

namespace detail {

inline void print_to_stderr(severity level, diagnostic const& d) {
  char const* label = level == severity::info ? "info" : level == severity::warning ? "warning" : "deprecated";
  std::fprintf(stderr, "cairn: %s: %s\n", label, d.to_string().c_str());
}

struct sink_state {
  std::mutex mutex;
  diagnostic_sink sink = print_to_stderr;
};

inline sink_state& sink() {
  static sink_state state;
  return state;
}

} // namespace detail

/// Replaces the process-wide diagnostic sink and returns the previous one.
/// An empty function restores the default, which prints to stderr.
inline diagnostic_sink set_diagnostic_sink(diagnostic_sink sink) {
  auto& state = detail::sink();
  std::scoped_lock lock(state.mutex);
  if (!sink) sink = detail::print_to_stderr;
  return std::exchange(state.sink, std::move(sink));
}

/// Sends one diagnostic to the current sink. Thread-safe.
inline void emit(severity level, diagnostic const& d) {
  auto& state = detail::sink();
  std::scoped_lock lock(state.mutex);
  state.sink(level, d);
}

/// Installs a sink for the lifetime of this object, then restores the previous one.
class scoped_diagnostic_sink {
public:
  explicit scoped_diagnostic_sink(diagnostic_sink sink) : previous_(set_diagnostic_sink(std::move(sink))) {}
  scoped_diagnostic_sink(scoped_diagnostic_sink const&) = delete;
  scoped_diagnostic_sink& operator=(scoped_diagnostic_sink const&) = delete;
  ~scoped_diagnostic_sink() { set_diagnostic_sink(std::move(previous_)); }

private:
  diagnostic_sink previous_;
};

} // namespace cairn
