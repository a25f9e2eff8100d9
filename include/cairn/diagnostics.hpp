#pragma once

#include <cairn/detail/decl.hpp>
#include <cairn/error.hpp>

#include <functional>
#include <string_view>
#include <utility>

namespace cairn {

/// What a diagnostic that is not an error is about.
enum class severity {
  info,
  warning,
  deprecation,
  progress, ///< how far long work has come (see <cairn/progress.hpp>); an empty message ends it
};

/// Receives every warning, deprecation and progress message cairn emits.
using diagnostic_sink = std::function<void(severity, diagnostic const&)>;

namespace detail {

CAIRN_DECL void print_to_stderr(severity level, diagnostic const& d);

struct sink_state;
CAIRN_DECL sink_state& sink();

} // namespace detail

/// Replaces the process-wide diagnostic sink and returns the previous one.
/// An empty function restores the default, which prints to stderr.
CAIRN_DECL diagnostic_sink set_diagnostic_sink(diagnostic_sink sink);

/// Sends one diagnostic to the current sink. Thread-safe.
CAIRN_DECL void emit(severity level, diagnostic const& d);

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

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/impl/diagnostics.ipp>
#endif
