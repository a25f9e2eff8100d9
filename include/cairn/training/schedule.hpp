#pragma once

#include <cairn/training/interval.hpp>

#include <boost/describe/class.hpp>

#include <cstdint>

namespace cairn {

/// Stops training cleanly (exit status 0) after the checkpoint at a firing. Must be a
/// sub-interval of the checkpoints, so that a shutdown always has a checkpoint to resume from.
struct shutdown_config : interval_config {};
BOOST_DESCRIBE_STRUCT(shutdown_config, (interval_config), ())

constexpr auto cairn_fields(shutdown_config const*) {
  return fields(update(&shutdown_config::interval)
                    .description("Iterations between automated shutdowns. Unset disables them. Must be a "
                                 "sub-interval of the checkpoint interval."));
}

/// Validation runs: how often, and for how many iterations each.
struct validation_config : interval_config {
  std::int64_t iterations = 0;

  void validate(validation& v) {
    if (enabled() && iterations == 0) v.error("iterations", "must be > 0 when validation is enabled");
  }
};
BOOST_DESCRIBE_STRUCT(validation_config, (interval_config), (iterations))

constexpr auto cairn_fields(validation_config const*) {
  return fields(
      update(&validation_config::interval).description("Iterations between validations. Unset disables them."),
      field(&validation_config::iterations, "Iterations of each validation.", hint::feature, check::non_negative));
}

/// How often metrics are logged.
struct metrics_logs_config : interval_config {
  metrics_logs_config() { interval = 100; }
};
BOOST_DESCRIBE_STRUCT(metrics_logs_config, (interval_config), ())

constexpr auto cairn_fields(metrics_logs_config const*) {
  return fields(update(&metrics_logs_config::interval)
                    .description("Iterations between metric logs. Unset disables logging.")
                    .hint(hint::logging));
}

/// Status posts (alerts) to an experiment tracker. Must be a sub-interval of the logs: an
/// alert can only report metrics that were logged.
struct alerts_config : interval_config {};
BOOST_DESCRIBE_STRUCT(alerts_config, (interval_config), ())

constexpr auto cairn_fields(alerts_config const*) {
  return fields(update(&alerts_config::interval)
                    .description("Iterations between alerts. Unset disables them. Must be a sub-interval of the "
                                 "metric logs.")
                    .hint(hint::logging));
}

} // namespace cairn
