#pragma once
// cairn: requires libtorch

// Assembling a whole parameter from the ranks' shards, for the formats that store whole tensors.

#include <cairn/checkpoint/files.hpp>
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/checkpoint/tensor.hpp>
#include <cairn/comm/collectives.hpp>
#include <cairn/config/json.hpp>
#include <cairn/error.hpp>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace cairn::detail {

/// Every rank's layout, in rank order, on every rank. Collective.
template <class Comm> std::vector<rank_layout> all_rank_layouts(model_state const& state, Comm& comm) {
  std::vector<rank_layout> ranks;
  for (auto const& text : comm::all_gather_strings(comm, compact(to_json(state.layout()))))
    ranks.push_back(parse<rank_layout>(parse_json(text)));
  return ranks;
}

/// Shard `shard` of parameter `whole` (as every rank's `ranks` layout holds it), whole, as a
/// flat CPU tensor on rank `destination`; nothing on the others. Collective unless every rank
/// holds the whole parameter (one process, or replicated), when the destination uses its own.
template <class Comm>
std::optional<at::Tensor> gather_whole(model_state const& state, Comm& comm, std::vector<rank_layout> const& ranks,
                                       parameter_layout const& whole, std::size_t shard, int destination) {
  parameter_state const* mine = nullptr;
  for (auto const& p : state.parameters)
    if (p.layout.name == whole.name) mine = &p;
  auto numel = whole_numel(whole);
  bool everyone_whole = std::all_of(ranks.begin(), ranks.end(), [&](rank_layout const& r) {
    auto const* held = r.find(whole.name);
    return held && held->shard.numel() == numel && held->shard.box_numel() == numel;
  });
  if (everyone_whole) {
    if (comm.rank() != destination) return std::nullopt;
    return mine->shards[shard].to(c10::Device(c10::kCPU)).reshape({-1}).contiguous();
  }
  // Gathered as bytes: not every backend carries every element type (Gloo has no bfloat16).
  bool contributes = mine && (!mine->layout.replicated || comm.rank() == 0);
  auto local = contributes ? mine->shards[shard].to(c10::Device(c10::kCPU)).reshape({-1}).contiguous().view(at::kByte)
                           : at::empty({0}, at::TensorOptions().dtype(at::kByte));
  auto parts = comm::gather(comm, local.to(comm.device()), destination); // to the destination only
  if (comm.rank() != destination) return std::nullopt;
  auto out = at::empty({static_cast<std::int64_t>(numel)}, at::TensorOptions().dtype(to_scalar_type(whole.dtype)));
  auto target = tensor_bytes(out);
  auto size = io::size_of(whole.dtype);
  std::uint64_t covered = 0;
  for (std::size_t r = 0; r < parts.size(); ++r) {
    auto const* held = ranks[r].find(whole.name);
    if (!held || parts[r].numel() == 0) continue;
    auto part = parts[r].to(c10::Device(c10::kCPU)).contiguous();
    auto source = tensor_bytes(part);
    for (auto const& run : overlap(whole.shape, held->shard, shard_layout::whole(whole.shape))) {
      std::memcpy(target.data() + run.target * size, source.data() + run.source * size, run.length * size);
      covered += run.length;
    }
  }
  if (covered != numel)
    throw error("cannot save '" + tensor_name(whole.name, state.shard_names[shard]) + "': the ranks hold " +
                std::to_string(covered) + " of its " + std::to_string(numel) + " elements");
  return out;
}

} // namespace cairn::detail
