#pragma once

// A small model whose every element is a known function of (parameter, state shard, global
// index), laid out over the ranks in one of three ways, for the format tests.

#include <cairn/checkpoint.hpp>
#include <cairn/comm/grid.hpp>

#include <ATen/ATen.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace test_model {

struct parameter_spec {
  std::string name;
  std::vector<std::uint64_t> shape;
  at::ScalarType type;
  bool replicated;
};

inline std::vector<parameter_spec> const& parameters() {
  static std::vector<parameter_spec> const specs{{"embedding", {10, 4}, at::kFloat, false},
                                                 {"layer.weight", {6, 3}, at::kDouble, false},
                                                 {"layer.bias", {7}, at::kBFloat16, false},
                                                 {"norm", {5}, at::kFloat, true},
                                                 {"steps", {3}, at::kLong, false}};
  return specs;
}

inline std::vector<std::string> const shard_names{"weights", "exp_avg", "exp_avg_sq"};

/// The value of element `index` of `parameter`'s shard `shard`: distinct within a tensor and
/// exact in its dtype (bfloat16 holds integers to 256 exactly, so its values stay small).
inline double value(std::size_t parameter, std::size_t shard, std::uint64_t index) {
  auto type = parameters()[parameter].type;
  if (type == at::kBFloat16) return double(shard * 40 + index * 2) * 0.5 + 1;
  if (!at::isFloatingType(type)) return double(parameter * 100 + shard * 1000 + index + 1);
  return double(parameter * 100 + shard * 1000) + double(index) * 0.5 + 1;
}

/// How parameters are split over ranks: along dimension 0, as flat ranges of the whole tensor
/// (ZeRO-style), or both (flat halves of dimension-0 boxes, for an even world size); or not at
/// all, every parameter whole and replicated on every rank (data parallelism), so that its
/// replicas are written by different ranks; or tensor parallel over pairs of ranks (rows of a
/// vector, columns of a matrix) replicated over the data-parallel groups (TP=2 x DP=size/2,
/// Megatron's order: a shard held by every rank of its data-parallel group); or two pipeline
/// stages (an even world size): the first half of the ranks holds the even-numbered parameters,
/// the second half the odd ones, each flat-sliced over its stage's ranks.
enum class scheme { dim, flat, mixed, replicated, tp_dp, pp };

inline scheme parse_scheme(std::string const& s) {
  return s == "flat"         ? scheme::flat
         : s == "mixed"      ? scheme::mixed
         : s == "replicated" ? scheme::replicated
         : s == "tp_dp"      ? scheme::tp_dp
         : s == "pp"         ? scheme::pp
                             : scheme::dim;
}

inline cairn::shard_layout shard_of(std::vector<std::uint64_t> const& shape, scheme how, int rank, int size,
                                    bool replicated) {
  auto whole = cairn::shard_layout::whole(shape);
  if (replicated) return whole;
  auto part = [](std::uint64_t total, std::uint64_t i, std::uint64_t n) {
    return std::pair{total * i / n, total * (i + 1) / n};
  };
  auto r = static_cast<std::uint64_t>(rank), n = static_cast<std::uint64_t>(size);
  if (how == scheme::tp_dp) { // block rank % 2 of 2 (of 1 for an odd world size)
    auto dim = shape.size() > 1 ? std::size_t{1} : std::size_t{0};
    return n % 2 == 0 ? cairn::split_dimension(shape, dim, rank % 2, 2) : whole;
  }
  if (how == scheme::pp && n % 2 == 0) { // flat over the ranks of this rank's stage
    auto [b, e] = part(whole.box_numel(), r % (n / 2), n / 2);
    whole.flat = cairn::flat_range{b, e};
    return whole;
  }
  if (how == scheme::flat || how == scheme::pp) {
    auto [b, e] = part(whole.box_numel(), r, n);
    whole.flat = cairn::flat_range{b, e};
    return whole;
  }
  auto boxes = how == scheme::mixed && n % 2 == 0 ? n / 2 : n;
  auto [b, e] = part(shape[0], how == scheme::mixed && n % 2 == 0 ? r / 2 : r, boxes);
  whole.offsets[0] = b;
  whole.lengths[0] = e - b;
  if (how == scheme::mixed && n % 2 == 0) {
    auto [fb, fe] = part(whole.box_numel(), r % 2, 2);
    whole.flat = cairn::flat_range{fb, fe};
  }
  return whole;
}

/// The shards of `p`, parameter `i` of the model: every element its known value, or zero.
inline void fill_shards(cairn::parameter_state& p, std::size_t i, bool fill) {
  auto const& spec = parameters()[i];
  auto whole = cairn::shard_layout::whole(spec.shape);
  for (std::size_t s = 0; s < shard_names.size(); ++s) {
    auto t = at::zeros({static_cast<std::int64_t>(p.layout.shard.numel())}, at::TensorOptions().dtype(spec.type));
    if (fill) {
      auto d = t.to(at::kDouble);
      auto* data = d.data_ptr<double>();
      for (auto const& run : cairn::overlap(spec.shape, whole, p.layout.shard))
        for (std::uint64_t k = 0; k < run.length; ++k) data[run.target + k] = value(i, s, run.source + k);
      t = d.to(spec.type);
    }
    p.shards.push_back(t);
  }
}

/// This rank's state: every element set to its known value, or zero.
inline cairn::model_state make(scheme how, int rank, int size, bool fill) {
  cairn::model_state state;
  state.shard_names = shard_names;
  for (std::size_t i = 0; i < parameters().size(); ++i) {
    auto const& spec = parameters()[i];
    auto stage = static_cast<std::size_t>(2 * rank / size);
    if (how == scheme::pp && size % 2 == 0 && i % 2 != stage) continue; // another stage's layer
    cairn::parameter_state p;
    bool replicated = spec.replicated || how == scheme::replicated;
    p.layout = {spec.name, spec.shape, cairn::to_dtype(spec.type), replicated || how == scheme::tp_dp,
                shard_of(spec.shape, how, rank, size, replicated)};
    fill_shards(p, i, fill);
    state.parameters.push_back(std::move(p));
  }
  return state;
}

/// A TP x PP x DP grid at a ZeRO stage, named like "tp2pp1dp2z1".
struct grid_scheme {
  int tensor = 1, pipeline = 1, data = 1, zero_stage = 0;
  [[nodiscard]] int ranks() const { return tensor * pipeline * data; }
};

/// The grid `name` names, or nothing when it names none.
inline std::optional<grid_scheme> parse_grid(std::string const& name) {
  grid_scheme g;
  char end = 0;
  if (std::sscanf(name.c_str(), "tp%dpp%ddp%dz%d%c", &g.tensor, &g.pipeline, &g.data, &g.zero_stage, &end) != 4)
    return std::nullopt;
  return g;
}

/// How the grid splits each parameter over its tensor-parallel group: a vocab-parallel
/// embedding, a row-parallel weight, a bias and a norm whole, a column-parallel vector.
inline cairn::tensor_split grid_split(std::size_t parameter) {
  using cairn::tensor_split;
  static tensor_split const splits[] = {tensor_split::rows, tensor_split::columns, tensor_split::none,
                                        tensor_split::none, tensor_split::rows};
  return splits[parameter];
}

/// Rank `rank`'s state on grid `g` (Megatron's order): the parameters of its pipeline stage
/// (`stage_of_layer` over the parameters in order), each where `place_on_grid` puts it; every
/// element set to its known value, or zero.
inline cairn::model_state make(grid_scheme const& g, int rank, bool fill) {
  cairn::comm::parallel_grid grid(g.tensor, g.pipeline, g.data, g.ranks());
  auto at = grid.coordinates(rank);
  cairn::model_state state;
  state.shard_names = shard_names;
  state.grid = grid;
  auto const n = static_cast<std::int64_t>(parameters().size());
  for (std::size_t i = 0; i < parameters().size(); ++i) {
    auto const& spec = parameters()[i];
    if (cairn::comm::stage_of_layer(static_cast<std::int64_t>(i), n, g.pipeline) != at.pipeline) continue;
    auto place = cairn::place_on_grid(spec.shape, grid_split(i), at.tensor, g.tensor, at.data, g.data, g.zero_stage);
    cairn::parameter_state p;
    p.layout = {spec.name, spec.shape, cairn::to_dtype(spec.type), place.replicated, place.shard};
    fill_shards(p, i, fill);
    state.parameters.push_back(std::move(p));
  }
  return state;
}

/// The number of elements of `state` that differ from their known values (or from zero, for
/// the shards in `zeroed`).
inline std::int64_t mismatches(cairn::model_state const& state, std::vector<std::size_t> const& zeroed = {}) {
  std::int64_t bad = 0;
  for (auto const& p : state.parameters) {
    std::size_t i = 0; // its place in the model: what its values are made of
    while (parameters()[i].name != p.layout.name) ++i;
    auto whole = cairn::shard_layout::whole(p.layout.shape);
    for (std::size_t s = 0; s < p.shards.size(); ++s) {
      auto d = p.shards[s].to(at::kDouble).contiguous();
      auto const* data = d.data_ptr<double>();
      bool zero = std::find(zeroed.begin(), zeroed.end(), s) != zeroed.end();
      for (auto const& run : cairn::overlap(p.layout.shape, whole, p.layout.shard))
        for (std::uint64_t k = 0; k < run.length; ++k)
          if (data[run.target + k] != (zero ? 0.0 : value(i, s, run.source + k))) ++bad;
    }
  }
  return bad;
}

} // namespace test_model
