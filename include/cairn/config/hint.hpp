#pragma once

#include <string_view>

namespace cairn {

/// What kind of setting a field is; documentation sorts and filters fields by it.
enum class hint {
  core,         ///< Every user sets or reads it.
  architecture, ///< Part of the model's architecture: must match when loading weights.
  optional,     ///< Often left unset.
  feature,      ///< Turns on or tunes a feature.
  performance,  ///< Changes speed or memory, not results.
  stability,    ///< Changes numerical stability.
  expert,       ///< Rarely needs a change; know what you are doing.
  logging,      ///< What is logged and how often.
  testing,      ///< For tests and debugging only.
  setup,        ///< Filled in by the program, not by users.
  derived,      ///< Computed from other fields at validation.
  deprecated,   ///< Kept for compatibility; will go.
};

/// Lower is more important. Documentation shows fields up to a chosen importance.
constexpr int importance(hint h) noexcept {
  switch (h) {
  case hint::core:
  case hint::architecture:
    return 0;
  case hint::optional:
  case hint::feature:
    return 10;
  case hint::performance:
  case hint::stability:
    return 20;
  case hint::expert:
  case hint::logging:
    return 30;
  case hint::testing:
    return 40;
  case hint::deprecated:
    return 80;
  case hint::setup:
    return 90;
  case hint::derived:
    return 100;
  }
  return 100;
}

constexpr std::string_view to_string(hint h) noexcept {
  switch (h) {
  case hint::core:
    return "core";
  case hint::architecture:
    return "architecture";
  case hint::optional:
    return "optional";
  case hint::feature:
    return "feature";
  case hint::performance:
    return "performance";
  case hint::stability:
    return "stability";
  case hint::expert:
    return "expert";
  case hint::logging:
    return "logging";
  case hint::testing:
    return "testing";
  case hint::setup:
    return "setup";
  case hint::derived:
    return "derived";
  case hint::deprecated:
    return "deprecated";
  }
  return "unknown";
}

} // namespace cairn
