#pragma once
// The example trainer's model (examples/train.cpp): a multi-layer perceptron learning a fixed
// random "teacher" network from seeded synthetic data, data-parallel, with Adam sharded
// ZeRO-style. Its configs, its deterministic data, its sharded state and optimizer, its step.

#include <cairn/cairn.hpp>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <boost/describe/class.hpp>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "parallel.hpp" // Adam sharded ZeRO-style, seeded values, the tensor-parallel collectives

namespace example {

struct mlp_config {
  std::int64_t inputs = 16;
  std::int64_t hidden = 64;
  std::int64_t layers = 2;
  std::int64_t outputs = 4;
};
BOOST_DESCRIBE_STRUCT(mlp_config, (), (inputs, hidden, layers, outputs))
constexpr auto cairn_fields(mlp_config const*) {
  using namespace cairn;
  return fields(field(&mlp_config::inputs, "Input features.", hint::architecture, check::positive),
                field(&mlp_config::hidden, "Width of the hidden layers.", hint::architecture, check::positive),
                field(&mlp_config::layers, "Hidden layers.", hint::architecture, check::in_range(1, 64)),
                field(&mlp_config::outputs, "Outputs.", hint::architecture, check::positive));
}

struct data_config {
  std::int64_t batch_size = 64;
  double noise = 0.01;
};
BOOST_DESCRIBE_STRUCT(data_config, (), (batch_size, noise))
constexpr auto cairn_fields(data_config const*) {
  using namespace cairn;
  return fields(
      field(&data_config::batch_size, "Samples per iteration, over all ranks.", hint::core, check::positive),
      field(&data_config::noise, "Amplitude of the noise on the targets.", hint::feature, check::at_least(0.0)));
}

/// cairn's trainer config (run, training, pretrained, device, comm) plus the example's own.
struct train_config : cairn::trainer_config {
  mlp_config model;
  optimizer_config optimizer;
  data_config data;
  cairn::parallel_config parallel;
  std::uint64_t seed = 1;
};
BOOST_DESCRIBE_STRUCT(train_config, (cairn::trainer_config), (model, optimizer, data, parallel, seed))
constexpr auto cairn_fields(train_config const*) {
  using namespace cairn;
  return fields(field(&train_config::model, "The model.", hint::architecture),
                field(&train_config::optimizer, "The optimizer.", hint::core),
                field(&train_config::data, "The synthetic data.", hint::core),
                field(&train_config::parallel,
                      "How the ranks share the model: the hidden layers alternate column-parallel (rows of "
                      "the weight and the bias split) and row-parallel (columns split) over a tensor-parallel "
                      "group, Megatron's pairing, the head following the last; pipeline stages own blocks of "
                      "layers and pass activations one micro-batch at a time (no schedule); this example keeps "
                      "whole blocks and gradients in memory at every ZeRO stage.",
                      hint::core),
                field(&train_config::seed, "Seed of the data and the initial weights.", hint::core));
}

// --- data: every value a pure function of (seed, stream, element index) ------------------------

enum stream : std::uint64_t { teacher_stream = 1000, init_stream = 2000, data_stream = 1ULL << 32 };

/// A parameter of the model: its name, its shape, how tensor parallelism splits it, and its
/// layer (the head is layer `layers`), which decides its pipeline stage.
struct parameter_spec {
  std::string name;
  std::vector<std::int64_t> shape;
  cairn::tensor_split split;
  std::int64_t layer;
};

/// Whether hidden layer `i` is column-parallel (its output split over the tensor-parallel
/// group) rather than row-parallel (its input split, its output summed over the group).
inline bool column_parallel(std::int64_t i) { return i % 2 == 0; }

/// The parameters of `m`, in order.
inline std::vector<parameter_spec> parameters(mlp_config const& m) {
  using cairn::tensor_split;
  std::vector<parameter_spec> out;
  for (std::int64_t i = 0, width = m.inputs; i < m.layers; ++i, width = m.hidden) {
    auto prefix = "layers." + std::to_string(i);
    bool column = column_parallel(i);
    out.push_back({prefix + ".weight", {m.hidden, width}, column ? tensor_split::rows : tensor_split::columns, i});
    out.push_back({prefix + ".bias", {m.hidden}, column ? tensor_split::rows : tensor_split::none, i});
  }
  bool split_input = column_parallel(m.layers - 1); // the last hidden layer's output is split
  out.push_back(
      {"head.weight", {m.outputs, m.hidden}, split_input ? tensor_split::columns : tensor_split::none, m.layers});
  out.push_back({"head.bias", {m.outputs}, tensor_split::none, m.layers});
  return out;
}

/// The grid of a run of `world_size` ranks from `parallel`, or a config_error naming each key
/// that does not fit the model or the job.
inline cairn::comm::parallel_grid grid_of(train_config const& cfg, int world_size) {
  auto const& p = cfg.parallel;
  std::vector<cairn::diagnostic> problems;
  if (p.tensor > cfg.model.hidden)
    problems.push_back({"parallel.tensor", "is " + std::to_string(p.tensor) + ", more than model.hidden (" +
                                               std::to_string(cfg.model.hidden) + "): a rank would hold no unit"});
  if (p.pipeline > cfg.model.layers + 1)
    problems.push_back({"parallel.pipeline", "is " + std::to_string(p.pipeline) + ", more than the " +
                                                 std::to_string(cfg.model.layers + 1) +
                                                 " layers of the model (model.layers and the head)"});
  std::optional<cairn::comm::parallel_grid> grid;
  try {
    grid = p.grid(world_size);
  } catch (cairn::config_error const& e) { // sizes that do not multiply to the job: with the rest
    problems.insert(problems.end(), e.errors().begin(), e.errors().end());
  }
  if (grid && cfg.data.batch_size < grid->size(cairn::comm::axis::data))
    problems.push_back({"data.batch_size", "must be at least the data-parallel ranks (" +
                                               std::to_string(grid->size(cairn::comm::axis::data)) + ")"});
  if (!problems.empty()) throw cairn::config_error(std::move(problems));
  return *grid;
}

/// The state of rank `rank` of a run on `grid`: for each parameter of its pipeline stage, its
/// place on the grid (`cairn::place_on_grid`) with the initial weights and zero Adam moments;
/// the tensor-parallel blocks of the initial weights into `blocks`, and the indices of those
/// parameters in `parameters(cfg.model)` into `held`. The initial weights are those of the
/// whole model whatever the grid.
inline cairn::model_state sharded_state(train_config const& cfg, cairn::comm::parallel_grid const& grid, int rank,
                                        c10::Device device, std::vector<at::Tensor>& blocks,
                                        std::vector<std::size_t>& held) {
  using cairn::comm::axis;
  cairn::model_state state;
  state.shard_names = {"weights", "exp_avg", "exp_avg_sq"};
  state.grid = grid; // the saves agree on the grid's rules, not on every rank's layout
  auto at = grid.coordinates(rank);
  auto specs = parameters(cfg.model);
  for (std::size_t k = 0; k < specs.size(); ++k) {
    auto const& spec = specs[k];
    if (cairn::comm::stage_of_layer(spec.layer, cfg.model.layers + 1, grid.size(axis::pipeline)) != at.pipeline)
      continue;
    auto fan_in = spec.shape.size() == 2 ? spec.shape[1] : spec.shape[0];
    auto whole = uniform(spec.shape, cfg.seed, init_stream + k, 1.0 / std::sqrt(double(fan_in)));
    blocks.push_back(add_block(state, spec.name, whole, spec.split, grid, rank, int(cfg.parallel.zero_stage), device));
    held.push_back(k);
  }
  return state;
}

// --- the trainer --------------------------------------------------------------------------------

/// One rank of the model on its grid: the tensor-parallel blocks of its pipeline stage's
/// parameters, and its shards of them and of their Adam moments.
class trainer {
public:
  trainer(train_config const& cfg, cairn::comm::grid_communicators& comms)
      : cfg_(cfg), comms_(comms), device_(cfg.device == cairn::device_type::cuda ? c10::kCUDA : c10::kCPU),
        specs_(parameters(cfg.model)),
        state_(sharded_state(cfg, comms.grid, comms.world.rank(), device_, blocks_, held_)) {
    for (auto& b : blocks_) b.requires_grad_(true);
  }

  cairn::model_state& state() noexcept { return state_; }

  /// Rebuilds the rank's blocks from its weight shards (after a load, after each update):
  /// gathered over the data-parallel group from its flat slices.
  void gather_weights() { gather_blocks(blocks_, state_, comms_.data, int(cfg_.parallel.zero_stage), device_); }

  /// One iteration: forward and backward on the data-parallel group's rows of the batch,
  /// gradients summed over it, Adam on this rank's shards, blocks gathered. The batch's loss.
  double step(std::int64_t iteration) {
    auto [x, y] = batch(data_stream + 2 * std::uint64_t(iteration));
    for (auto& b : blocks_)
      if (b.grad().defined()) b.grad().zero_();
    auto pass = forward(x, y);
    backward(pass);
    update(blocks_, state_, comms_, cfg_.optimizer, iteration, int(cfg_.parallel.zero_stage), device_);
    return total(pass.loss);
  }

  /// The mean loss over `batches` held-out batches.
  double validate(std::int64_t batches) {
    at::AutoGradMode no_grad(false);
    double sum = 0;
    for (std::int64_t b = 0; b < batches; ++b) {
      auto [x, y] = batch(data_stream - 2 - 2 * std::uint64_t(b));
      sum += total(forward(x, y).loss);
    }
    return sum / double(batches);
  }

private:
  /// What a forward pass leaves for the backward one: the last stage's share of the loss, and
  /// where activations crossed from the previous stage (`received`) and to the next (`sent`).
  struct forward_pass {
    at::Tensor loss, received, sent;
  };

  [[nodiscard]] int stages() const { return comms_.grid.size(cairn::comm::axis::pipeline); }
  [[nodiscard]] bool last_stage() const { return comms_.at.pipeline == stages() - 1; }
  [[nodiscard]] int stage_of(std::int64_t layer) const {
    return cairn::comm::stage_of_layer(layer, cfg_.model.layers + 1, stages());
  }

  /// The batch's loss summed over the data-parallel group, known to every rank.
  double total(at::Tensor const& loss) {
    auto value = last_stage() ? loss.detach().reshape({1}).to(comms_.data.device())
                              : at::zeros({1}, at::TensorOptions(comms_.data.device()));
    comms_.data.all_reduce(value, cairn::comm::reduce_op::sum);
    value = value.to(comms_.pipeline.device());
    comms_.pipeline.broadcast(value, stages() - 1);
    return value.to(at::kCPU).item<double>();
  }

  at::Tensor into_tensor_group(at::Tensor const& h) { return example::into_tensor_group(h, comms_.tensor, device_); }
  at::Tensor out_of_tensor_group(at::Tensor const& partial) {
    return example::out_of_tensor_group(partial, comms_.tensor, device_);
  }

  /// The width of the activations after layer `i` on this rank: its block of the hidden units
  /// after a column-parallel layer, all of them after a row-parallel one.
  [[nodiscard]] std::int64_t width_after(std::int64_t i) const {
    if (!column_parallel(i)) return cfg_.model.hidden;
    std::vector<std::uint64_t> dims{std::uint64_t(cfg_.model.hidden)};
    return std::int64_t(cairn::split_rows(dims, comms_.at.tensor, comms_.tensor.size()).lengths[0]);
  }

  /// The forward pass of this rank's stage, activations passed from stage to stage over the
  /// pipeline group.
  forward_pass forward(at::Tensor const& x, at::Tensor const& y) {
    forward_pass pass;
    auto h = x;
    std::size_t k = 0; // this rank's blocks, in order
    for (std::int64_t i = 0; i <= cfg_.model.layers; ++i) {
      if (i > 0 && stage_of(i) != stage_of(i - 1)) { // the activations cross to the next stage
        int from = stage_of(i - 1);
        if (comms_.at.pipeline == from) pass.sent = h;
        auto crossing = comms_.at.pipeline == from
                            ? h.detach().contiguous().to(comms_.pipeline.device())
                            : at::empty({x.size(0), width_after(i - 1)}, at::TensorOptions(comms_.pipeline.device()));
        comms_.pipeline.broadcast(crossing, from);
        if (comms_.at.pipeline == stage_of(i)) h = pass.received = crossing.to(device_).requires_grad_(true);
      }
      if (stage_of(i) != comms_.at.pipeline) continue;
      auto const& w = blocks_[k];
      auto const& b = blocks_[k + 1];
      k += 2;
      bool split_input = i == cfg_.model.layers ? column_parallel(i - 1) : !column_parallel(i);
      at::Tensor out;
      if (split_input) // row-parallel: partial sums over the group
        out = out_of_tensor_group(at::matmul(h, w.t())) + b;
      else if (specs_[held_[k - 2]].split == cairn::tensor_split::rows) // column-parallel
        out = at::matmul(into_tensor_group(h), w.t()) + b;
      else // the whole of it on every rank of the group
        out = at::matmul(h, w.t()) + b;
      h = i == cfg_.model.layers ? out : at::tanh(out);
    }
    if (last_stage()) pass.loss = (h - y).pow(2).sum() / double(cfg_.data.batch_size * cfg_.model.outputs);
    return pass;
  }

  /// The backward pass, stage after stage from the last: each sends the gradient of what it
  /// received to the stage before.
  void backward(forward_pass const& pass) {
    for (int stage = stages() - 1; stage >= 0; --stage) {
      if (comms_.at.pipeline == stage) {
        if (stage == stages() - 1)
          pass.loss.backward();
        else
          pass.sent.backward(incoming_);
      }
      if (stage == 0) break;
      auto first = first_layer_of(stage);
      auto crossing = comms_.at.pipeline == stage ? pass.received.grad().contiguous().to(comms_.pipeline.device())
                                                  : at::empty({pass_rows_, width_after(first - 1)},
                                                              at::TensorOptions(comms_.pipeline.device()));
      comms_.pipeline.broadcast(crossing, stage);
      if (comms_.at.pipeline == stage - 1) incoming_ = crossing.to(device_);
    }
  }

  [[nodiscard]] std::int64_t first_layer_of(int stage) const {
    std::int64_t i = 0;
    while (stage_of(i) != stage) ++i;
    return i;
  }

  /// This data-parallel group's rows of the batch of `stream`: inputs, and the teacher's
  /// outputs plus noise.
  std::pair<at::Tensor, at::Tensor> batch(std::uint64_t stream) {
    auto const& m = cfg_.model;
    auto b = cfg_.data.batch_size;
    auto x = uniform({b, m.inputs}, cfg_.seed, stream, 1.0);
    auto w1 = uniform({32, m.inputs}, cfg_.seed, teacher_stream, 1.0 / std::sqrt(double(m.inputs)));
    auto w2 = uniform({m.outputs, 32}, cfg_.seed, teacher_stream + 1, 1.0 / std::sqrt(32.0));
    auto y = at::matmul(at::tanh(at::matmul(x, w1.t())), w2.t()) +
             uniform({b, m.outputs}, cfg_.seed, stream + 1, cfg_.data.noise);
    auto rank = comms_.at.data, size = comms_.data.size();
    auto begin = b * rank / size, end = b * (rank + 1) / size;
    pass_rows_ = end - begin;
    return {x.slice(0, begin, end).to(device_), y.slice(0, begin, end).to(device_)};
  }

  train_config const& cfg_;
  cairn::comm::grid_communicators& comms_;
  c10::Device device_;
  std::vector<parameter_spec> specs_;
  std::vector<at::Tensor> blocks_; // this rank's tensor-parallel blocks of its stage's parameters
  std::vector<std::size_t> held_;  // their indices in specs_
  cairn::model_state state_;       // this rank's shards of the weights and the optimizer state
  at::Tensor incoming_;            // the gradient of what this stage sent, from the next
  std::int64_t pass_rows_ = 0;     // rows of the current batch on this rank
};

} // namespace example
