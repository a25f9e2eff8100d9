#pragma once

#include <cairn/config/check.hpp>
#include <cairn/config/field.hpp>
#include <cairn/config/validation.hpp>
#include <cairn/detail/decl.hpp>

#include <boost/describe/class.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace cairn {

/// Something that happens every `interval` iterations, first at `offset`: checkpoints, exports,
/// shutdowns, validation, logs. Unset `interval` disables it.
struct interval_config {
  std::optional<std::int64_t> interval;
  std::int64_t offset = 0;

  /// Whether it is enabled at all.
  [[nodiscard]] bool enabled() const noexcept { return interval.has_value(); }

  /// Whether it fires at `iteration`.
  [[nodiscard]] bool enabled(std::int64_t iteration) const noexcept {
    return interval && floor_mod(iteration - offset, *interval) == 0;
  }

  /// How many times it has fired up to and including `iteration`.
  [[nodiscard]] CAIRN_DECL std::int64_t count(std::int64_t iteration) const noexcept;

  /// Whether every firing of this one is also a firing of `other` (shutdowns fall on
  /// checkpoints, alerts on logs). A disabled interval is a sub-interval of anything.
  [[nodiscard]] CAIRN_DECL bool is_sub_interval(interval_config const& other) const noexcept;

  /// Why this is not a sub-interval of `other`, or nothing when it is. `name` and `other_name`
  /// say what the intervals are for, as in "shutdown" and "checkpoint".
  [[nodiscard]] CAIRN_DECL std::optional<std::string>
  sub_interval_problem(interval_config const& other, std::string const& name, std::string const& other_name) const;

  /// "(every 100 iterations from 0)" or "(disabled)".
  [[nodiscard]] CAIRN_DECL std::string describe() const;

  void validate(validation&) {
    if (interval) offset %= *interval;
  }

private:
  static constexpr std::int64_t floor_mod(std::int64_t a, std::int64_t b) noexcept {
    auto r = a % b;
    return r < 0 ? r + b : r;
  }
};
BOOST_DESCRIBE_STRUCT(interval_config, (), (interval, offset))

constexpr auto cairn_fields(interval_config const*) {
  return fields(
      field(&interval_config::interval, "Iterations between firings. Unset disables.", hint::feature, check::positive),
      field(&interval_config::offset, "Iteration of the first firing, reduced modulo the interval at validation.",
            hint::feature, check::non_negative));
}

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/training/impl/interval.ipp>
#endif
