#pragma once

#include <cairn/training/save_policy.hpp>
#include <cairn/training/schedule.hpp>

#include <boost/describe/class.hpp>

#include <cstdint>

namespace cairn {

/// The training loop: how long, and when to checkpoint, export, shut down, validate and log.
struct training_config {
  std::int64_t train_iters = 0;
  checkpoint_config checkpoint;
  export_config export_; // key "export"
  shutdown_config shutdown;
  validation_config validation;
  metrics_logs_config logs;
  alerts_config alerts;

  void validate(cairn::validation& v) {
    if (auto problem = shutdown.sub_interval_problem(checkpoint, "shutdown", "checkpoint"))
      v.error("shutdown.interval", *problem);
    if (auto problem = alerts.sub_interval_problem(logs, "alert", "metric log")) v.error("alerts.interval", *problem);
    if (train_iters > 0 && !checkpoint.enabled())
      v.warning("checkpoint.interval", "checkpoints are disabled: a crash loses all progress since the start");
  }
};
BOOST_DESCRIBE_STRUCT(training_config, (), (train_iters, checkpoint, export_, shutdown, validation, logs, alerts))

constexpr auto cairn_fields(training_config const*) {
  return fields(field(&training_config::train_iters, "Iterations to train.", hint::core, check::non_negative),
                field(&training_config::checkpoint, "Checkpoints for resuming.", hint::core),
                field(&training_config::export_, "Exports for keeping and sharing.", hint::feature),
                field(&training_config::shutdown, "Automated shutdowns.", hint::feature),
                field(&training_config::validation, "Validation runs.", hint::feature),
                field(&training_config::logs, "Metric logs.", hint::logging),
                field(&training_config::alerts, "Alerts to an experiment tracker.", hint::logging));
}

} // namespace cairn
