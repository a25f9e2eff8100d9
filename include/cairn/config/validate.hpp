#pragma once

#include <cairn/config/reflect.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/diagnostics.hpp>

#include <string>
#include <utility>
#include <vector>

namespace cairn {

namespace detail {

/// Validates on top of earlier errors (from parsing), emits warnings, throws on errors.
CAIRN_DECL void finish_validation(config_ops const& ops, void* config, std::vector<diagnostic> earlier);

} // namespace detail

/// Checks every field, then each config's own `validate` (which may derive values), nested
/// configs first. Throws config_error with every error found; warnings go to the diagnostic sink.
template <described_config T> void validate(T& config) {
  detail::finish_validation(detail::config_of<T>(), &config, {});
}

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/config/impl/validate.ipp>
#endif
