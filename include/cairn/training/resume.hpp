#pragma once
// cairn: requires libtorch

// Finding the checkpoint to resume from: the newest complete one that loads, after what
// interrupted saves left is removed.

#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/checkpoint/save_load.hpp>
#include <cairn/comm/collectives.hpp>
#include <cairn/config/json.hpp>
#include <cairn/diagnostics.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace cairn {

/// The checkpoint a run resumed from.
struct resumed_checkpoint {
  std::int64_t iteration = 0;
  std::filesystem::path path;
  checkpoint_metadata metadata;
};

/// The complete saves of `checkpoints` worth trying, newest first, after removing what
/// interrupted saves left in every directory of `cleaned` (each removal a warning). A save whose
/// marker lists files that are missing or of another size is skipped with a warning. Rank 0's
/// work: it touches the directories.
inline std::vector<std::int64_t> resume_candidates(save_directory const& checkpoints,
                                                   std::vector<save_directory> cleaned) {
  for (auto& dir : cleaned)
    for (auto const& message : dir.clean()) emit(severity::warning, {dir.root().string(), message});
  std::vector<std::int64_t> out;
  auto complete = checkpoints.complete();
  for (auto it = complete.rbegin(); it != complete.rend(); ++it) {
    if (auto problem = checkpoints.problem(*it))
      emit(severity::warning, {checkpoints.path(*it).string(), "skipped: " + *problem});
    else
      out.push_back(*it);
  }
  return out;
}

/// Loads into `state` the newest of `candidates` (rank 0's list) that loads, weights and
/// optimizer state, in any layout; a checkpoint that does not load (a missing file, a bad
/// checksum) is skipped with a warning for the next older one. Nothing when there are no
/// candidates; an error listing why when none loads. Collective.
template <comm::communicator Comm>
std::optional<resumed_checkpoint> load_newest(save_directory const& checkpoints, std::vector<std::int64_t> candidates,
                                              model_state& state, Comm& comm, verification verify) {
  std::string failures;
  for (auto iteration : comm::broadcast_integers(comm, candidates)) {
    checkpoint_load_config load;
    load.path = checkpoints.path(iteration);
    load.format = checkpoint_format::distributed;
    load.model_weights = true;
    load.optimizer_state = true;
    try {
      resumed_checkpoint out{iteration, load.path, {}};
      comm::all_succeed(comm, "cannot load " + load.path.string(), [&] {
        out.metadata = load_checkpoint(state, comm, load, verify);
        // As the seed checks: the checkpoint is of the iteration its directory names.
        auto const* stored =
            out.metadata.metadata.is_object() ? out.metadata.metadata.get_object().if_contains("iteration") : nullptr;
        if (!stored || !stored->is_int64() || stored->get_int64() != iteration)
          throw error(load.path.string() + ": its metadata says iteration " +
                      (stored ? to_compact_json(*stored) : std::string("nothing")) + ", its directory " +
                      std::to_string(iteration));
      });
      return out;
    } catch (std::exception const& e) {
      failures += std::string("\n  ") + e.what();
      if (comm.rank() == 0)
        emit(severity::warning, {load.path.string(), std::string("skipped, it does not load: ") + e.what()});
    }
  }
  if (!failures.empty()) throw error("no checkpoint in " + checkpoints.root().string() + " can be loaded:" + failures);
  return std::nullopt;
}

} // namespace cairn
