// Definitions of <cairn/checkpoint/load_plan.hpp>: inline in a header-only build, compiled once
// by <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/detail/identity.hpp>
#include <cairn/checkpoint/detail/save_files.hpp>
#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/load_plan.hpp>
#include <cairn/error.hpp>
#include <cairn/io/dtype.hpp>
#include <cairn/io/index.hpp>
#include <cairn/io/safetensors.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
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
  auto selected = selected_shards(run.shard_names, run.model_weights, run.optimizer_state);
  for (std::size_t i = 0; i < run.shard_names.size(); ++i) {
    auto const& name = run.shard_names[i];
    if (std::find(selected.begin(), selected.end(), i) == selected.end()) {
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
    for (auto const& name : saved.shard_names)
      if (name != "weights" && !has(run.shard_names, name))
        plan.problems.push_back(name + ": state shard of the checkpoint the run does not have: it would be lost");
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

/// What a load would look for in one file: the tensors, their elements and type.
struct file_needs {
  int rank = -1; ///< the saving rank of a rank file; -1 for a state_dict file
  std::map<std::string, std::pair<std::uint64_t, io::dtype>> tensors;
};
using needs_by_file = std::map<std::string, file_needs>;

/// The file of a saved holding of tensor `tensor`, or nothing (reported) when the index lacks it.
inline std::string file_of(holding const& h, std::string const& tensor,
                           std::map<std::string, std::string> const& weight_map, load_plan& plan) {
  if (h.rank >= 0) return formats::rank_file({}, h.rank).string();
  auto found = weight_map.find(tensor);
  if (found != weight_map.end()) return found->second;
  plan.problems.push_back(tensor + ": not in the index's weight map");
  return {};
}

/// The holdings of a parameter a load reads from (each replica set's writer alone), sorted by
/// the span of the tensor they lie in, so that finding those a live shard meets is a search, not
/// a scan of every rank.
struct sources {
  std::vector<std::uint64_t> shape; ///< as the first holder saved it
  std::vector<std::pair<flat_range, holding>> by_span;
  std::vector<std::uint64_t> reach; ///< the largest span end up to each

  sources(std::vector<holding> const& all, replica_writers const& writers) : shape(all.front().layout->shape) {
    for (auto const& h : all) {
      auto const& p = *h.layout;
      if (p.shard.problem(p.shape)) continue; // reported by the tiling check
      if (h.rank >= 0 && p.replicated && h.rank != writers.of(p.name, p.shard)) continue;
      by_span.emplace_back(span_of(p.shape, p.shard), h);
    }
    std::sort(by_span.begin(), by_span.end(),
              [](auto const& a, auto const& b) { return a.first.begin < b.first.begin; });
    std::uint64_t most = 0;
    for (auto const& [span, h] : by_span) reach.push_back(most = std::max(most, span.end));
  }

  /// The holdings whose spans meet `span`.
  [[nodiscard]] std::vector<holding> meeting(flat_range span) const {
    std::vector<holding> out;
    auto end = std::partition_point(by_span.begin(), by_span.end(),
                                    [&](auto const& entry) { return entry.first.begin < span.end; });
    for (auto i = static_cast<std::size_t>(end - by_span.begin()); i-- > 0 && reach[i] > span.begin;)
      if (by_span[i].first.end > span.begin) out.push_back(by_span[i].second);
    return out;
  }
};

/// What rank `r`'s holding `live` of a parameter reads, into `files` (bytes) and `needs`.
struct reader {
  std::vector<std::string> const& shards;
  std::map<std::string, std::string> const& weight_map;
  bool same;
  load_plan& plan;
  needs_by_file* needs;

  void add(int r, parameter_layout const& live, sources const& from, std::map<std::string, std::uint64_t>& files) {
    for (auto const& h : from.meeting(span_of(live.shape, live.shard))) {
      if (same && !h.layout->replicated && h.rank != r) continue; // the saving layout: its own file
      auto count = overlap_count(live.shape, h.layout->shard, live.shard);
      if (count == 0) continue;
      std::uint64_t bytes = 0;
      if (__builtin_mul_overflow(count, io::size_of(h.layout->dtype), &bytes)) {
        plan.problems.push_back(live.name + ": more than 2^64 bytes to read");
        continue;
      }
      for (auto const& shard : shards) {
        auto tensor = tensor_name(live.name, shard);
        auto file = file_of(h, tensor, weight_map, plan);
        if (file.empty()) continue;
        if (__builtin_add_overflow(files[file], bytes, &files[file]))
          plan.problems.push_back(live.name + ": more than 2^64 bytes to read from " + file);
        if (!needs) continue;
        auto& need = (*needs)[file];
        need.rank = h.rank;
        need.tensors[tensor] = {h.layout->shard.numel(), h.layout->dtype};
      }
    }
  }
};

/// The dry run, and what it would look for in each file when `needs` is given.
inline load_plan plan(checkpoint_metadata const& saved, std::map<std::string, std::string> const& weight_map,
                      run_layout const& run, needs_by_file* needs) {
  load_plan out;
  out.format = saved.format;
  auto shards = loaded_shards(saved, run, out);
  for (auto const& problem : tiling_problems(saved.ranks)) out.problems.push_back("the checkpoint: " + problem);
  for (auto const& problem : tiling_problems(run.ranks)) out.problems.push_back("the run: " + problem);
  out.same_layout = same_layout(saved, run);
  if (saved.format == checkpoint_format::distributed) out.resharded = resharded(saved, run);
  auto writers = replica_writers_of(saved.ranks, saved.replica_writers);
  std::map<std::string, sources> saved_sources;
  for (auto const& [name, held] : saved_holdings(saved)) saved_sources.emplace(name, sources(held, writers));
  reader read{shards, weight_map, out.same_layout, out, needs};
  std::set<std::string> live, reported;
  for (std::size_t r = 0; r < run.ranks.size(); ++r) {
    std::map<std::string, std::uint64_t> files;
    for (auto const& p : run.ranks[r].parameters) {
      live.insert(p.name);
      auto found = saved_sources.find(p.name);
      if (found == saved_sources.end()) {
        if (reported.insert(p.name).second) out.problems.push_back(p.name + ": missing from the checkpoint");
        continue;
      }
      if (auto const& shape = found->second.shape; shape != p.shape) {
        if (reported.insert(p.name).second)
          out.problems.push_back(p.name + ": has shape " + shape_text(shape) + " in the checkpoint, " +
                                 shape_text(p.shape) + " in the run");
        continue;
      }
      if (!p.shard.problem(p.shape)) read.add(static_cast<int>(r), p, found->second, files);
    }
    auto& reads = out.reads.emplace_back();
    for (auto const& [file, bytes] : files) reads.push_back({file, bytes});
  }
  for (auto const& [name, held] : saved_sources)
    if (!live.contains(name)) out.problems.push_back(name + ": in the checkpoint but not in the run");
  std::set<std::string> seen; // each problem once, however many ranks meet it
  std::erase_if(out.problems, [&](std::string const& p) { return !seen.insert(p).second; });
  return out;
}

/// What a load would find wrong in the files themselves: missing, of another save, without a
/// tensor it reads or with another number of elements or type than the metadata says.
inline void check_files(std::filesystem::path const& dir, checkpoint_metadata const& saved, needs_by_file const& needs,
                        load_plan& out) {
  for (auto const& [name, need] : needs) {
    auto path = dir / name;
    try {
      if (!cairn::detail::stored_size(path)) {
        out.problems.push_back(path.string() + ": missing");
        continue;
      }
      io::safetensors_file file(path);
      auto rank = need.rank >= 0 ? std::optional<int>(need.rank) : std::nullopt;
      if (auto problem = identity_problem(file, saved, rank)) out.problems.push_back(path.string() + ": " + *problem);
      for (auto const& [tensor, expected] : need.tensors) {
        auto const* t = file.find(tensor);
        if (!t)
          out.problems.push_back(path.string() + ": no tensor '" + tensor + "'");
        else if (t->numel() != expected.first || t->dtype != expected.second)
          out.problems.push_back(path.string() + ": tensor '" + tensor + "' holds " + std::to_string(t->numel()) +
                                 " elements of " + std::string(io::name(t->dtype)) + ", the metadata says " +
                                 std::to_string(expected.first) + " of " + std::string(io::name(expected.second)));
      }
    } catch (std::exception const& e) {
      out.problems.push_back(e.what());
    }
  }
}

} // namespace detail::load_planning

CAIRN_DECL load_plan plan_load(checkpoint_metadata const& saved, std::map<std::string, std::string> const& weight_map,
                               run_layout const& run) {
  return detail::load_planning::plan(saved, weight_map, run, nullptr);
}

CAIRN_DECL load_plan plan_load(std::filesystem::path const& dir, run_layout const& run) {
  auto format = detect_format(dir);
  if (!format)
    throw checkpoint_error(checkpoint_errc::invalid_request,
                           dir.string() + ": not a checkpoint (no metadata.json, index or config.json)");
  auto metadata = read_stored_metadata(dir, *format); // refuses the external format
  std::map<std::string, std::string> weight_map;
  if (*format == checkpoint_format::state_dict) weight_map = io::read_index(formats::state_dict_index(dir)).weight_map;
  detail::load_planning::needs_by_file needs;
  auto out = detail::load_planning::plan(metadata, weight_map, run, &needs);
  detail::load_planning::check_files(dir, metadata, needs, out);
  return out;
}

} // namespace cairn
