#pragma once

// Configs shaped like a real trainer's, shared by the config tests.

#include <cairn/config.hpp>

#include <boost/describe/class.hpp>
#include <boost/describe/enum.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fixture {

BOOST_DEFINE_ENUM_CLASS(optimizer_kind, adam, sgd)

struct interval_config {
  std::optional<std::int64_t> interval;
  std::int64_t offset = 0;

  void validate(cairn::validation&) {
    if (interval) offset %= *interval;
  }
};
BOOST_DESCRIBE_STRUCT(interval_config, (), (interval, offset))

constexpr auto cairn_fields(interval_config const*) {
  using namespace cairn;
  return fields(
      field(&interval_config::interval, "Iterations between firings. Unset disables.", hint::feature, check::positive),
      field(&interval_config::offset, "Iteration of the first firing.", hint::feature, check::non_negative));
}

struct logs_config : interval_config {
  logs_config() { interval = 100; }
};
BOOST_DESCRIBE_STRUCT(logs_config, (interval_config), ())

constexpr auto cairn_fields(logs_config const*) {
  using namespace cairn;
  return fields(update(&logs_config::interval)
                    .description("Iterations between metric logs. Unset disables logging.")
                    .hint(hint::logging)
                    .checks(check::positive, check::at_most(1000000)));
}

struct optimizer_config {
  optimizer_kind kind = optimizer_kind::adam;
  double learning_rate = 1e-3;
  std::vector<double> betas{0.9, 0.999};
};
BOOST_DESCRIBE_STRUCT(optimizer_config, (), (kind, learning_rate, betas))

constexpr auto cairn_fields(optimizer_config const*) {
  using namespace cairn;
  return fields(field(&optimizer_config::kind, "Optimizer.", hint::core),
                field(&optimizer_config::learning_rate, "Peak learning rate.", hint::core, check::positive),
                field(&optimizer_config::betas, "Adam betas.", hint::expert, check::non_empty));
}

struct model_config {
  std::int32_t hidden_size = 64;
  std::int32_t layers = 2;
  double dropout = 0.0;
};
BOOST_DESCRIBE_STRUCT(model_config, (), (hidden_size, layers, dropout))

constexpr auto cairn_fields(model_config const*) {
  using namespace cairn;
  return fields(field(&model_config::hidden_size, "Width of every layer.", hint::architecture, check::positive),
                field(&model_config::layers, "Number of layers.", hint::architecture, check::in_range(1, 128)),
                field(&model_config::dropout, "Dropout probability.", hint::feature, check::in_range(0.0, 1.0)));
}

struct run_config {
  std::filesystem::path experiment_dir;
  std::optional<std::string> name;
  std::map<std::string, std::string> environment;
};
BOOST_DESCRIBE_STRUCT(run_config, (), (experiment_dir, name, environment))

constexpr auto cairn_fields(run_config const*) {
  using namespace cairn;
  return fields(field(&run_config::experiment_dir, "Where checkpoints go.", hint::core),
                field(&run_config::name, "Name of the run.", hint::optional, check::non_empty),
                field(&run_config::environment, "Extra environment variables.", hint::expert));
}

struct trainer_config {
  run_config run;
  model_config model;
  optimizer_config optimizer;
  logs_config logs;
  std::int32_t seed = 1234;
  std::int64_t train_iters = 0;

  void validate(cairn::validation& v) {
    if (train_iters > 0 && run.experiment_dir.empty()) v.error("run.experiment_dir", "required when train_iters > 0");
  }
};
BOOST_DESCRIBE_STRUCT(trainer_config, (), (run, model, optimizer, logs, seed, train_iters))

constexpr auto cairn_fields(trainer_config const*) {
  using namespace cairn;
  return fields(field(&trainer_config::run, "Run settings.", hint::core),
                field(&trainer_config::model, "The model.", hint::architecture),
                field(&trainer_config::optimizer, "The optimizer.", hint::core),
                field(&trainer_config::logs, "Metric logs.", hint::logging),
                field(&trainer_config::seed, "Seed of data and initialisation.", hint::core),
                field(&trainer_config::train_iters, "Iterations to train.", hint::core, check::non_negative));
}

} // namespace fixture
