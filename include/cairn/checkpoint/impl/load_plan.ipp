// Definitions of <cairn/checkpoint/load_plan.hpp>: inline in a header-only build, compiled once
// by <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/detail/save_files.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/load_plan.hpp>
#include <cairn/error.hpp>
#include <cairn/io/dtype.hpp>
#include <cairn/io/index.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace cairn {

namespace detail::load_planning {

/// A saved holding of a parameter: the rank whose file has it (-1: a state_dict's whole tensor).
struct holding {
  int rank;
  parameter_layout const* layout;
};

/// Where each saved parameter is, by name, in rank order; a state_dict's whole tensors as rank -1.
inline std::map<std::string, std::vector<holding>> saved_holdings(checkpoint_metadata const& saved) {
  std::map<std::string, std::vector<holding>> out;
  for (std::size_t r = 0; r < saved.ranks.size(); ++r)
    for (auto const& p : saved.ranks[r].parameters) out[p.name].push_back({static_cast<int>(r), &p});
  for (auto const& p : saved.parameters) out[p.name].push_back({-1, &p});
  return out;
}

/// The run's shards the load covers (the weights first, the rest with optimizer_state), and the
/// problems of the shard lists: one the run loads that the save lacks, or one the save holds
/// that the run has no place for (optimizer state that would be lost).
inline std::vector<std::string> loaded_shards(checkpoint_metadata const& saved, run_layout const& run,
                                              load_plan& plan) {
  auto has = [](std::vector<std::string> const& names, std::string const& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  std::string held;
  for (auto const& name : saved.shard_names) held += (held.empty() ? "" : ", ") + name;
  std::vector<std::string> out;
  for (std::size_t i = 0; i < run.shard_names.size(); ++i) {
    auto const& name = run.shard_names[i];
    if (!(i == 0 ? run.model_weights : run.optimizer_state)) {
      plan.zeroed.push_back(name);
      continue;
    }
    if (has(saved.shard_names, name))
      out.push_back(name);
    else
      plan.problems.push_back(name + ": state shard not in the checkpoint (it holds " +
                              (held.empty() ? "nothing" : held) + ")");
  }
  if (run.optimizer_state)
    for (std::size_t i = 1; i < saved.shard_names.size(); ++i)
      if (!has(run.shard_names, saved.shard_names[i]))
        plan.problems.push_back(saved.shard_names[i] +
                                ": state shard of the checkpoint the run does not have: it would be lost");
  return out;
}

/// Whether the run's ranks hold exactly what the same ranks saved.
inline bool same_layout(checkpoint_metadata const& saved, run_layout const& run) {
  return saved.format == checkpoint_format::distributed && saved.ranks.size() == run.ranks.size() &&
         std::equal(saved.ranks.begin(), saved.ranks.end(), run.ranks.begin());
}

/// Parameters some rank of the run holds otherwise than the same rank saved them.
inline std::vector<std::string> resharded(checkpoint_metadata const& saved, run_layout const& run) {
  std::set<std::string> out;
  auto layouts_of = [](std::vector<rank_layout> const& ranks, std::size_t r) {
    std::map<std::string, parameter_layout const*> held;
    if (r < ranks.size())
      for (auto const& p : ranks[r].parameters) held.emplace(p.name, &p);
    return held;
  };
  for (std::size_t r = 0; r < std::max(saved.ranks.size(), run.ranks.size()); ++r) {
    auto before = layouts_of(saved.ranks, r), after = layouts_of(run.ranks, r);
    for (auto const& [name, p] : after)
      if (!before.contains(name) || !(*before.at(name) == *p)) out.insert(name);
    for (auto const& [name, p] : before)
      if (!after.contains(name)) out.insert(name);
  }
  return {out.begin(), out.end()};
}

/// The file of a saved holding of tensor `tensor`, or nothing (reported) when the index lacks it.
inline std::string file_of(holding const& h, std::string const& tensor,
                           std::map<std::string, std::string> const& weight_map, load_plan& plan) {
  if (h.rank >= 0) return formats::rank_file({}, h.rank).string();
  auto found = weight_map.find(tensor);
  if (found != weight_map.end()) return found->second;
  plan.problems.push_back(tensor + ": not in the index's weight map");
  return {};
}

/// Adds the reads of rank `r`'s holding `live` of a parameter to `files`.
inline void add_reads(int r, parameter_layout const& live, std::vector<holding> const& holders,
                      std::vector<std::string> const& shards, replica_writers const& writers, bool same,
                      std::map<std::string, std::string> const& weight_map, load_plan& plan,
                      std::map<std::string, std::uint64_t>& files) {
  for (auto const& h : holders) {
    if (h.layout->shape != live.shape) {
      plan.problems.push_back(live.name + ": has shape " + shape_text(h.layout->shape) + " in the checkpoint, " +
                              shape_text(live.shape) + " in the run");
      return;
    }
    // A replicated parameter is in its writer's file only; with the saving layout, a rank
    // reads its own file.
    if (h.rank >= 0 && (h.layout->replicated ? h.rank != writers.of(live.name, h.layout->shard) : same && h.rank != r))
      continue;
    auto count = overlap_count(live.shape, h.layout->shard, live.shard);
    if (count == 0) continue;
    for (auto const& shard : shards) {
      auto file = file_of(h, tensor_name(live.name, shard), weight_map, plan);
      if (!file.empty()) files[file] += count * io::size_of(h.layout->dtype);
    }
  }
}

} // namespace detail::load_planning

CAIRN_DECL load_plan plan_load(checkpoint_metadata const& saved, std::map<std::string, std::string> const& weight_map,
                               run_layout const& run) {
  namespace lp = detail::load_planning;
  load_plan plan;
  plan.format = saved.format;
  auto shards = lp::loaded_shards(saved, run, plan);
  for (auto const& problem : tiling_problems(saved.ranks)) plan.problems.push_back("the checkpoint: " + problem);
  for (auto const& problem : tiling_problems(run.ranks)) plan.problems.push_back("the run: " + problem);
  plan.same_layout = lp::same_layout(saved, run);
  if (saved.format == checkpoint_format::distributed) plan.resharded = lp::resharded(saved, run);
  auto holdings = lp::saved_holdings(saved);
  auto writers = detail::replica_writers_of(saved.ranks, saved.replica_writers);
  std::set<std::string> live, reported;
  for (std::size_t r = 0; r < run.ranks.size(); ++r) {
    std::map<std::string, std::uint64_t> files;
    for (auto const& p : run.ranks[r].parameters) {
      live.insert(p.name);
      auto found = holdings.find(p.name);
      if (found == holdings.end()) {
        if (reported.insert(p.name).second) plan.problems.push_back(p.name + ": missing from the checkpoint");
        continue;
      }
      auto before = plan.problems.size();
      lp::add_reads(static_cast<int>(r), p, found->second, shards, writers, plan.same_layout, weight_map, plan, files);
      if (plan.problems.size() > before && !reported.insert(p.name).second) plan.problems.resize(before); // once
    }
    auto& reads = plan.reads.emplace_back();
    for (auto const& [file, bytes] : files) reads.push_back({file, bytes});
  }
  for (auto const& [name, held] : holdings)
    if (!live.contains(name)) plan.problems.push_back(name + ": in the checkpoint but not in the run");
  return plan;
}

CAIRN_DECL load_plan plan_load(std::filesystem::path const& dir, run_layout const& run) {
  auto format = detect_format(dir);
  if (!format)
    throw checkpoint_error(checkpoint_errc::invalid_request,
                           dir.string() + ": not a checkpoint (no metadata.json, index or config.json)");
  auto metadata = read_stored_metadata(dir, *format); // refuses the external format
  std::map<std::string, std::string> weight_map;
  if (*format == checkpoint_format::state_dict) weight_map = io::read_index(formats::state_dict_index(dir)).weight_map;
  return plan_load(metadata, weight_map, run);
}

} // namespace cairn
