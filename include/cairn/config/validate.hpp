#pragma once

#include <cairn/config/diagnostics.hpp>
#include <cairn/config/reflect.hpp>

#include <string>
#include <utility>
#include <vector>

namespace cairn {

namespace detail {

/// Validates on top of earlier errors (from parsing), emits warnings, throws on errors.
inline void finish_validation(config_ops const& ops, void* config, std::vector<diagnostic> earlier) {
  validation ctx(std::move(earlier));
  validate_config(ops, config, ctx);
  for (auto const& w : ctx.warnings()) emit(severity::warning, w);
  if (!ctx.errors().empty()) throw config_error(ctx.errors());
}

} // namespace detail

/// Checks every field, then each config's own `validate` (which may derive values), nested
/// configs first. Throws config_error with every error found; warnings go to the diagnostic sink.
template <described_config T> void validate(T& config) {
  detail::finish_validation(detail::config_of<T>(), &config, {});
}

} // namespace cairn
