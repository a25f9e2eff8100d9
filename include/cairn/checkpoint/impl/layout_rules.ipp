// Definitions of <cairn/checkpoint/layout_rules.hpp>: inline in a header-only build, compiled
// once by <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/layout_rules.hpp>
#include <cairn/comm/grid.hpp>
#include <cairn/error.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn {

namespace detail {

/// The holding `rule` gives the rank at `at` of a grid of the sizes of `rules`.
inline parameter_layout rule_holding(layout_rules const& rules, parameter_rule const& rule,
                                     comm::grid_coordinates const& at) {
  auto place = place_on_grid(rule.shape, rule.split, at.tensor, static_cast<int>(rules.tensor), at.data,
                             static_cast<int>(rules.data), rule.zero ? 1 : 0);
  return {rule.name, rule.shape, rule.dtype, place.replicated, std::move(place.shard)};
}

/// The rule that gives `held` to the rank at `at`: its split read off its box, its ZeRO off its
/// flat range, its stage the rank's. Nothing when no split gives that box.
inline std::optional<parameter_rule> rule_of(parameter_layout const& held, comm::grid_coordinates const& at) {
  parameter_rule rule{held.name, held.shape, held.dtype, tensor_split::none, held.shard.flat.has_value(), at.pipeline};
  for (std::size_t d = 0; d < held.shape.size() && d < held.shard.lengths.size(); ++d)
    if (held.shard.lengths[d] != held.shape[d]) {
      if (d > 1 || rule.split != tensor_split::none) return std::nullopt;
      rule.split = d == 0 ? tensor_split::rows : tensor_split::columns;
    }
  return rule;
}

/// The rules of `ranks` on the grid `tensor` x `pipeline` x `data`, or nothing.
inline std::optional<layout_rules> rules_on(std::vector<rank_layout> const& ranks, int tensor, int pipeline, int data) {
  comm::parallel_grid grid(tensor, pipeline, data, static_cast<int>(ranks.size()));
  layout_rules rules{tensor, pipeline, data, {}};
  // The rules, stage after stage, in the order of the stage's first rank, which holds every
  // parameter of its stage; each is then checked against every holding.
  std::map<std::string, std::size_t> index;
  for (int stage = 0; stage < pipeline; ++stage) {
    comm::grid_coordinates first{0, stage, 0};
    for (auto const& held : ranks[static_cast<std::size_t>(grid.rank_of(first))].parameters) {
      auto rule = rule_of(held, first);
      if (!rule || !index.emplace(held.name, rules.parameters.size()).second) return std::nullopt;
      rules.parameters.push_back(std::move(*rule));
    }
  }
  for (std::size_t r = 0; r < ranks.size(); ++r) { // every holding, as the rules give it
    auto at = grid.coordinates(static_cast<int>(r));
    std::size_t k = 0;
    for (auto const& rule : rules.parameters) {
      if (rule.stage != at.pipeline) continue;
      if (k >= ranks[r].parameters.size()) return std::nullopt;
      try {
        if (rule_holding(rules, rule, at) != ranks[r].parameters[k]) return std::nullopt;
      } catch (error const&) { // a shape the grid cannot split so
        return std::nullopt;
      }
      ++k;
    }
    if (k != ranks[r].parameters.size()) return std::nullopt;
  }
  return rules;
}

} // namespace detail

CAIRN_DECL std::optional<layout_rules> infer_rules(std::vector<rank_layout> const& ranks) {
  auto world = static_cast<int>(ranks.size());
  if (world == 0) return std::nullopt;
  for (int tensor = 1; tensor <= world; ++tensor) {
    if (world % tensor != 0) continue;
    for (int pipeline = 1; pipeline <= world / tensor; ++pipeline) {
      if ((world / tensor) % pipeline != 0) continue;
      if (auto rules = detail::rules_on(ranks, tensor, pipeline, world / tensor / pipeline)) return rules;
    }
  }
  return std::nullopt;
}

CAIRN_DECL rank_layout expand_rank(layout_rules const& rules, int rank) {
  comm::parallel_grid grid(static_cast<int>(rules.tensor), static_cast<int>(rules.pipeline),
                           static_cast<int>(rules.data), static_cast<int>(rules.tensor * rules.pipeline * rules.data));
  auto at = grid.coordinates(rank);
  rank_layout out;
  for (auto const& rule : rules.parameters)
    if (rule.stage == at.pipeline) out.parameters.push_back(detail::rule_holding(rules, rule, at));
  return out;
}

CAIRN_DECL void check_rules(layout_rules const& rules) {
  auto invalid = [](std::string const& what) {
    return checkpoint_error(checkpoint_errc::invalid_state, "layout rules: " + what);
  };
  constexpr std::int64_t most_ranks = std::int64_t{1} << 20;
  for (auto [size, name] :
       {std::pair{rules.tensor, "tensor"}, std::pair{rules.pipeline, "pipeline"}, std::pair{rules.data, "data"}})
    if (size < 1 || size > most_ranks) throw invalid(std::string(name) + " is " + std::to_string(size));
  if (rules.world_size() > most_ranks) throw invalid("a grid of " + std::to_string(rules.world_size()) + " ranks");
  std::set<std::string_view> names;
  for (auto const& rule : rules.parameters) {
    if (rule.name.size() > 4096 || rule.shape.size() > 64)
      throw invalid("'" + rule.name.substr(0, 64) + "': a name of " + std::to_string(rule.name.size()) +
                    " characters, a shape of " + std::to_string(rule.shape.size()) +
                    " dimensions (at most 4096 and 64)");
    if (rule.stage < 0 || rule.stage >= rules.pipeline)
      throw invalid("'" + rule.name + "': stage " + std::to_string(rule.stage) + " of a pipeline of " +
                    std::to_string(rules.pipeline));
    if (rule.split != tensor_split::none && rule.shape.size() <= (rule.split == tensor_split::rows ? 0u : 1u))
      throw invalid("'" + rule.name + "': a tensor of " + std::to_string(rule.shape.size()) + " dimensions split by " +
                    (rule.split == tensor_split::rows ? "rows" : "columns"));
    std::uint64_t elements = 1;
    for (auto d : rule.shape)
      if (__builtin_mul_overflow(elements, d, &elements)) throw invalid("'" + rule.name + "': more than 2^64 elements");
    if (!names.insert(rule.name).second) throw invalid("'" + rule.name + "': listed twice (a rule a parameter)");
  }
}

CAIRN_DECL std::vector<rank_layout> expand_rules(layout_rules const& rules) {
  auto invalid = [](std::string const& what) {
    return checkpoint_error(checkpoint_errc::invalid_state, "layout rules: " + what);
  };
  check_rules(rules);
  std::uint64_t holdings = 0, bytes = 0; // bytes: about what the expanded layouts take in memory
  for (auto const& rule : rules.parameters) {
    auto copies = static_cast<std::uint64_t>(rules.tensor * rules.data);
    holdings += copies;
    bytes += copies * (160 + rule.name.size() + 24 * rule.shape.size());
  }
  if (holdings > max_rule_holdings)
    throw invalid("they give " + std::to_string(holdings) + " holdings, more than a reader expands (" +
                  std::to_string(max_rule_holdings) + ")");
  if (bytes > max_rule_expansion_bytes)
    throw invalid("they expand to about " + std::to_string(bytes >> 20) + " MiB of layouts, more than a reader " +
                  "expands (" + std::to_string(max_rule_expansion_bytes >> 20) + " MiB)");
  auto world = rules.world_size();
  std::vector<rank_layout> out;
  out.reserve(static_cast<std::size_t>(world));
  for (std::int64_t r = 0; r < world; ++r) out.push_back(expand_rank(rules, static_cast<int>(r)));
  return out;
}

CAIRN_DECL comm::parallel_grid detail::grid_of(layout_rules const& rules) {
  return comm::parallel_grid(static_cast<int>(rules.tensor), static_cast<int>(rules.pipeline),
                             static_cast<int>(rules.data), static_cast<int>(rules.world_size()));
}

CAIRN_DECL std::optional<std::vector<parameter_rule>>
detail::rules_of_rank(rank_layout const& held, layout_rules const& sizes, comm::grid_coordinates const& at) {
  std::vector<parameter_rule> out;
  std::set<std::string_view> names;
  for (auto const& h : held.parameters) {
    auto rule = rule_of(h, at);
    if (!rule || !names.insert(h.name).second) return std::nullopt;
    try {
      if (rule_holding(sizes, *rule, at) != h) return std::nullopt;
    } catch (error const&) { // a shape the grid cannot split so
      return std::nullopt;
    }
    out.push_back(std::move(*rule));
  }
  return out;
}

CAIRN_DECL std::vector<std::pair<int, parameter_layout>> detail::holdings_of(layout_rules const& rules,
                                                                             parameter_rule const& rule) {
  std::vector<std::pair<int, parameter_layout>> out;
  out.reserve(static_cast<std::size_t>(rules.tensor * rules.data));
  each_holding(rules, rule, [&](int rank, placement&& place) {
    out.emplace_back(rank,
                     parameter_layout{rule.name, rule.shape, rule.dtype, place.replicated, std::move(place.shard)});
  });
  return out;
}

} // namespace cairn
