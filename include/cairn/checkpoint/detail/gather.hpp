#pragma once
// cairn: requires libtorch

// Assembling a whole parameter from the ranks' shards, for the formats that store whole tensors.

#include <cairn/checkpoint/detail/save_files.hpp>
#include <cairn/checkpoint/format_files.hpp>
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

/// Where a gather's parts arrive on its destination: straight into `out` (`in_place`) when a
/// rank's part is one run of the whole tensor and the communicator works on CPU tensors, else
/// into a buffer of its own. Returns the elements placed in `out` already.
inline std::uint64_t receive_parts(std::vector<rank_layout> const& ranks, parameter_layout const& whole,
                                   std::vector<std::int64_t> const& sent, at::Tensor const& out, c10::Device device,
                                   std::vector<at::Tensor>& parts, std::vector<bool>& in_place) {
  auto size = io::size_of(whole.dtype);
  auto bytes = out.view(at::kByte);
  std::uint64_t covered = 0;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    if (sent[r] == 0) {
      parts[r] = at::empty({0}, at::TensorOptions().dtype(at::kByte).device(device));
      continue;
    }
    auto runs = overlap(whole.shape, ranks[r].find(whole.name)->shard, shard_layout::whole(whole.shape));
    if (device.is_cpu() && runs.size() == 1 && runs[0].source == 0 &&
        static_cast<std::int64_t>(runs[0].length * size) == sent[r]) {
      parts[r] = bytes.narrow(0, static_cast<std::int64_t>(runs[0].target * size), sent[r]);
      in_place[r] = true;
      covered += runs[0].length;
    } else {
      parts[r] = at::empty({sent[r]}, at::TensorOptions().dtype(at::kByte).device(device));
    }
  }
  return covered;
}

/// Copies the parts that did not arrive in place to where they go in `out`; returns the
/// elements copied.
inline std::uint64_t place_parts(std::vector<rank_layout> const& ranks, parameter_layout const& whole,
                                 std::vector<std::int64_t> const& sent, std::vector<at::Tensor> const& parts,
                                 std::vector<bool> const& in_place, at::Tensor out) {
  auto size = io::size_of(whole.dtype);
  auto target = tensor_bytes(out);
  std::uint64_t covered = 0;
  for (std::size_t r = 0; r < parts.size(); ++r) {
    if (sent[r] == 0 || in_place[r]) continue;
    auto part = parts[r].to(c10::Device(c10::kCPU)).contiguous();
    auto source = tensor_bytes(part);
    for (auto const& run : overlap(whole.shape, ranks[r].find(whole.name)->shard, shard_layout::whole(whole.shape))) {
      std::memcpy(target.data() + run.target * size, source.data() + run.source * size, run.length * size);
      covered += run.length;
    }
  }
  return covered;
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
  // Every rank knows what every other sends (the layouts say), so the destination receives each
  // part where it goes.
  std::vector<std::int64_t> sent(ranks.size(), 0);
  auto sends = senders_of(ranks, whole.name);
  for (std::size_t r = 0; r < ranks.size(); ++r)
    if (sends[r])
      sent[r] = static_cast<std::int64_t>(ranks[r].find(whole.name)->shard.numel() * io::size_of(whole.dtype));
  bool contributes = sent[static_cast<std::size_t>(comm.rank())] > 0;
  auto local = contributes ? mine->shards[shard].to(c10::Device(c10::kCPU)).reshape({-1}).contiguous().view(at::kByte)
                           : at::empty({0}, at::TensorOptions().dtype(at::kByte));
  at::Tensor out;
  std::vector<at::Tensor> parts(ranks.size());
  std::vector<bool> in_place(ranks.size(), false);
  std::uint64_t covered = 0;
  if (comm.rank() == destination) {
    out = at::empty({static_cast<std::int64_t>(numel)}, at::TensorOptions().dtype(to_scalar_type(whole.dtype)));
    covered = receive_parts(ranks, whole, sent, out, comm.device(), parts, in_place);
  }
  comm::gather_into(comm, local.to(comm.device()), destination, parts);
  if (comm.rank() != destination) return std::nullopt;
  covered += place_parts(ranks, whole, sent, parts, in_place, out);
  if (covered != numel)
    throw checkpoint_error(checkpoint_errc::invalid_state,
                           "cannot save '" + tensor_name(whole.name, state.shard_names[shard]) + "': the ranks hold " +
                               std::to_string(covered) + " of its " + std::to_string(numel) + " elements");
  return out;
}

} // namespace cairn::detail
