// Definitions of <cairn/checkpoint/state.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/checkpoint/tensor.hpp>
#include <cairn/comm/collectives.hpp>
#include <cairn/config/json.hpp>
#include <cairn/error.hpp>
#include <cairn/io/checksum.hpp>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn {

CAIRN_DECL rank_layout model_state::layout() const {
  rank_layout out;
  for (auto const& p : parameters) out.parameters.push_back(p.layout);
  return out;
}

CAIRN_DECL parameter_state* model_state::find(std::string_view name) {
  for (auto& p : parameters)
    if (p.layout.name == name) return &p;
  return nullptr;
}

CAIRN_DECL std::uint64_t model_state::bytes(bool optimizer_state) const {
  std::uint64_t total = 0;
  for (auto const& p : parameters)
    for (std::size_t i = 0; i < p.shards.size() && (optimizer_state || i == 0); ++i)
      total += static_cast<std::uint64_t>(p.shards[i].defined() ? p.shards[i].nbytes() : 0);
  return total;
}

CAIRN_DECL void model_state::check() const {
  if (shard_names.empty() || shard_names.front() != "weights")
    throw checkpoint_error(checkpoint_errc::invalid_state, "model_state: the first state shard must be \"weights\"");
  if (auto problem = detail::item_problem(items))
    throw checkpoint_error(checkpoint_errc::invalid_state, "model_state: " + *problem);
  for (auto const& p : parameters) {
    auto const& name = p.layout.name;
    if (auto problem = p.layout.shard.problem(p.layout.shape))
      throw checkpoint_error(checkpoint_errc::invalid_state, "model_state: parameter '" + name + "': " + *problem);
    if (p.shards.size() != shard_names.size())
      throw checkpoint_error(checkpoint_errc::invalid_state, "model_state: parameter '" + name + "' has " +
                                                                 std::to_string(p.shards.size()) + " tensors for " +
                                                                 std::to_string(shard_names.size()) + " state shards");
    for (std::size_t i = 0; i < p.shards.size(); ++i) {
      auto const& t = p.shards[i];
      if (!t.defined() || static_cast<std::uint64_t>(t.numel()) != p.layout.shard.numel())
        throw checkpoint_error(checkpoint_errc::invalid_state,
                               "model_state: parameter '" + name + "' shard '" + shard_names[i] + "' holds " +
                                   (t.defined() ? std::to_string(t.numel()) : std::string("no")) +
                                   " elements, its layout " + std::to_string(p.layout.shard.numel()));
      if (to_dtype(t.scalar_type()) != p.layout.dtype)
        throw checkpoint_error(checkpoint_errc::invalid_state,
                               "model_state: parameter '" + name + "' shard '" + shard_names[i] + "' is " +
                                   std::string(io::name(to_dtype(t.scalar_type()))) + ", its layout " +
                                   std::string(io::name(p.layout.dtype)));
    }
  }
}

CAIRN_DECL std::vector<rank_layout> detail::all_rank_layouts(model_state const& state, comm::communicator_ref comm,
                                                             layout_exchange* reuse) {
  auto mine_text = detail::compact(to_json(state.layout()));
  auto hash = [](std::string const& text) { return io::checksum_of(std::as_bytes(std::span(text))); };
  auto mine = hash(mine_text);
  if (reuse) {
    // Unchanged everywhere, and the same exchange kept everywhere: the maximum of each value
    // and of its negation give its maximum and its minimum over the ranks, in one all-reduce.
    bool kept = reuse->ranks.size() == static_cast<std::size_t>(comm.size()) && reuse->mine == mine;
    auto low = static_cast<std::int64_t>(reuse->all & 0xffffffffU), high = static_cast<std::int64_t>(reuse->all >> 32);
    auto agreed = at::empty({5}, at::TensorOptions().dtype(at::kLong));
    auto* v = agreed.data_ptr<std::int64_t>();
    v[0] = kept ? 0 : 1;
    v[1] = low;
    v[2] = high;
    v[3] = -low;
    v[4] = -high;
    agreed = agreed.to(comm.device());
    comm.all_reduce(agreed, comm::reduce_op::max);
    agreed = agreed.to(c10::Device(c10::kCPU));
    v = agreed.data_ptr<std::int64_t>();
    if (v[0] == 0 && v[1] == -v[3] && v[2] == -v[4]) return reuse->ranks;
  }
  std::vector<rank_layout> ranks;
  io::checksum all;
  for (auto const& text : comm::all_gather_strings(comm, mine_text)) {
    ranks.push_back(parse<rank_layout>(parse_json(text)));
    auto one = hash(text);
    all.update(std::as_bytes(std::span(&one, 1)));
  }
  if (reuse) *reuse = {ranks, mine, all.value()};
  return ranks;
}

CAIRN_DECL at::Tensor take_shard(at::Tensor const& whole, shard_layout const& layout) {
  std::vector<std::uint64_t> shape(whole.sizes().begin(), whole.sizes().end());
  if (auto problem = layout.problem(shape))
    throw checkpoint_error(checkpoint_errc::invalid_state, "take_shard: " + *problem);
  auto box = whole;
  for (std::size_t d = 0; d < layout.offsets.size(); ++d)
    box = box.narrow(static_cast<std::int64_t>(d), static_cast<std::int64_t>(layout.offsets[d]),
                     static_cast<std::int64_t>(layout.lengths[d]));
  auto flat = box.contiguous().view({-1});
  if (layout.flat)
    flat = flat.slice(0, static_cast<std::int64_t>(layout.flat->begin), static_cast<std::int64_t>(layout.flat->end));
  return flat.clone();
}

CAIRN_DECL parameter_state& add_parameter(model_state& state, std::string name, at::Tensor const& whole,
                                          shard_layout layout, bool replicated) {
  std::vector<std::uint64_t> shape(whole.sizes().begin(), whole.sizes().end());
  auto dtype = to_dtype(whole.scalar_type()); // may throw: before the aggregate (GCC 12 destroys its members twice)
  parameter_state p{{std::move(name), std::move(shape), dtype, replicated, std::move(layout)}, {}};
  p.shards.push_back(take_shard(whole, p.layout.shard));
  for (std::size_t i = 1; i < state.shard_names.size(); ++i) p.shards.push_back(at::zeros_like(p.shards.front()));
  state.parameters.push_back(std::move(p));
  return state.parameters.back();
}

CAIRN_DECL parameter_state& add_parameter(model_state& state, std::string name, std::vector<std::uint64_t> shape,
                                          placement const& place, at::TensorOptions options) {
  auto dtype = to_dtype(c10::typeMetaToScalarType(options.dtype())); // may throw: before the aggregate
  auto elements = static_cast<std::int64_t>(place.shard.numel());
  std::vector<at::Tensor> shards;
  for (std::size_t i = 0; i < state.shard_names.size(); ++i) shards.push_back(at::zeros({elements}, options));
  auto shard = place.shard;
  parameter_state p{{std::move(name), std::move(shape), dtype, place.replicated, std::move(shard)}, std::move(shards)};
  state.parameters.push_back(std::move(p));
  return state.parameters.back();
}

CAIRN_DECL model_state whole_state(std::vector<std::pair<std::string, at::Tensor>> const& weights,
                                   std::vector<std::string> const& optimizer_shards) {
  model_state state;
  state.shard_names.insert(state.shard_names.end(), optimizer_shards.begin(), optimizer_shards.end());
  for (auto const& [name, tensor] : weights)
    add_parameter(state, name, tensor, shard_layout::whole({tensor.sizes().begin(), tensor.sizes().end()}));
  return state;
}

} // namespace cairn
