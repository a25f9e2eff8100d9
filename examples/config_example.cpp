// The smallest real cairn program: a described config read from a JSON file and
// `key.path=value` overrides, validated, documented and printed.
//
//     cairn-config-example [--config FILE.json] [key.path=value ...]
//     cairn-config-example --help      # documentation tree
//     cairn-config-example --schema    # JSON Schema
#include <cairn/config.hpp>

#include <boost/describe/class.hpp>
#include <boost/describe/enum.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace example {

BOOST_DEFINE_ENUM_CLASS(optimizer_kind, adam, sgd)

struct model_config {
  std::int32_t hidden_size = 64;
  std::int32_t layers = 2;
};
BOOST_DESCRIBE_STRUCT(model_config, (), (hidden_size, layers))

constexpr auto cairn_fields(model_config const*) {
  using namespace cairn;
  return fields(field(&model_config::hidden_size, "Width of every layer.", hint::architecture, check::positive),
                field(&model_config::layers, "Number of layers.", hint::architecture, check::in_range(1, 128)));
}

struct run_config {
  std::filesystem::path experiment_dir;
  std::int64_t train_iters = 100;
  std::optional<std::int64_t> checkpoint_interval = 10;
  optimizer_kind optimizer = optimizer_kind::adam;
  double learning_rate = 1e-3;
  model_config model;

  void validate(cairn::validation& v) {
    if (checkpoint_interval && experiment_dir.empty())
      v.error("experiment_dir", "required when checkpoints are enabled");
  }
};
BOOST_DESCRIBE_STRUCT(run_config, (),
                      (experiment_dir, train_iters, checkpoint_interval, optimizer, learning_rate, model))

constexpr auto cairn_fields(run_config const*) {
  using namespace cairn;
  return fields(field(&run_config::experiment_dir, "Directory of checkpoints.", hint::core),
                field(&run_config::train_iters, "Iterations to train.", hint::core, check::non_negative),
                field(&run_config::checkpoint_interval, "Iterations between checkpoints. Unset disables.",
                      hint::feature, check::positive),
                field(&run_config::optimizer, "Optimizer.", hint::core),
                field(&run_config::learning_rate, "Peak learning rate.", hint::core, check::positive),
                field(&run_config::model, "Model architecture.", hint::architecture));
}

} // namespace example

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::optional<std::filesystem::path> file;
  std::vector<std::string> overrides;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help") {
      std::fputs(cairn::document<example::run_config>().c_str(), stdout);
      return 0;
    }
    if (args[i] == "--schema") {
      std::fputs(cairn::to_pretty_json(cairn::json_schema<example::run_config>()).c_str(), stdout);
      return 0;
    }
    if (args[i] == "--config" && i + 1 < args.size()) {
      file = args[++i];
    } else if (args[i].starts_with("--")) {
      std::fprintf(stderr, "unknown option %s\n", args[i].c_str());
      return 2;
    } else {
      overrides.push_back(args[i]);
    }
  }
  try {
    auto config = file ? cairn::load<example::run_config>(*file, overrides)
                       : cairn::from_json<example::run_config>(boost::json::object{}, overrides);
    std::fputs(cairn::to_string(config).c_str(), stdout);
    return 0;
  } catch (cairn::config_error const& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
