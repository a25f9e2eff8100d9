#pragma once

// A training state whose every element is a known function of the iteration, flat-sharded over
// the ranks (ZeRO-style), for the manager and crash tests: a loaded state proves which
// iteration it came from, element by element.

#include <cairn/checkpoint/state.hpp>

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace manager_test {

struct spec {
  std::string name;
  std::vector<std::uint64_t> shape;
};

inline std::vector<spec> const& parameters() {
  static std::vector<spec> const specs{{"layer.weight", {24, 16}}, {"layer.bias", {24}}, {"head", {5, 24}}};
  return specs;
}

/// Element `index` of shard `shard` of parameter `p` after iteration `iteration`.
inline double value(std::int64_t iteration, std::size_t p, std::size_t shard, std::uint64_t index) {
  return double(iteration) * 1000.0 + double(p * 100 + shard * 10) + double(index) * 0.25;
}

/// Sets every element of `state` to its value at `iteration`.
inline void fill(cairn::model_state& state, std::int64_t iteration) {
  for (std::size_t i = 0; i < state.parameters.size(); ++i) {
    auto& p = state.parameters[i];
    auto begin = p.layout.shard.flat ? p.layout.shard.flat->begin : 0;
    for (std::size_t k = 0; k < p.shards.size(); ++k) {
      auto* data = p.shards[k].data_ptr<float>();
      for (std::int64_t e = 0; e < p.shards[k].numel(); ++e)
        data[e] = static_cast<float>(value(iteration, i, k, begin + static_cast<std::uint64_t>(e)));
    }
  }
}

/// This rank's state (weights, exp_avg, exp_avg_sq), holding the values of `iteration`.
inline cairn::model_state make(int rank, int size, std::int64_t iteration) {
  cairn::model_state state;
  state.shard_names = {"weights", "exp_avg", "exp_avg_sq"};
  for (std::size_t i = 0; i < parameters().size(); ++i) {
    auto const& s = parameters()[i];
    cairn::parameter_state p;
    auto shard = cairn::shard_layout::whole(s.shape);
    auto total = shard.box_numel();
    auto r = static_cast<std::uint64_t>(rank), n = static_cast<std::uint64_t>(size);
    shard.flat = cairn::flat_range{total * r / n, total * (r + 1) / n};
    p.layout = {s.name, s.shape, cairn::io::dtype::F32, false, shard};
    for (std::size_t k = 0; k < state.shard_names.size(); ++k)
      p.shards.push_back(at::zeros({static_cast<std::int64_t>(shard.numel())}, at::kFloat));
    state.parameters.push_back(std::move(p));
  }
  fill(state, iteration);
  return state;
}

/// How many elements of `state` differ from their values at `iteration`.
inline std::int64_t mismatches(cairn::model_state const& state, std::int64_t iteration) {
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < state.parameters.size(); ++i) {
    auto const& p = state.parameters[i];
    auto begin = p.layout.shard.flat ? p.layout.shard.flat->begin : 0;
    for (std::size_t k = 0; k < p.shards.size(); ++k) {
      auto const* data = p.shards[k].data_ptr<float>();
      for (std::int64_t e = 0; e < p.shards[k].numel(); ++e)
        if (data[e] != static_cast<float>(value(iteration, i, k, begin + static_cast<std::uint64_t>(e)))) ++bad;
    }
  }
  return bad;
}

} // namespace manager_test
