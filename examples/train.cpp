// cairn-train: a small but real data-parallel trainer built on cairn, to start from.
//
// A multi-layer perceptron learns a fixed random "teacher" network from seeded synthetic data.
// The ranks form a grid, tensor x pipeline x data parallel (parallel.tensor, .pipeline, .data;
// Megatron's order). The hidden layers alternate column- and row-parallel over a tensor-parallel
// group, pipeline stages own contiguous blocks of layers, and data-parallel ranks split the
// batch and sum their gradients. Adam is sharded ZeRO-style over the data-parallel group
// (parallel.zero_stage=1 to 3): each rank owns a flat slice of each of its tensor-parallel
// blocks, updates it with its slice of the optimizer state, and the slices are gathered back.
// What the checkpoints hold is exactly those slices: weights, exp_avg, exp_avg_sq. At
// parallel.zero_stage=0 the ranks of a data-parallel group hold and update whole blocks,
// replicated. A checkpoint of any grid resumes under any other.
//
//     cairn-train [--config FILE.json|FILE.yaml] [key.path=value ...]
//     cairn launch -n 2 -- cairn-train --config examples/train.json run.experiment_dir=runs/a
//     cairn-train convert input.path=... input.format=... output.path=... output.format=...
//     cairn-train layout --world-size N [key.path=value ...]   (for `cairn plan --layout`)
//
// Deterministic on CPU: the data of iteration i and the initial weights are pure functions of
// the seed, so a run killed at any iteration and resumed ends bitwise identical to an
// uninterrupted one on the same number of ranks.
#include <cairn/cairn.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "loop.hpp" // the command line, the training loop
#include "mlp.hpp"  // the model: its configs, data, sharded state and optimizer, its step

namespace example {

/// The Hugging Face style export: config.json keys and tensor names.
inline cairn::external::converter<mlp_config> converter() {
  using namespace cairn::external;
  auto mapping = config_mapping()
                     .renamed("inputs", "input_size")
                     .renamed("hidden", "hidden_size")
                     .renamed("layers", "num_hidden_layers")
                     .renamed("outputs", "output_size")
                     .constant("architectures", boost::json::array{"CairnMLPForRegression"})
                     .constant("hidden_act", "tanh");
  return {"cairn_mlp", mapping, [](mlp_config const& model) {
            std::vector<weight_rule> rules;
            for (std::int64_t i = 0; i < model.layers; ++i)
              for (std::string kind : {"weight", "bias"})
                rules.push_back(renamed("layers." + std::to_string(i) + "." + kind,
                                        "model.layers." + std::to_string(i) + "." + kind));
            rules.push_back(renamed("head.weight", "regressor.weight"));
            rules.push_back(renamed("head.bias", "regressor.bias"));
            return rules;
          }};
}

int train(train_config cfg) {
  if (cfg.device == cairn::device_type::cuda && !at::hasCUDA())
    throw cairn::config_error(std::vector<cairn::diagnostic>{{"device", "cuda is not available here"}});
  auto grid = grid_of(cfg, cairn::comm::environment_or_single().world_size); // before any rank waits
  auto comms = cairn::comm::connect(cfg.comm, cfg.device == cairn::device_type::cuda, grid, cfg.run.timeout(),
                                    cfg.training.checkpoint.local.copies());
  bool leader = comms.world.rank() == 0;
  cairn::manager_options options;
  options.log_progress = false; // it prints its own (loop.hpp)
  cairn::training_run run(cfg, &train_config::model, comms.world, converter(),
                          options);                                               // may apply pretrained's config
  if (comms.transfers) run.manager().set_transfer_communicator(*comms.transfers); // local tier's copies
  grid_of(cfg, grid.world_size());                                                // the final config fits it too
  trainer model(cfg, comms);                                                      // built from the final config
  auto start = run.start(model.state());
  if (run.started().kind != cairn::start_kind::fresh) model.gather_weights();
  report_start(run, start, leader);
  return train_loop(
      run, model.state(), cfg.training, start, leader, [&](std::int64_t it) { return model.step(it); },
      [&](std::int64_t it) {
        if (!cfg.training.validation.enabled(it)) return;
        auto validation = model.validate(cfg.training.validation.iterations);
        if (leader) std::printf("iteration %lld: validation loss %.6f\n", static_cast<long long>(it), validation);
      });
}

/// `cairn-train convert key=value…`: `cairn convert`, plus the external format through this
/// model's converter, both ways. The model's state comes from its config alone.
int convert(std::vector<std::string> arguments) {
  bool external_output = false, optimizer_given = false;
  for (auto const& a : arguments) {
    external_output = external_output || a == "output.format=external";
    optimizer_given = optimizer_given || a.starts_with("output.optimizer_state=");
  }
  if (external_output && !optimizer_given) arguments.push_back("output.optimizer_state=false"); // it holds none
  auto config = cairn::from_json<cairn::convert_config>(boost::json::object{}, arguments);
  auto config_of = [](mlp_config const& model) {
    train_config cfg;
    cfg.model = model;
    return cfg;
  };
  cairn::external::model_program<mlp_config> program{
      [&](mlp_config const& model) {
        std::vector<at::Tensor> blocks;
        std::vector<std::size_t> held;
        return sharded_state(config_of(model), cairn::comm::parallel_grid(1, 1, 1, 1), 0, c10::kCPU, blocks, held);
      },
      [&](mlp_config const& model) { return cairn::to_json(config_of(model)); },
      [](boost::json::value const& stored) { return cairn::parse_lenient<train_config>(stored).config.model; }};
  std::printf("%s\n", cairn::external::convert(config, converter(), program).c_str());
  return 0;
}

/// `cairn-train layout --world-size N [--config FILE] [key.path=value…]`: the layouts a run of N
/// ranks would hold, as JSON, for `cairn plan --layout` to check a resume before it starts.
int layout(int world_size, train_config const& cfg) {
  cairn::run_layout run;
  auto grid = grid_of(cfg, world_size);
  for (int rank = 0; rank < world_size; ++rank) {
    std::vector<at::Tensor> blocks;
    std::vector<std::size_t> held;
    auto state = sharded_state(cfg, grid, rank, c10::kCPU, blocks, held);
    run.shard_names = state.shard_names;
    run.ranks.push_back(state.layout());
  }
  if (auto rules = cairn::infer_rules(run.ranks)) { // the grid's rules: O(parameters) for any world size
    run.rules = std::move(rules);
    run.ranks.clear();
  }
  std::fputs(cairn::to_pretty_json(cairn::to_json(run)).c_str(), stdout);
  return 0;
}

} // namespace example

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "convert")
    return cairn::exit_status("cairn-train convert", [&] { return example::convert({argv + 2, argv + argc}); });
  int layout_ranks = 0; // `layout --world-size N`: argv[1..3], the config's arguments after them
  if (argc > 1 && std::string_view(argv[1]) == "layout" && (argc < 4 || std::string_view(argv[2]) != "--world-size")) {
    std::fprintf(stderr, "cairn-train layout: usage: cairn-train layout --world-size N [key.path=value ...]\n");
    return 2;
  }
  if (argc > 3 && std::string_view(argv[1]) == "layout" && std::string_view(argv[2]) == "--world-size") {
    layout_ranks = std::atoi(argv[3]);
    if (layout_ranks < 1) {
      std::fprintf(stderr, "cairn-train layout: --world-size needs a positive integer\n");
      return 2;
    }
    example::drop_arguments(argc, argv, 3);
  }
  auto cfg = example::parse_trainer_command_line<example::train_config>(
      argc, argv, "cairn-train",
      "Trains the example model, checkpointing, resuming and exporting as configured.\n"
      "Also: cairn-train convert input.path=... input.format=... output.path=... output.format=...\n"
      "      cairn-train layout --world-size N [key.path=value ...]");
  if (!cfg) return cfg.exit_status();
  if (layout_ranks > 0)
    return cairn::exit_status("cairn-train layout", [&] { return example::layout(layout_ranks, *cfg); });
  return cairn::exit_status("cairn-train", [&] { return example::train(std::move(*cfg)); });
}
