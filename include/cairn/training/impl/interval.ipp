// Definitions of <cairn/training/interval.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/config/check.hpp>
#include <cairn/config/field.hpp>
#include <cairn/config/validation.hpp>
#include <cairn/training/interval.hpp>

#include <boost/describe/class.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace cairn {

CAIRN_DECL std::int64_t interval_config::count(std::int64_t iteration) const noexcept {
  if (!interval || iteration < offset) return 0;
  return (iteration - offset) / *interval + 1;
}

CAIRN_DECL bool interval_config::is_sub_interval(interval_config const& other) const noexcept {
  if (!enabled()) return true;
  if (!other.enabled()) return false;
  return *interval % *other.interval == 0 &&
         floor_mod(offset, *other.interval) == floor_mod(other.offset, *other.interval);
}

CAIRN_DECL std::optional<std::string> interval_config::sub_interval_problem(interval_config const& other,
                                                                            std::string const& name,
                                                                            std::string const& other_name) const {
  if (is_sub_interval(other)) return std::nullopt;
  return name + " " + describe() + " is not a sub-interval of " + other_name + " " + other.describe() + ": every " +
         name + " must fall on a " + other_name;
}

CAIRN_DECL std::string interval_config::describe() const {
  if (!interval) return "(disabled)";
  return "(every " + std::to_string(*interval) + " iterations from " + std::to_string(offset) + ")";
}

} // namespace cairn
