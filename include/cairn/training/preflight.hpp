#pragma once

// What a run checks before step one: the room its saves will take and whether it can write
// them. Pure functions of layouts, schedules and iterations, and one probe of the disk. No
// libtorch.

#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/layout_rules.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/io/dtype.hpp>
#include <cairn/training/save_policy.hpp>
#include <cairn/training/save_report.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace cairn {

/// Bytes a distributed save of these layouts writes: every rank's shards, replicated parameters
/// once.
CAIRN_DECL std::uint64_t distributed_bytes(std::vector<rank_layout> const& ranks, std::size_t shards);

/// The same for the layouts of the grid `rules` describe: each parameter whole, once.
CAIRN_DECL std::uint64_t distributed_bytes(layout_rules const& rules, std::size_t shards);

/// The same for the save `metadata` describes (its layouts or its rules), its shards saved.
CAIRN_DECL std::uint64_t distributed_bytes(checkpoint_metadata const& metadata);

/// Bytes of a save of whole tensors (state_dict, external) of the parameters `layout` lists,
/// as `save` asks (`shards` state shards held): every rank knows every parameter's whole shape,
/// so no communication is needed.
CAIRN_DECL std::uint64_t whole_bytes(rank_layout const& layout, std::size_t shards, checkpoint_save_config const& save);

/// How many saves of `schedule` can be on disk at once in a run from iteration `start` to `end`
/// with `existing` complete saves there already: those `keep` retains, those kept forever, and
/// the one being written; at least one.
CAIRN_DECL std::uint64_t saves_on_disk(checkpoint_base_config const& schedule, std::int64_t start, std::int64_t end,
                                       std::size_t existing);

/// The room a run's saves take: how many of each can be on disk at once, and their sizes.
struct disk_estimate {
  std::uint64_t checkpoints = 0;
  std::uint64_t checkpoint_bytes = 0;
  std::uint64_t exports = 0;
  std::uint64_t export_bytes = 0;

  [[nodiscard]] std::uint64_t total() const noexcept { return checkpoints * checkpoint_bytes + exports * export_bytes; }
};

/// An error naming `dir`, what is free and what the run needs, when the estimate does not fit.
CAIRN_DECL void check_disk_space(std::filesystem::path const& dir, disk_estimate const& needed);

/// Writes, renames and removes a small file in `dir` (made if missing): an io_error naming the
/// problem when the run could not save there.
CAIRN_DECL void probe_writable(std::filesystem::path const& dir);

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/training/impl/preflight.ipp>
#endif
