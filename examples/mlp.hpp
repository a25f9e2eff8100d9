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
#include <string>
#include <utility>
#include <vector>

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

struct optimizer_config {
  double learning_rate = 3e-3, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
};
BOOST_DESCRIBE_STRUCT(optimizer_config, (), (learning_rate, beta1, beta2, epsilon))
constexpr auto cairn_fields(optimizer_config const*) {
  using namespace cairn;
  using o = optimizer_config;
  return fields(field(&o::learning_rate, "Adam's learning rate.", hint::core, check::positive),
                field(&o::beta1, "Adam's first-moment decay.", hint::optional, check::in_range(0.0, 0.999999)),
                field(&o::beta2, "Adam's second-moment decay.", hint::optional, check::in_range(0.0, 0.999999)),
                field(&o::epsilon, "Adam's epsilon.", hint::expert, check::positive));
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

struct parallel_config {
  std::int64_t zero_stage = 1;
};
BOOST_DESCRIBE_STRUCT(parallel_config, (), (zero_stage))
constexpr auto cairn_fields(parallel_config const*) {
  using namespace cairn;
  return fields(field(&parallel_config::zero_stage,
                      "How the data-parallel ranks hold the weights and Adam's moments: 0, each all of them "
                      "(replicated; a checkpoint writes each tensor once, spread over the ranks); 1, a flat slice "
                      "each (ZeRO stage 1). Either resumes from the other.",
                      hint::core, check::in_range(0, 1)));
}

/// cairn's trainer config (run, training, pretrained, device, comm) plus the example's own.
struct train_config : cairn::trainer_config {
  mlp_config model;
  optimizer_config optimizer;
  data_config data;
  parallel_config parallel;
  std::uint64_t seed = 1;
};
BOOST_DESCRIBE_STRUCT(train_config, (cairn::trainer_config), (model, optimizer, data, parallel, seed))
constexpr auto cairn_fields(train_config const*) {
  using namespace cairn;
  return fields(field(&train_config::model, "The model.", hint::architecture),
                field(&train_config::optimizer, "The optimizer.", hint::core),
                field(&train_config::data, "The synthetic data.", hint::core),
                field(&train_config::parallel, "How the ranks share the model.", hint::core),
                field(&train_config::seed, "Seed of the data and the initial weights.", hint::core));
}

// --- data: every value a pure function of (seed, stream, element index) ------------------------

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Values uniform in [-scale, scale).
inline at::Tensor uniform(std::vector<std::int64_t> const& shape, std::uint64_t seed, std::uint64_t stream,
                          double scale) {
  auto t = at::empty(shape, at::kFloat);
  auto* data = t.data_ptr<float>();
  auto base = mix(seed ^ mix(stream));
  for (std::int64_t i = 0; i < t.numel(); ++i)
    data[i] = static_cast<float>((2 * (double(mix(base + std::uint64_t(i)) >> 11) * 0x1.0p-53) - 1) * scale);
  return t;
}

enum stream : std::uint64_t { teacher_stream = 1000, init_stream = 2000, data_stream = 1ULL << 32 };

/// The parameters of `m`: names and shapes.
inline std::vector<std::pair<std::string, std::vector<std::int64_t>>> parameters(mlp_config const& m) {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> out;
  for (std::int64_t i = 0, width = m.inputs; i < m.layers; ++i, width = m.hidden) {
    out.push_back({"layers." + std::to_string(i) + ".weight", {m.hidden, width}});
    out.push_back({"layers." + std::to_string(i) + ".bias", {m.hidden}});
  }
  out.push_back({"head.weight", {m.outputs, m.layers > 0 ? m.hidden : m.inputs}});
  out.push_back({"head.bias", {m.outputs}});
  return out;
}

/// Rank `rank` of `size`'s state of the model: a flat (ZeRO) slice of every parameter's
/// initial weights, or all of them replicated (ZeRO stage 0), its Adam moments zero; the whole
/// initial weights into `whole`.
inline cairn::model_state sharded_state(train_config const& cfg, int rank, int size, c10::Device device,
                                        std::vector<at::Tensor>& whole) {
  cairn::model_state state;
  state.shard_names = {"weights", "exp_avg", "exp_avg_sq"};
  auto shapes = parameters(cfg.model);
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    auto const& [name, shape] = shapes[k];
    auto fan_in = shape.size() == 2 ? shape[1] : shape[0];
    whole.push_back(uniform(shape, cfg.seed, init_stream + k, 1.0 / std::sqrt(double(fan_in))).to(device));
    std::vector<std::uint64_t> dims(shape.begin(), shape.end());
    if (cfg.parallel.zero_stage == 0) // one replica set: the same whole tensor on every rank
      cairn::add_parameter(state, name, whole.back(), cairn::flat_slice(dims, 0, 1), true);
    else
      cairn::add_parameter(state, name, whole.back(), cairn::flat_slice(dims, rank, size));
  }
  return state;
}

/// Adam on this rank's flat slices (all of each tensor at ZeRO stage 0), from the whole flat
/// gradient of the model.
inline void zero_adam(cairn::model_state& state, at::Tensor const& gradient, optimizer_config const& o,
                      std::int64_t iteration) {
  at::AutoGradMode no_grad(false);
  auto correction1 = 1 - std::pow(o.beta1, double(iteration)), correction2 = 1 - std::pow(o.beta2, double(iteration));
  std::int64_t offset = 0;
  for (auto& p : state.parameters) {
    auto begin = offset + static_cast<std::int64_t>(p.layout.shard.flat->begin);
    auto g = gradient.slice(0, begin, begin + p.shards[0].numel());
    auto &w = p.shards[0], &m = p.shards[1], &v = p.shards[2];
    m.mul_(o.beta1).add_(g, 1 - o.beta1);
    v.mul_(o.beta2).addcmul_(g, g, 1 - o.beta2);
    w.addcdiv_(m, (v / correction2).sqrt_().add_(o.epsilon), -o.learning_rate / correction1);
    offset += static_cast<std::int64_t>(cairn::shard_layout::whole(p.layout.shape).box_numel());
  }
}

// --- the trainer --------------------------------------------------------------------------------

class trainer {
public:
  trainer(train_config const& cfg, cairn::comm::any_communicator& comm)
      : cfg_(cfg), comm_(comm), device_(cfg.device == cairn::device_type::cuda ? c10::kCUDA : c10::kCPU),
        state_(sharded_state(cfg, comm.rank(), comm.size(), device_, whole_)) {
    for (auto& w : whole_) w.requires_grad_(true);
  }

  cairn::model_state& state() noexcept { return state_; }

  /// Rebuilds every rank's whole parameters from the weight shards (after a load).
  void gather_weights() {
    at::AutoGradMode no_grad(false);
    for (std::size_t k = 0; k < whole_.size(); ++k) {
      auto const& weights = state_.parameters[k].shards[0];
      if (cfg_.parallel.zero_stage == 0)
        whole_[k].view({-1}).copy_(weights);
      else
        whole_[k].view({-1}).copy_(at::cat(comm_.all_gather(weights.to(comm_.device()))).to(device_));
    }
  }

  /// One iteration: forward and backward on this rank's rows of the batch, gradients summed over
  /// the ranks, Adam on this rank's shards, weights gathered. The batch's loss.
  double step(std::int64_t iteration) {
    auto [x, y] = batch(data_stream + 2 * std::uint64_t(iteration));
    auto local = loss_sum(x, y);
    for (auto& p : whole_)
      if (p.grad().defined()) p.grad().zero_();
    local.backward();
    std::vector<at::Tensor> grads;
    for (auto& p : whole_) grads.push_back(p.grad().view({-1}));
    auto gradient = at::cat(grads).to(comm_.device());
    comm_.all_reduce(gradient, cairn::comm::reduce_op::sum);
    zero_adam(state_, gradient.to(device_), cfg_.optimizer, iteration);
    gather_weights();
    return sum(local.detach());
  }

  /// The mean loss over `batches` held-out batches.
  double validate(std::int64_t batches) {
    at::AutoGradMode no_grad(false);
    double total = 0;
    for (std::int64_t b = 0; b < batches; ++b) {
      auto [x, y] = batch(data_stream - 2 - 2 * std::uint64_t(b));
      total += sum(loss_sum(x, y));
    }
    return total / double(batches);
  }

private:
  double sum(at::Tensor const& value) {
    auto total = value.reshape({1}).to(comm_.device());
    comm_.all_reduce(total, cairn::comm::reduce_op::sum);
    return total.to(at::kCPU).item<double>();
  }

  /// This rank's rows of the batch of `stream`: inputs, and the teacher's outputs plus noise.
  std::pair<at::Tensor, at::Tensor> batch(std::uint64_t stream) {
    auto const& m = cfg_.model;
    auto b = cfg_.data.batch_size;
    auto x = uniform({b, m.inputs}, cfg_.seed, stream, 1.0);
    auto w1 = uniform({32, m.inputs}, cfg_.seed, teacher_stream, 1.0 / std::sqrt(double(m.inputs)));
    auto w2 = uniform({m.outputs, 32}, cfg_.seed, teacher_stream + 1, 1.0 / std::sqrt(32.0));
    auto y = at::matmul(at::tanh(at::matmul(x, w1.t())), w2.t()) +
             uniform({b, m.outputs}, cfg_.seed, stream + 1, cfg_.data.noise);
    auto begin = b * comm_.rank() / comm_.size(), end = b * (comm_.rank() + 1) / comm_.size();
    return {x.slice(0, begin, end).to(device_), y.slice(0, begin, end).to(device_)};
  }

  /// This rank's share of the batch's mean squared error.
  at::Tensor loss_sum(at::Tensor const& x, at::Tensor const& y) {
    auto h = x;
    std::size_t k = 0;
    for (std::int64_t i = 0; i < cfg_.model.layers; ++i, k += 2)
      h = at::tanh(at::matmul(h, whole_[k].t()) + whole_[k + 1]);
    auto out = at::matmul(h, whole_[k].t()) + whole_[k + 1];
    return (out - y).pow(2).sum() / double(cfg_.data.batch_size * cfg_.model.outputs);
  }

  train_config const& cfg_;
  cairn::comm::any_communicator& comm_;
  c10::Device device_;
  std::vector<at::Tensor> whole_; // whole parameters, on every rank
  cairn::model_state state_;      // this rank's shards of weights and optimizer state
};

} // namespace example
