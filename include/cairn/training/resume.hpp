#pragma once
// cairn: requires libtorch

// Finding the checkpoint to resume from: the newest complete one that loads, after what
// interrupted saves left is removed.

#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/checkpoint/save_load.hpp>
#include <cairn/comm/ref.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/diagnostics.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cairn {

/// The checkpoint a run resumed from.
struct resumed_checkpoint {
  std::int64_t iteration = 0;
  std::filesystem::path path; ///< on this rank's node, for one from the local tier
  checkpoint_metadata metadata;
  bool local = false; ///< from the local tier (training.checkpoint.local)
};

/// The complete saves of a directory of checkpoints: those worth loading, and those refused
/// before loading.
struct resume_candidates_found {
  std::vector<std::int64_t> loadable; ///< newest first
  std::vector<std::string> refused;   ///< "<path>: <why>", newest first
  /// The folders of the saves in `loadable`, in the order a resume tries them: newest iteration
  /// first, and within one the folder `save_directory::resolved` gives first, then the older
  /// complete generations of that iteration (on a store). Empty: `loadable`, each resolved.
  std::vector<std::pair<std::int64_t, std::string>> folders;
};

/// The complete saves of `checkpoints` (those holding a completion marker), newest first, after
/// removing what interrupted saves left in every directory of `cleaned` (each removal a
/// warning). A save whose marker lists files that are missing, of another size or of another
/// save is refused with a warning; on a store, an older complete generation of its iteration
/// is then a candidate in its place. Rank 0's work: it touches the directories.
CAIRN_DECL resume_candidates_found resume_candidates(save_directory const& checkpoints,
                                                     std::vector<save_directory> cleaned);

/// Loads into `state` the first of `found.folders` (rank 0's lists) that loads, weights and
/// optimizer state, in any layout; a checkpoint that does not load (a missing file, a bad
/// checksum) is skipped with a warning for the next one (an older generation of its iteration,
/// or the next older iteration). Nothing when the directory holds no complete checkpoint at
/// all. When it holds some and none loads (each refused before loading, or failing to load),
/// an error naming each and why, on every rank: a run never starts over silently beside
/// checkpoints it could not read, nor lets retention delete them. With `architecture_check`
/// (`manager_options`), a checkpoint whose stored config gives another model is refused at once,
/// before any load, by a config_error naming each key that differs. Collective.
CAIRN_DECL std::optional<resumed_checkpoint>
load_newest(save_directory const& checkpoints, resume_candidates_found found, model_state& state,
            comm::communicator_ref comm, verification verify,
            std::function<std::vector<diagnostic>(boost::json::value const&, std::string const&)> const&
                architecture_check = {});

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/training/impl/resume.ipp>
#endif
