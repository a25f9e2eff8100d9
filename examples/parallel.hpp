#pragma once
// What both example trainers (cairn-train, cairn-llama) share: Adam's config and its ZeRO-sharded
// step, seeded values, the tensor-parallel collectives with their gradients (Megatron's "f" and
// "g"), and placing a parameter on the grid as a block to compute with and shards to checkpoint.

#include <cairn/cairn.hpp>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <boost/describe/class.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace example {

struct optimizer_config {
  double learning_rate = 3e-3, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;

  /// The step is taken in float32, the weights' type: its size at the first iteration,
  /// learning_rate / (1 - beta1), must be a float32 (1e38 is a double, and its step is not).
  void validate(cairn::validation& v) const {
    auto first_step = learning_rate / (1 - beta1);
    if (!(first_step <= static_cast<double>(std::numeric_limits<float>::max()))) {
      char text[160];
      std::snprintf(text, sizeof text, "%g gives a first step of %g (learning_rate / (1 - beta1))", learning_rate,
                    first_step);
      v.error("learning_rate", std::string(text) + ", past the largest float32 of the weights (3.4e38)");
    }
  }
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

// --- seeded values: every value a pure function of (seed, stream, element index) -----------------

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

// --- tensor parallelism ----------------------------------------------------------------------------

/// Identity forward; backward, the gradient summed over the tensor-parallel group `group` (each
/// rank's column-parallel block gave its share of it): Megatron's "f" before a column-parallel
/// layer.
inline at::Tensor into_tensor_group(at::Tensor const& h, cairn::comm::any_communicator& group, c10::Device device) {
  if (group.size() == 1 || !h.requires_grad()) return h;
  auto out = h.clone();
  out.register_hook([&group, device](at::Tensor const& grad) {
    auto sum = grad.contiguous().to(group.device());
    group.all_reduce(sum, cairn::comm::reduce_op::sum);
    return sum.to(device);
  });
  return out;
}

/// Forward, the partial sums of a row-parallel layer summed over `group`; backward, the identity:
/// Megatron's "g". The sum is exact: the partial's value cancels.
inline at::Tensor out_of_tensor_group(at::Tensor const& partial, cairn::comm::any_communicator& group,
                                      c10::Device device) {
  if (group.size() == 1) return partial;
  auto sum = partial.detach().contiguous().to(group.device());
  group.all_reduce(sum, cairn::comm::reduce_op::sum);
  sum = sum.to(device);
  return partial.requires_grad() ? sum + (partial - partial.detach()) : sum;
}

/// Every rank's `part` of `group`, side by side along the last dimension (parts may differ in
/// width); backward, this rank's part of the gradient.
inline at::Tensor concatenated(at::Tensor const& part, cairn::comm::any_communicator& group, c10::Device device) {
  if (group.size() == 1) return part;
  auto rows = part.sizes().vec();
  std::vector<at::Tensor> parts;
  for (auto const& flat : group.all_gather(part.detach().contiguous().to(group.device()))) {
    rows.back() = -1;
    parts.push_back(flat.to(device).view(rows));
  }
  parts[static_cast<std::size_t>(group.rank())] = part; // the gradient flows into this rank's own
  return at::cat(parts, -1);
}

// --- sharded state --------------------------------------------------------------------------------

/// Adds parameter `name` of the whole tensor `whole` (the same on every rank) to this rank's
/// `state`, placed on `grid` (`cairn::place_on_grid`) with its Adam moments zero, and returns
/// its tensor-parallel block on `device`: the part of it this rank computes with. The state
/// owns its shard (`add_parameter_copy`: the whole is dropped, and a block of columns is not
/// contiguous): Adam updates the state's tensors, and `gather_blocks` rebuilds the blocks
/// from them.
inline at::Tensor add_block(cairn::model_state& state, std::string name, at::Tensor const& whole,
                            cairn::tensor_split split, cairn::comm::parallel_grid const& grid, int rank, int zero_stage,
                            c10::Device device) {
  using cairn::comm::axis;
  auto at = grid.coordinates(rank);
  std::vector<std::uint64_t> dims(whole.sizes().begin(), whole.sizes().end());
  auto place =
      cairn::place_on_grid(dims, split, at.tensor, grid.size(axis::tensor), at.data, grid.size(axis::data), zero_stage);
  auto box = place.shard;
  box.flat.reset();
  std::vector<std::int64_t> lengths(box.lengths.begin(), box.lengths.end());
  auto block = cairn::take_shard(whole, box).view(lengths).to(device);
  cairn::add_parameter_copy(state, std::move(name), whole.to(device), place.shard, place.replicated);
  return block;
}

/// Rebuilds each of `blocks` from its parameter's weight shard in `state` (same order): gathered
/// over the data-parallel group `data` from its flat slices at ZeRO stages 1 to 3.
inline void gather_blocks(std::vector<at::Tensor>& blocks, cairn::model_state const& state,
                          cairn::comm::any_communicator& data, int zero_stage, c10::Device device) {
  at::AutoGradMode no_grad(false);
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    auto const& weights = state.parameters[k].shards[0];
    if (zero_stage == 0)
      blocks[k].view({-1}).copy_(weights);
    else
      blocks[k].view({-1}).copy_(at::cat(data.all_gather(weights.to(data.device()))).to(device));
  }
}

/// Adam on this rank's flat slices of its blocks (all of each block at ZeRO stage 0), from the
/// flat gradient of its blocks.
inline void zero_adam(cairn::model_state& state, at::Tensor const& gradient, optimizer_config const& o,
                      std::int64_t iteration) {
  at::AutoGradMode no_grad(false);
  auto correction1 = 1 - std::pow(o.beta1, double(iteration)), correction2 = 1 - std::pow(o.beta2, double(iteration));
  std::int64_t offset = 0;
  for (auto& p : state.parameters) {
    auto const& shard = p.layout.shard;
    auto begin = offset + static_cast<std::int64_t>(shard.flat ? shard.flat->begin : 0);
    auto g = gradient.slice(0, begin, begin + p.shards[0].numel());
    auto &w = p.shards[0], &m = p.shards[1], &v = p.shards[2];
    m.mul_(o.beta1).add_(g, 1 - o.beta1);
    v.mul_(o.beta2).addcmul_(g, g, 1 - o.beta2);
    w.addcdiv_(m, (v / correction2).sqrt_().add_(o.epsilon), -o.learning_rate / correction1);
    offset += static_cast<std::int64_t>(shard.box_numel());
  }
}

/// After a backward pass: the gradients of `blocks` summed over the data-parallel group of `comms`,
/// Adam on this rank's shards in `state`, the blocks gathered back. Gradients that are not
/// finite are not applied: an error, so that no save holds what they would make.
inline void update(std::vector<at::Tensor>& blocks, cairn::model_state& state, cairn::comm::grid_communicators& comms,
                   optimizer_config const& o, std::int64_t iteration, int zero_stage, c10::Device device) {
  auto& data = comms.data;
  std::vector<at::Tensor> grads;
  for (auto& b : blocks)
    grads.push_back(b.grad().defined() ? b.grad().view({-1}) : at::zeros({b.numel()}, b.options()));
  auto gradient = at::cat(grads).to(data.device());
  data.all_reduce(gradient, cairn::comm::reduce_op::sum);
  // Decided by every rank of the job together: a stage or a tensor-parallel block whose
  // gradients alone are not finite stops every rank, not only its own data-parallel group.
  if (!cairn::comm::all_of(comms.world, at::isfinite(gradient).all().item<bool>()))
    throw std::runtime_error("iteration " + std::to_string(iteration) +
                             ": the gradients are not finite (NaN or infinite); not applied, the run stops (the "
                             "newest checkpoint holds the last finite weights: lower optimizer.learning_rate?)");
  zero_adam(state, gradient.to(device), o, iteration);
  gather_blocks(blocks, state, data, zero_stage, device);
}

} // namespace example
