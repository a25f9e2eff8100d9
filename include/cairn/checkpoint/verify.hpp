#pragma once

// Verifying a checkpoint without the model's code: what `cairn verify` prints and what a
// program calls before it trusts a directory. No libtorch.

#include <cairn/checkpoint/files.hpp>
#include <cairn/detail/decl.hpp>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace cairn {

/// Whether a load checks the checksums the files record (a pass of hashing over every byte
/// read).
enum class verification { checksums, none };

/// What `verify_checkpoint` found: every problem, each naming its file, and how many
/// safetensors files it read.
struct verification_report {
  std::vector<std::string> problems;
  std::size_t files = 0;

  [[nodiscard]] bool ok() const noexcept { return problems.empty(); }
};

/// The `.safetensors` files of `path` (a directory, or one file), sorted.
CAIRN_DECL std::vector<std::filesystem::path> safetensors_files(std::filesystem::path const& path);

/// Why the directory `path` is not a checkpoint (it holds none of a known format: empty, an
/// experiment directory, rank files without metadata.json), or nothing: a checkpoint, or a file.
CAIRN_DECL std::optional<std::string> not_a_checkpoint(std::filesystem::path const& path);

namespace detail {

/// Every saved rank's file of a distributed checkpoint is there, with every tensor its layout
/// lists, of the listed size.
CAIRN_DECL void verify_distributed_layout(std::filesystem::path const& path, checkpoint_metadata const& metadata,
                                          std::vector<std::string>& problems);

/// A state_dict checkpoint lists every parameter once, whole, and every file belongs to it.
CAIRN_DECL void verify_state_dict_layout(std::filesystem::path const& path, checkpoint_metadata const& metadata,
                                         std::vector<std::string>& problems);

/// Every entry of every index file in `dir` names a file that is there and holds the tensor.
CAIRN_DECL void verify_indexes(std::filesystem::path const& dir, std::vector<std::string>& problems);

} // namespace detail

/// Checks the checkpoint (or `.safetensors` file) at `path` without loading it: a directory
/// holds a checkpoint of a known format; every file parses and carries checksums that match its
/// tensors; the stored layouts describe every parameter exactly once (shards tiling it with no
/// overlap or gap); a distributed checkpoint has every rank's file with every tensor of its
/// layout; index entries resolve; a save of an experiment
/// (`<dir>/checkpoints/<n>`, `<dir>/export/<n>`) has its completion marker and the files it
/// lists.
CAIRN_DECL verification_report verify_checkpoint(std::filesystem::path const& path);

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/verify.ipp>
#endif
