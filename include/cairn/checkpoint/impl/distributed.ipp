// Definitions of <cairn/checkpoint/formats/distributed.hpp>: inline in a header-only build,
// compiled once by <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/detail/executor.hpp>
#include <cairn/checkpoint/detail/identity.hpp>
#include <cairn/checkpoint/detail/loader.hpp>
#include <cairn/checkpoint/detail/save_files.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/formats/distributed.hpp>
#include <cairn/comm/collectives.hpp>
#include <cairn/config/json.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/io/safetensors.hpp>
#include <cairn/io/safetensors_writer.hpp>

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn::formats {

CAIRN_DECL void distributed::save(model_state const& state, comm::communicator_ref comm,
                                  checkpoint_save_config const& config, boost::json::value const& program_config,
                                  boost::json::value const& user_metadata) {
  detail::execute(plan(state, comm, config, program_config, user_metadata), config.path, state, comm);
}

CAIRN_DECL save_plan distributed::plan(model_state const& state, comm::communicator_ref comm,
                                       checkpoint_save_config const& config, boost::json::value const& program_config,
                                       boost::json::value const& user_metadata, cairn::detail::layout_exchange* reuse,
                                       replica_writer_rule replicas) {
  comm::all_succeed(comm, "the state is not valid", [&] { state.check(); }); // on every rank together
  save_plan out;
  out.format = format;
  auto agreed = cairn::detail::agree_layouts(state, comm, reuse);
  // Layouts that do not tile a parameter are refused now, not when the checkpoint is loaded
  // (once for a run's layouts while they stay the same; rules tile by construction).
  if (!agreed.checked) {
    std::string problems;
    for (auto const& problem : tiling_problems(agreed.ranks)) problems += "\n  " + problem;
    if (!problems.empty())
      throw checkpoint_error(checkpoint_errc::invalid_state,
                             "the ranks' layouts do not describe the model exactly:" + problems);
    if (reuse) reuse->checked = true;
  }
  checkpoint_metadata metadata;
  metadata.format = format;
  metadata.save_id = comm::broadcast_string(comm, comm.rank() == 0 ? cairn::detail::new_save_id() : std::string());
  auto shards = detail::selected_shards(state.shard_names, config.model_weights, config.optimizer_state);
  for (auto i : shards) metadata.shard_names.push_back(state.shard_names[i]);
  if (agreed.rules) { // on rank 0 every stage's, on the others their own stage's
    metadata.rules = std::move(agreed.rules);
    for (auto& rule : metadata.rules->parameters) rule.dtype = detail::stored_type(rule.dtype, config.data_type);
  } else {
    out.ranks = std::move(agreed.ranks);
    for (auto layout : out.ranks) {
      for (auto& p : layout.parameters) p.dtype = detail::stored_type(p.dtype, config.data_type);
      metadata.ranks.push_back(std::move(layout));
    }
  }
  metadata.config = program_config;
  metadata.metadata = cairn::detail::hooked_metadata(state, user_metadata); // a libtorch optimizer's step counts…
  metadata.iteration = detail::stored_iteration(metadata.metadata);
  metadata.replica_writers = replicas;
  // Replicated parameters: each written once, by the rank the layouts give it, so that every
  // rank writes about as much (Megatron's fully parallel save, for data parallelism). Under
  // rules, a rank knows its own stage's writers, and plans its own file alone.
  auto writers = metadata.rules
                     ? detail::replica_writers_of(*metadata.rules, state.grid->coordinates(comm.rank()).pipeline,
                                                  metadata.replica_writers)
                     : detail::replica_writers_of(metadata.ranks, metadata.replica_writers);
  auto plan_file = [&](int r, rank_layout const& live) {
    planned_file file{rank_file({}, r).string(), r, {}, {}};
    if (file.writer == comm.rank()) { // the identity of a file is its writer's to record
      file.metadata = cairn::detail::identity_metadata(metadata, file.writer);
      file.metadata["format"] = "cairn.distributed";
      cairn::detail::put_items(file.metadata, state.items); // this rank's state beyond tensors
    }
    for (auto const& p : live.parameters) {
      if (p.replicated && !writers.every_holder && writers.of(p.name, p.shard) != r)
        continue; // another replica writes it
      for (auto i : shards)
        file.items.push_back({cairn::detail::tensor_name(p.name, state.shard_names[i]),
                              p.dtype,
                              detail::stored_type(p.dtype, config.data_type),
                              {p.shard.numel()},
                              write_source::own_shard,
                              p.name,
                              i});
    }
    out.files.push_back(std::move(file));
  };
  if (metadata.rules)
    plan_file(comm.rank(), state.layout());
  else
    for (std::size_t r = 0; r < out.ranks.size(); ++r) plan_file(static_cast<int>(r), out.ranks[r]);
  // metadata.json, which rank 0 alone writes (and alone knows every stage's rules for).
  out.closing.push_back(
      {metadata_file({}).string(), comm.rank() == 0 ? detail::distributed_metadata_text(metadata) : std::string()});
  return out;
}

} // namespace cairn::formats

namespace cairn::detail {

/// The saved ranks holding each parameter, in rank order, with their layouts of it.
using saved_holders = std::vector<std::pair<int, parameter_layout const*>>;

/// Reads the rank files of a distributed checkpoint for a load: each file checked once against
/// the save's identity (a file of another save refused, and reported once).
struct rank_file_reader {
  loader& load;
  checkpoint_metadata const& metadata;
  std::filesystem::path const& dir;
  int rank;
  bool fast;             // every rank loads with the saving layout: each reads its own file only
  saved_writers writers; // the file of each replicated shard
  std::set<int> identity_checked, foreign;

  /// Whether `file`, rank `r`'s, is this save's: checked against the save's identity once, a
  /// file of another save reported once.
  bool of_this_save(io::safetensors_file const& file, int r) {
    if (identity_checked.insert(r).second)
      if (auto problem = identity_problem(file, metadata, r)) {
        load.problem(file.path().string(), *problem);
        foreign.insert(r);
      }
    return !foreign.contains(r);
  }

  /// Where the tensor `path` of live parameter `p` comes from, or nothing after a problem (reported).
  std::optional<std::vector<load_source>> sources(parameter_state const& p, std::string const& path,
                                                  saved_holders const& held) {
    std::vector<load_source> found;
    for (auto const& [r, saved] : held) {
      // A replicated parameter is in its writer's file only.
      // (Where every holder wrote its own, as a local save's do, a rank loading with the saving
      // layout reads its own file.)
      if (saved->replicated ? r != (fast && writers.every_holder() ? rank : writers.of(p.layout.name, saved->shard))
                            : fast && r != rank)
        continue;
      if (saved->shape != p.layout.shape) {
        load.problem(path, "has shape " + shape_text(saved->shape) + " in the checkpoint, " +
                               shape_text(p.layout.shape) + " here");
        return std::nullopt;
      }
      // Resharding: the files of holdings this rank's shard does not meet are not opened: those
      // whose spans in the tensor are apart, and for vectors and matrices (where overlap_count
      // is exact at any size) those that share no element.
      if (!fast && !saved->shard.problem(saved->shape)) {
        auto theirs = span_of(saved->shape, saved->shard), ours = span_of(p.layout.shape, p.layout.shard);
        if (theirs.end <= ours.begin || ours.end <= theirs.begin ||
            (p.layout.shape.size() <= 2 && overlap_count(p.layout.shape, saved->shard, p.layout.shard) == 0))
          continue;
      }
      try {
        auto& file = load.file(formats::rank_file(dir, r));
        // Loading with the saving layout, a rank reads its own file whole: front to back, in
        // large reads (an object's small tensors would each cost a request otherwise).
        if (fast) file.read_ahead(std::uint64_t{64} << 20);
        if (!of_this_save(file, r)) return std::nullopt; // reported once
        found.push_back(load.source(file, path, saved->shard, saved->dtype));
      } catch (error const& e) {
        load.problem(path, e.what());
        return std::nullopt;
      }
    }
    return found;
  }
};

} // namespace cairn::detail

namespace cairn::formats {

CAIRN_DECL checkpoint_metadata distributed::load(model_state& state, comm::communicator_ref comm,
                                                 checkpoint_load_config const& config, verification verify) {
  comm::all_succeed(comm, "the state is not valid", [&] { state.check(); }); // on every rank together
  auto metadata = read_checkpoint_metadata(metadata_file(config.path));
  detail::loader loader(state, config, metadata.shard_names, verify);
  if (!metadata.rules) // rules tile their parameters by construction
    for (auto const& problem : tiling_problems(metadata.ranks))
      loader.problem(metadata_file(config.path).string(), problem);
  // With the saving layout on every rank, each rank reads nothing but its own file.
  bool same_world = metadata.world_size() == comm.size();
  auto saved_mine = same_world ? metadata.layout_of(comm.rank()) : rank_layout{};
  bool same_layout = same_world && saved_mine == state.layout();
  detail::rank_file_reader reader{
      loader, metadata, config.path, comm.rank(), comm::all_of(comm, same_layout), detail::saved_writers(metadata),
      {},     {}};
  // Who holds each saved parameter: every rank's layouts listed, or under rules computed for
  // the parameters this rank loads alone (its own holding, with the saving layout everywhere).
  std::map<std::string, detail::saved_holders, std::less<>> holders;
  std::map<std::string_view, parameter_rule const*> rules;
  if (metadata.rules)
    for (auto const& rule : metadata.rules->parameters) rules.emplace(rule.name, &rule);
  else
    for (std::size_t r = 0; r < metadata.ranks.size(); ++r)
      for (auto const& saved : metadata.ranks[r].parameters)
        holders[saved.name].emplace_back(static_cast<int>(r), &saved);
  for (auto& p : state.parameters) {
    std::vector<std::pair<int, parameter_layout>> computed; // under rules: the holdings of p
    detail::saved_holders ruled;
    detail::saved_holders const* held = nullptr;
    if (metadata.rules) {
      auto rule = rules.find(p.layout.name);
      if (rule != rules.end()) {
        if (reader.fast) {
          auto const& mine = saved_mine.parameters[static_cast<std::size_t>(&p - state.parameters.data())];
          computed.emplace_back(mine.replicated && !reader.writers.every_holder()
                                    ? reader.writers.of(mine.name, mine.shard)
                                    : comm.rank(),
                                mine);
        } else {
          computed = cairn::detail::holdings_of(*metadata.rules, *rule->second);
        }
        for (auto const& [r, saved] : computed) ruled.emplace_back(r, &saved);
        held = &ruled;
      }
    } else if (auto found = holders.find(p.layout.name); found != holders.end()) {
      held = &found->second;
    }
    if (!held) {
      loader.missing(p.layout.name);
      continue;
    }
    for (auto const& [live_index, saved_name] : loader.shards()) {
      auto path = cairn::detail::tensor_name(p.layout.name, saved_name);
      if (auto sources = reader.sources(p, path, *held)) loader.load(p, live_index, *sources, path);
    }
    loader.finish(p);
  }
  if (metadata.rules)
    for (auto const& rule : metadata.rules->parameters) loader.saved(rule.name);
  else
    for (auto const& [name, held] : holders) loader.saved(name);
  // This rank's items, from its own file, where as many ranks saved the checkpoint (the file
  // checked against the save's identity first, where reading tensors did not).
  std::map<std::string, std::string> items;
  auto own = rank_file(config.path, same_world ? comm.rank() : 0);
  try {
    if (same_world) {
      auto& file = loader.file(own);
      if (reader.of_this_save(file, comm.rank())) {
        std::vector<std::string> problems;
        items = cairn::detail::read_items(file.metadata(), problems);
        for (auto const& problem : problems) loader.problem(own.string(), problem);
      }
    } else if (comm.rank() == 0) {
      std::vector<std::string> ignored;
      auto found = cairn::detail::read_items(loader.file(own).metadata(), ignored);
      if (!found.empty())
        emit(severity::warning,
             {config.path.string(), "the ranks' items ('" + found.begin()->first + "'" +
                                        (found.size() > 1 ? " and others" : "") + ") were saved by " +
                                        std::to_string(metadata.world_size()) + " ranks; this run of " +
                                        std::to_string(comm.size()) + " starts without them"});
    }
  } catch (error const& e) {
    loader.problem(own.string(), e.what());
  }
  loader.agree(comm);
  state.items = std::move(items);
  cairn::detail::after_load(state, metadata, config.optimizer_state);
  return metadata;
}

} // namespace cairn::formats
