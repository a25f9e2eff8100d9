#pragma once

// Verifying a checkpoint without the model's code: what `cairn verify` prints and what a
// program calls before it trusts a directory. No libtorch.

#include <cairn/checkpoint/format_files.hpp>
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

/// What `verify_checkpoint` found: every problem, each naming its file; notes that are not
/// problems (files of other tools that record no checksums); how many safetensors files it read.
struct verification_report {
  std::vector<std::string> problems;
  std::vector<std::string> notes;
  std::size_t files = 0;

  [[nodiscard]] bool ok() const noexcept { return problems.empty(); }
};

/// How strict `verify_checkpoint` is.
struct verify_options {
  /// Whether a file without checksums is a problem even where cairn did not write it (a
  /// Hugging Face directory, a lone .safetensors file). In cairn's own formats every tensor has
  /// one, so a missing checksum is always a problem there.
  bool require_checksums = false;
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

/// A state_dict checkpoint lists every parameter once, whole; its index maps every saved
/// tensor to a file of this save holding it with the listed shape and type; the files hold
/// nothing the index does not list.
CAIRN_DECL void verify_state_dict_layout(std::filesystem::path const& path, checkpoint_metadata const& metadata,
                                         std::vector<std::string>& problems);

/// An external checkpoint's config.json is a JSON object naming its model_type.
CAIRN_DECL void verify_external_config(std::filesystem::path const& path, std::vector<std::string>& problems);

/// The checksums of every tensor of the safetensors file `file_path` (and of the items it
/// records), into `report`; in cairn's own formats (`own_format`) every tensor has one, and one
/// missing means the file was altered.
CAIRN_DECL void verify_checksums(std::filesystem::path const& file_path, bool own_format, verify_options const& options,
                                 verification_report& report);

/// Every entry of every index file in `dir` names a file that is there and holds the tensor.
CAIRN_DECL void verify_indexes(std::filesystem::path const& dir, std::vector<std::string>& problems);

} // namespace detail

/// Checks the checkpoint (or `.safetensors` file) at `path` without loading it, everything a
/// load would: a directory holds a checkpoint of a known format; every file parses and its
/// checksums match its tensors (in cairn's formats every tensor has one); the stored layouts
/// describe every parameter exactly once (shards tiling it with no overlap or gap); a
/// distributed checkpoint has every rank's file, of this save, with every tensor of its layout
/// at the listed size and type; a state_dict index maps every saved tensor to a file holding it
/// with the listed shape and type; index entries resolve; an external checkpoint's config.json
/// parses; a save of an experiment (`<dir>/checkpoints/<n>`, `<dir>/export/<n>`) has its
/// completion marker and the files it lists. A file that cannot be read (permissions, a loop of
/// links, a directory removed meanwhile) is a problem naming it, never an exception.
CAIRN_DECL verification_report verify_checkpoint(std::filesystem::path const& path, verify_options options = {});

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/verify.ipp>
#endif
