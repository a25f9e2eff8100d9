// Definitions of <cairn/checkpoint/load_plan.hpp>: inline in a header-only build, compiled once
// by <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/detail/identity.hpp>
#include <cairn/checkpoint/detail/save_files.hpp>
#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/layout_rules.hpp>
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
#include <string_view>
#include <utility>
#include <vector>

namespace cairn {

namespace detail::load_planning {

/// A saved holding of a parameter: the rank whose file has it (-1: a state_dict's whole tensor).
struct holding {
  int rank;
  parameter_layout const* layout;
};

/// The holdings of each parameter by name, from enumerated layouts (indexed once) or from
/// rules (computed for one parameter at a time, O(its holders)): every rank's holdings are never
/// expanded at once.
class holdings_by_name {
public:
  holdings_by_name(std::vector<rank_layout> const& ranks, std::vector<parameter_layout> const& whole,
                   std::optional<layout_rules> const& rules)
      : rules_(rules ? &*rules : nullptr) {
    if (rules_) {
      for (auto const& rule : rules_->parameters) ruled_.emplace(rule.name, &rule);
      return;
    }
    for (std::size_t r = 0; r < ranks.size(); ++r)
      for (auto const& p : ranks[r].parameters) listed_[p.name].push_back({static_cast<int>(r), &p});
    for (auto const& p : whole) listed_[p.name].push_back({-1, &p});
  }

  /// Every parameter's name, in name order.
  [[nodiscard]] std::vector<std::string_view> names() const {
    std::vector<std::string_view> out;
    if (rules_)
      for (auto const& [name, rule] : ruled_) out.push_back(name);
    else
      for (auto const& [name, held] : listed_) out.push_back(name);
    return out;
  }

  /// The holdings of `name`, in rank order (empty when none holds it); under rules they live in
  /// `storage`, replaced.
  std::vector<holding> of(std::string_view name, std::vector<std::pair<int, parameter_layout>>& storage) const {
    std::vector<holding> out;
    if (rules_) {
      auto found = ruled_.find(name);
      if (found == ruled_.end()) return out;
      storage = holdings_of(*rules_, *found->second);
      for (auto const& [r, p] : storage) out.push_back({r, &p});
    } else if (auto found = listed_.find(name); found != listed_.end()) {
      out = found->second;
    }
    return out;
  }

  /// Calls `f(rank, layout)` for every holding of `name`, in rank order; under rules each one
  /// computed in turn into one layout.
  template <class F> void each(std::string_view name, F&& f) const {
    if (rules_) {
      auto found = ruled_.find(name);
      if (found == ruled_.end()) return;
      auto const& rule = *found->second;
      parameter_layout p{rule.name, rule.shape, rule.dtype, false, {}};
      each_holding(*rules_, rule, [&](int rank, placement&& place) {
        p.replicated = place.replicated;
        p.shard = std::move(place.shard);
        f(rank, std::as_const(p));
      });
    } else if (auto found = listed_.find(name); found != listed_.end()) {
      for (auto const& h : found->second) f(h.rank, *h.layout);
    }
  }

private:
  layout_rules const* rules_;
  std::map<std::string_view, parameter_rule const*> ruled_;
  std::map<std::string_view, std::vector<holding>> listed_;
};

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

/// Whether the run's ranks hold exactly what the same ranks saved: the same rules, or each
/// rank's layout alike (one rank's at a time).
inline bool same_layout(checkpoint_metadata const& saved, run_layout const& run) {
  if (saved.format != checkpoint_format::distributed || saved.world_size() != run.world_size()) return false;
  if (saved.rules && run.rules && to_json(*saved.rules) == to_json(*run.rules)) return true;
  for (std::int64_t r = 0; r < run.world_size(); ++r)
    if (saved.layout_of(r) != run.layout_of(r)) return false;
  return true;
}

/// The holdings of a parameter a load reads from (each replica set's writer alone), sorted by
/// the span of the tensor they lie in, so that finding those a live shard meets is a search, not
/// a scan of every rank.
struct sources {
  std::vector<std::pair<flat_range, holding>> by_span;
  std::vector<std::uint64_t> reach; ///< the largest span end up to each

  sources(std::vector<holding> const& all, saved_writers& writers) {
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

  /// The holdings whose spans meet `span`, into `out` (replaced).
  void meeting(flat_range span, std::vector<holding>& out) const {
    out.clear();
    auto end = std::partition_point(by_span.begin(), by_span.end(),
                                    [&](auto const& entry) { return entry.first.begin < span.end; });
    for (auto i = static_cast<std::size_t>(end - by_span.begin()); i-- > 0 && reach[i] > span.begin;)
      if (by_span[i].first.end > span.begin) out.push_back(by_span[i].second);
  }
};

/// What a load would look for in one file: the tensors, their elements and type.
struct file_needs {
  int rank = -1; ///< the saving rank of a rank file; -1 for a state_dict file
  std::map<std::string, std::pair<std::uint64_t, io::dtype>> tensors;
};
using needs_by_file = std::map<std::string, file_needs>;

/// Bytes a rank reads from each file, by name (the reader's names, or the weight map's).
using file_bytes = std::map<std::string_view, std::uint64_t>;

/// What a rank's holding `live` of a parameter reads, into `files` (bytes) and `needs`.
struct reader {
  std::vector<std::string> const& shards;
  std::map<std::string, std::string> const& weight_map;
  load_plan& plan;
  needs_by_file* needs;
  std::map<int, std::string> rank_files{}; // the names of those met so far

  /// The file of holding `h` of tensor `tensor`.
  std::string const& file_of(holding const& h, std::string const& tensor) {
    if (h.rank >= 0) {
      auto [at, added] = rank_files.try_emplace(h.rank);
      if (added) at->second = formats::rank_file({}, h.rank).string();
      return at->second;
    }
    static std::string const none;
    auto found = weight_map.find(tensor);
    if (found != weight_map.end()) return found->second;
    plan.problems.push_back(tensor + ": not in the index's weight map");
    return none;
  }

  /// `count` elements of holding `h` of `live`, read by one rank into `files`.
  void read(holding const& h, parameter_layout const& live, std::uint64_t count, file_bytes& files) {
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(count, io::size_of(h.layout->dtype), &bytes)) {
      plan.problems.push_back(live.name + ": more than 2^64 bytes to read");
      return;
    }
    if (h.rank >= 0 && !needs) { // a rank file holds every shard's tensor: one sum
      auto const& file = file_of(h, {});
      std::uint64_t all = 0;
      if (__builtin_mul_overflow(bytes, shards.size(), &all) || __builtin_add_overflow(files[file], all, &files[file]))
        plan.problems.push_back(live.name + ": more than 2^64 bytes to read from " + std::string(file));
      return;
    }
    for (auto const& shard : shards) {
      auto tensor = tensor_name(live.name, shard);
      auto const& file = file_of(h, tensor);
      if (file.empty()) continue;
      if (__builtin_add_overflow(files[file], bytes, &files[file]))
        plan.problems.push_back(live.name + ": more than 2^64 bytes to read from " + file);
      if (!needs) continue;
      auto& need = (*needs)[file];
      need.rank = h.rank;
      need.tensors[tensor] = {h.layout->shard.numel(), h.layout->dtype};
    }
  }

  std::vector<holding> met{}; // the holdings the last live shard met

  void add(parameter_layout const& live, sources const& from, file_bytes& files) {
    from.meeting(span_of(live.shape, live.shard), met);
    for (auto const& h : met) {
      auto count = overlap_count(live.shape, h.layout->shard, live.shard);
      if (count == 0) continue;
      read(h, live, count, files);
    }
  }
};

/// The dry run, and what it would look for in each file when `needs` is given. Parameter after
/// parameter: each one's saved holdings and the run's, so that under rules no more than one
/// parameter's holders are in memory at once.
inline load_plan plan(checkpoint_metadata const& saved, std::map<std::string, std::string> const& weight_map,
                      run_layout const& run, needs_by_file* needs) {
  load_plan out;
  out.format = saved.format;
  auto shards = loaded_shards(saved, run, out);
  if (!saved.rules)
    for (auto const& problem : tiling_problems(saved.ranks)) out.problems.push_back("the checkpoint: " + problem);
  if (run.rules) {
    try {
      check_rules(*run.rules);
    } catch (error const& e) {
      out.problems.push_back(std::string("the run: ") + e.what());
      return out;
    }
  } else {
    for (auto const& problem : tiling_problems(run.ranks)) out.problems.push_back("the run: " + problem);
  }
  out.same_layout = same_layout(saved, run);
  saved_writers writers(saved);
  holdings_by_name saved_held(saved.ranks, saved.parameters, saved.rules);
  holdings_by_name run_held(run.ranks, {}, run.rules);
  reader read{shards, weight_map, out, needs};
  auto run_world = static_cast<std::size_t>(std::max<std::int64_t>(run.world_size(), 0));
  std::vector<file_bytes> files(run_world);
  std::vector<std::pair<int, parameter_layout>> saved_storage;
  std::set<std::string_view> live;
  for (auto name : run_held.names()) {
    live.insert(name);
    if (out.same_layout) { // the run's layouts are the saved ones, one parameter at a time
      run_held.each(name, [&](int rank, parameter_layout const& p) {
        holding own{p.replicated ? writers.of(p.name, p.shard) : rank, &p}; // a replica: its writer's file
        if (own.rank >= 0) read.read(own, p, p.shard.numel(), files[static_cast<std::size_t>(rank)]);
      });
      continue;
    }
    auto before = saved_held.of(name, saved_storage);
    std::string named(name);
    if (before.empty()) {
      out.problems.push_back(named + ": missing from the checkpoint");
      if (saved.format == checkpoint_format::distributed) out.resharded.push_back(named);
      continue;
    }
    auto const& shape = before.front().layout->shape;
    sources from(before, writers);
    bool alike = true; // every rank holds it as the same rank saved it
    bool replicas = true; // every rank holds a shard a saved rank held: only the replicas changed in number
    std::size_t k = 0;
    run_held.each(name, [&](int rank, parameter_layout const& p) {
      alike = alike && k < before.size() && before[k].rank == rank && *before[k].layout == p;
      replicas = replicas && std::any_of(before.begin(), before.end(), [&](auto const& h) {
                   return h.layout->shard == p.shard && h.layout->shape == p.shape;
                 });
      ++k;
      if (p.shape != shape) {
        out.problems.push_back(named + ": has shape " + shape_text(shape) + " in the checkpoint, " +
                               shape_text(p.shape) + " in the run");
        return;
      }
      if (!p.shard.problem(p.shape)) read.add(p, from, files[static_cast<std::size_t>(rank)]);
    });
    if (saved.format == checkpoint_format::distributed && !(alike && k == before.size()) && !replicas)
      out.resharded.push_back(named); // some rank holds a part no saved rank held as it is
  }
  for (auto name : saved_held.names())
    if (!live.contains(name)) out.problems.push_back(std::string(name) + ": in the checkpoint but not in the run");
  if (saved.format == checkpoint_format::distributed && !out.same_layout) {
    // A parameter a rank saved and the same rank of the run does not hold at all, or one the run
    // lacks: resharded too, as every rank's layouts compared say.
    for (auto name : saved_held.names())
      if (!live.contains(name)) out.resharded.emplace_back(name);
    std::sort(out.resharded.begin(), out.resharded.end());
    out.resharded.erase(std::unique(out.resharded.begin(), out.resharded.end()), out.resharded.end());
  }
  for (auto& per_rank : files) {
    auto& reads = out.reads.emplace_back();
    for (auto const& [file, bytes] : per_rank) reads.push_back({std::string(file), bytes});
  }
  std::set<std::string> seen; // each problem once, however many ranks meet it
  std::erase_if(out.problems, [&](std::string const& p) { return !seen.insert(p).second; });
  return out;
}

/// The items the saved ranks keep that a load on another world size gives no rank (their names,
/// from rank 0's file: every rank saves its own of the same names, as a program does).
inline void dropped_items(std::filesystem::path const& dir, checkpoint_metadata const& saved, run_layout const& run,
                          load_plan& out) {
  if (saved.format != checkpoint_format::distributed || saved.world_size() == run.world_size()) return;
  try {
    io::safetensors_file file(formats::rank_file(dir, 0));
    std::vector<std::string> ignored; // a corrupt item is a problem the load reports of its own file
    for (auto const& [name, bytes] : cairn::detail::read_items(file.metadata(), ignored))
      out.dropped_items.push_back(name);
  } catch (error const&) { // the file's own problems are check_files' to report
  }
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

CAIRN_DECL load_plan plan_load(std::filesystem::path const& given, run_layout const& run) {
  auto dir = resolve_save(given); // a save on a store: its newest complete generation
  auto format = detect_format(dir);
  if (!format)
    throw checkpoint_error(checkpoint_errc::invalid_request,
                           dir.string() + ": not a checkpoint (no metadata.json, index or config.json)");
  auto metadata = read_stored_metadata(dir, *format); // refuses the external format
  std::map<std::string, std::string> weight_map;
  if (*format == checkpoint_format::state_dict) weight_map = io::read_index(formats::state_dict_index(dir)).weight_map;
  detail::load_planning::needs_by_file needs;
  if (!metadata.rules) {
    auto out = detail::load_planning::plan(metadata, weight_map, run, &needs);
    detail::load_planning::check_files(dir, metadata, needs, out);
    detail::load_planning::dropped_items(dir, metadata, run, out);
    return out;
  }
  // Under rules, each file read is checked against what its rank wrote of the shards loaded,
  // computed for that file alone: what is looked for is never held for every file at once.
  auto out = detail::load_planning::plan(metadata, weight_map, run, nullptr);
  load_plan scratch;
  auto shards = detail::load_planning::loaded_shards(metadata, run, scratch);
  std::set<std::string> read;
  for (auto const& reads : out.reads)
    for (auto const& r : reads) read.insert(r.file);
  detail::saved_writers writers(metadata);
  for (std::int64_t r = 0; r < metadata.world_size(); ++r) {
    auto name = formats::rank_file({}, static_cast<int>(r)).string();
    if (!read.contains(name)) continue;
    needs.clear();
    auto& need = needs[name];
    need.rank = static_cast<int>(r);
    for (auto const& p : metadata.layout_of(r).parameters)
      if (!p.replicated || writers.of(p.name, p.shard) == r)
        for (auto const& shard : shards)
          need.tensors[cairn::detail::tensor_name(p.name, shard)] = {p.shard.numel(), p.dtype};
    detail::load_planning::check_files(dir, metadata, needs, out);
  }
  detail::load_planning::dropped_items(dir, metadata, run, out);
  return out;
}

} // namespace cairn
