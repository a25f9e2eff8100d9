#pragma once

// A resume dry run: what loading a checkpoint into a run of other layouts would read, rank by
// rank and file by file, and every problem that would stop the load, from the checkpoint's
// metadata and the run's layouts alone: no tensor read, no libtorch, nothing allocated. What
// `cairn plan` prints; a program can call it before it builds its model.
//
//     auto run = cairn::parse<cairn::run_layout>(cairn::read_json_file("new.json"));
//     auto plan = cairn::plan_load("runs/a/checkpoints/1000", run);
//     for (auto const& problem : plan.problems) std::puts(problem.c_str());

#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/detail/decl.hpp>

#include <boost/describe/class.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cairn {

/// The layouts of a run about to load a checkpoint: every rank's holdings and the state shards
/// it has. What `cairn plan --layout FILE` reads (as JSON); a trainer can print its own.
struct run_layout {
  std::vector<std::string> shard_names{"weights"}; ///< the run's state shards, weights first
  std::vector<rank_layout> ranks;                  ///< what each rank of the run holds
  bool model_weights = true;                       ///< the load asks for the weights
  bool optimizer_state = true;                     ///< and for the other shards
  /// Instead of `ranks`: the rules of the run's grid (`infer_rules`), O(parameters) for any
  /// number of ranks. A plan from them never expands every rank's layout at once.
  std::optional<layout_rules> rules;

  /// The ranks of the run.
  [[nodiscard]] std::int64_t world_size() const noexcept {
    return rules ? rules->world_size() : static_cast<std::int64_t>(ranks.size());
  }
  /// What rank `rank` holds (of `ranks`, or computed from `rules`).
  [[nodiscard]] rank_layout layout_of(std::int64_t rank) const {
    return rules ? expand_rank(*rules, static_cast<int>(rank)) : ranks.at(static_cast<std::size_t>(rank));
  }
};
BOOST_DESCRIBE_STRUCT(run_layout, (), (shard_names, ranks, model_weights, optimizer_state, rules))

/// Bytes a rank would read from one file of the checkpoint.
struct planned_read {
  std::string file; ///< relative to the checkpoint's directory
  std::uint64_t bytes = 0;
};
BOOST_DESCRIBE_STRUCT(planned_read, (), (file, bytes))

/// What a load would do, and what would stop it.
struct load_plan {
  checkpoint_format format = checkpoint_format::distributed;
  /// Every problem the load would report, `where: what`; none when it would succeed.
  std::vector<std::string> problems;
  /// Every rank of the run holds what the same rank saved: each reads its own file only.
  bool same_layout = false;
  /// Parameters whose holdings differ from the save's (resharded as they load), in name order.
  std::vector<std::string> resharded;
  /// State shards of the run the load leaves out, zeroed to start afresh.
  std::vector<std::string> zeroed;
  /// Items (`model_state::items`) the saved ranks keep that the load gives no rank: the run has
  /// another number of ranks (`saved_items` reads them).
  std::vector<std::string> dropped_items;
  /// For each rank of the run, the files it reads and how much of each, in file order.
  std::vector<std::vector<planned_read>> reads;
};
BOOST_DESCRIBE_STRUCT(load_plan, (), (format, problems, same_layout, resharded, zeroed, dropped_items, reads))

/// The dry run of loading the checkpoint `saved` (a distributed or state_dict save; the
/// weight map of a state_dict's index, empty for a distributed one) into a run of `run`.
CAIRN_DECL load_plan plan_load(checkpoint_metadata const& saved, std::map<std::string, std::string> const& weight_map,
                               run_layout const& run);

/// The same for the checkpoint in `dir`, its metadata read from its files. An io_error naming
/// the file when they cannot be read; an external checkpoint is refused (its tensors are
/// another program's, named by a converter).
CAIRN_DECL load_plan plan_load(std::filesystem::path const& dir, run_layout const& run);

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/load_plan.ipp>
#else
#include <cairn/config/detail/reflect.hpp>
namespace cairn::detail { // made once, in cairn::compiled (src.hpp)
extern template config_ops const& config_of<run_layout>();
extern template config_ops const& config_of<load_plan>();
} // namespace cairn::detail
#endif
