#pragma once

// The layouts of a run on a parallel grid as rules: for each parameter, how the grid places it
// (its tensor-parallel split, whether ZeRO slices it over the data-parallel group, its pipeline
// stage), instead of every rank's holding of it. A save's metadata stores its layouts this way
// whenever they are a grid's, O(parameters) instead of O(ranks x parameters); a reader expands
// them back. No libtorch.

#include <cairn/checkpoint/layout.hpp>
#include <cairn/comm/grid.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/io/dtype.hpp>

#include <boost/describe/class.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cairn {

/// How the grid of a run places one parameter: `place_on_grid` of its split, at ZeRO stage 1
/// when `zero` (a flat slice per data-parallel rank) or 0, on the ranks of pipeline `stage`.
struct parameter_rule {
  std::string name;
  std::vector<std::uint64_t> shape;
  io::dtype dtype = io::dtype::F32;
  tensor_split split = tensor_split::none;
  bool zero = false;
  std::int64_t stage = 0;
};
BOOST_DESCRIBE_STRUCT(parameter_rule, (), (name, shape, dtype, split, zero, stage))

/// The layouts of every rank of a TP x PP x DP grid (Megatron's order), as rules.
struct layout_rules {
  std::int64_t tensor = 1;
  std::int64_t pipeline = 1;
  std::int64_t data = 1;
  std::vector<parameter_rule> parameters; ///< in the order each rank lists those it holds

  /// The ranks of the grid; 0 when a size is outside 1 to 2^20 (rules `check_rules` refuses).
  [[nodiscard]] std::int64_t world_size() const noexcept {
    auto valid = [](std::int64_t n) { return n >= 1 && n <= (std::int64_t{1} << 20); };
    return valid(tensor) && valid(pipeline) && valid(data) ? tensor * pipeline * data : 0;
  }
};
BOOST_DESCRIBE_STRUCT(layout_rules, (), (tensor, pipeline, data, parameters))

/// The most holdings (ranks x parameters held) rules may expand to: a file of a few bytes must
/// not make a reader allocate without bound.
inline constexpr std::uint64_t max_rule_holdings = std::uint64_t{1} << 22;
/// The most memory, about, the layouts rules expand to may take (names and shapes copied into
/// each holding): 1 GiB. A 4,096-rank grid of 2,000 parameters takes about 200 MiB.
inline constexpr std::uint64_t max_rule_expansion_bytes = std::uint64_t{1} << 30;

/// The rules of `ranks`, when some grid's `place_on_grid` gives every rank exactly its layout
/// (the same parameters in the same order, shards, dtypes and replication); nothing otherwise.
/// Tries each TP x PP x DP factorisation of the world size; a wrong one fails on its first
/// mismatch, the right one checks every holding once.
CAIRN_DECL std::optional<layout_rules> infer_rules(std::vector<rank_layout> const& ranks);

/// Rank `rank`'s layout under `rules`.
CAIRN_DECL rank_layout expand_rank(layout_rules const& rules, int rank);

/// Checks `rules` as `expand_rules` does, without expanding them: what a reader that plans from
/// the rules alone (a load, `plan_load`) relies on. A checkpoint_error (invalid_state) naming the
/// rule. Every valid rule tiles its parameter by construction (`place_on_grid`).
CAIRN_DECL void check_rules(layout_rules const& rules);

/// Every rank's layout under `rules`. A checkpoint_error (invalid_state) naming the rule when
/// the rules are not valid: a grid size below 1, a stage outside the pipeline, a shape that
/// does not split as asked, a name of more than 4096 characters or a shape of more than 64
/// dimensions, more holdings than `max_rule_holdings` or more memory than
/// `max_rule_expansion_bytes`.
CAIRN_DECL std::vector<rank_layout> expand_rules(layout_rules const& rules);

namespace detail {
/// The grid of `rules`, in Megatron's order (the only one rules describe).
CAIRN_DECL comm::parallel_grid grid_of(layout_rules const& rules);

/// What the rank at `at` of a grid of `sizes` (its tensor, pipeline and data sizes; its rules
/// ignored) can tell of the rules alone, from its own layout: one rule per parameter it holds,
/// in its order, its stage the rank's, when `place_on_grid` gives it each holding exactly;
/// nothing otherwise (a holding no grid split gives, a name held twice).
CAIRN_DECL std::optional<std::vector<parameter_rule>> rules_of_rank(rank_layout const& held, layout_rules const& sizes,
                                                                    comm::grid_coordinates const& at);

/// Calls `f(rank, placement)` for every holding of the parameter of `rule` under `rules`, in
/// rank order (Megatron's: tensor fastest, then data, then pipeline): the tensor x data ranks of
/// its stage, nothing copied but each placement.
template <class F> void each_holding(layout_rules const& rules, parameter_rule const& rule, F&& f) {
  for (std::int64_t d = 0; d < rules.data; ++d)
    for (std::int64_t t = 0; t < rules.tensor; ++t)
      f(static_cast<int>(t + rules.tensor * (d + rules.data * rule.stage)),
        place_on_grid(rule.shape, rule.split, static_cast<int>(t), static_cast<int>(rules.tensor), static_cast<int>(d),
                      static_cast<int>(rules.data), rule.zero ? 1 : 0));
}

/// Every holding of the parameter of `rule` under `rules`, with the rank that holds it, in rank
/// order: the tensor x data ranks of its stage.
CAIRN_DECL std::vector<std::pair<int, parameter_layout>> holdings_of(layout_rules const& rules,
                                                                     parameter_rule const& rule);
} // namespace detail

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/layout_rules.ipp>
#endif
