#pragma once
// The state the checkpoint benchmarks save and load: float parameters of 64 MiB down to 256 KiB,
// like a model's layers, filling `bytes`.
#include <cairn/checkpoint/state.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace bench {

/// Parameters whole on the one rank; with `flat_layout`, the same elements as a flat range (so
/// that a load into it takes the resharding path).
inline cairn::model_state make_state(std::size_t bytes, bool flat_layout = false) {
  cairn::model_state state;
  std::int64_t const sizes[] = {64 << 20, 16 << 20, 4 << 20, 1 << 20, 256 << 10};
  std::size_t total = 0;
  for (int i = 0; total < bytes; ++i) {
    // Whole rows of 256; the remainder of less than a row is left out (it would never be added).
    auto numel = std::min<std::int64_t>(sizes[i % 5], static_cast<std::int64_t>((bytes - total) / 4)) / 256 * 256;
    if (numel == 0) break;
    cairn::parameter_state p;
    std::vector<std::uint64_t> shape{static_cast<std::uint64_t>(numel / 256), 256};
    p.layout = {"layer" + std::to_string(i) + ".weight", shape, cairn::io::dtype::F32, false,
                cairn::shard_layout::whole(shape)};
    if (flat_layout) p.layout.shard.flat = cairn::flat_range{0, p.layout.shard.box_numel()};
    p.shards.push_back(at::rand({numel}));
    total += static_cast<std::size_t>(p.shards.back().nbytes());
    state.parameters.push_back(std::move(p));
  }
  return state;
}

/// A state of `state`'s layouts, its tensors zeros: what a resume loads into, allocated and
/// touched once, as in a trainer.
inline cairn::model_state zeros_like(cairn::model_state const& state) {
  cairn::model_state out;
  out.shard_names = state.shard_names;
  for (auto const& p : state.parameters) {
    cairn::parameter_state q{p.layout, {}};
    for (auto const& t : p.shards) q.shards.push_back(at::zeros_like(t));
    out.parameters.push_back(std::move(q));
  }
  return out;
}

} // namespace bench
