#pragma once

// A directory of saves named by iteration (an experiment's checkpoints/ and export/), and the
// durable commit that makes a save complete. No libtorch: tools use it too.
//
//   <root>/<iteration>/                 a save; complete only when it holds the marker
//   <root>/<iteration>/complete.json    the completion marker, written last
//   <root>/.partial-<iteration>/        a save being written
//   <root>/.replaced-<iteration>/       a complete save being replaced by a new one
//
// A save is written under .partial-<iteration>, then renamed to <iteration>, then its marker is
// written and fsynced. A crash at any instant leaves the earlier saves as they were, and at most
// a leftover that `clean()` removes: nothing without a marker is ever taken for complete. On a
// store without rename (an object store, `s3://…`), a save is written under <iteration>/ itself
// and is complete once its marker, written last after every file is confirmed, is there.

#include <cairn/detail/decl.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/error.hpp> // what its functions throw

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <charconv>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace cairn {

namespace detail {

/// A checksum of what identifies a file of a save: the header of a safetensors file (its length
/// and JSON, which record the save, the rank and every tensor's checksum), the first 16 MiB of
/// any other file (metadata.json, config.json and indexes are far smaller).
CAIRN_DECL std::string identity_checksum(std::filesystem::path const& file);

/// Whether something is at `path` (a file, an object; on POSIX also anything else). A store
/// that cannot be asked throws: it is never "not there".
CAIRN_DECL bool present(std::filesystem::path const& path);

/// Whether `path` is a directory, or on an object store a prefix with objects under it (a
/// listing that fails throws).
CAIRN_DECL bool is_folder(std::filesystem::path const& path);

/// The size of the file or object `path`, nothing when there is none (or, on POSIX, when it is
/// not a regular file).
CAIRN_DECL std::optional<std::uint64_t> stored_size(std::filesystem::path const& path);

/// What is directly under the directory or prefix `path`, sorted (empty when nothing is).
CAIRN_DECL std::vector<io::listed_entry> folder_entries(std::filesystem::path const& path);

/// The JSON file or object `file` (at most `limit` bytes), read through its storage backend.
CAIRN_DECL boost::json::value read_json(std::filesystem::path const& file, std::size_t limit);

} // namespace detail

/// The file whose presence makes a save complete.
inline constexpr char const* completion_marker = "complete.json";

/// The folders of an experiment directory: `<experiment_dir>/checkpoints/<iteration>/` for
/// resume checkpoints, `<experiment_dir>/export/<iteration>/` for exports.
struct experiment_layout {
  static constexpr char const* checkpoints_folder = "checkpoints";
  static constexpr char const* exports_folder = "export";

  std::filesystem::path dir;

  [[nodiscard]] std::filesystem::path checkpoints() const { return dir / checkpoints_folder; }
  [[nodiscard]] std::filesystem::path exports() const { return dir / exports_folder; }
};

class save_directory {
public:
  /// The saves under `root`, a directory or an object store's prefix (`s3://bucket/prefix`).
  explicit save_directory(std::filesystem::path root)
      : root_(std::move(root)), storage_(io::open_location(root_.string())) {}

  [[nodiscard]] std::filesystem::path const& root() const noexcept { return root_; }
  [[nodiscard]] std::filesystem::path path(std::int64_t iteration) const { return root_ / std::to_string(iteration); }
  /// Where the save at `iteration` is written: a staging directory renamed into place, or, on a
  /// store without rename, its own place (complete once its marker is there).
  [[nodiscard]] std::filesystem::path staging(std::int64_t iteration) const {
    if (!renames()) return path(iteration);
    return root_ / (".partial-" + std::to_string(iteration));
  }
  [[nodiscard]] std::filesystem::path replaced(std::int64_t iteration) const {
    return root_ / (".replaced-" + std::to_string(iteration));
  }

  /// The iterations of the saves holding a marker, ascending.
  [[nodiscard]] CAIRN_DECL std::vector<std::int64_t> complete() const;

  /// Directories holding a marker under a name that is not an iteration (`0008`, `+8`, `8.bak`):
  /// saves renamed by hand, never resumed from nor deleted, which a resume reports.
  [[nodiscard]] CAIRN_DECL std::vector<std::filesystem::path> misnamed() const;

  /// Why the save at `iteration` is not complete and sound, or nothing when it is: its marker
  /// must parse, and every file it lists must be there with the listed size and the listed
  /// checksum of its header (so a file of another save, or of another rank, is not taken for
  /// this one's). The checksums of the contents are checked by loading or by `cairn verify`.
  [[nodiscard]] CAIRN_DECL std::optional<std::string> problem(std::int64_t iteration) const;

  /// Removes what interrupted saves left: staging directories and saves without a marker. A
  /// complete save that was being replaced is put back when its replacement did not finish.
  /// Returns what was removed or restored, for the caller to report.
  CAIRN_DECL std::vector<std::string> clean();

  /// An empty staging directory for the save at `iteration`, replacing a stale one.
  CAIRN_DECL std::filesystem::path begin(std::int64_t iteration);

  /// Makes the staged save at `iteration` complete: fsyncs the staging directory, renames it to
  /// its final name (a complete save already there is set aside until the new one is complete),
  /// and writes the marker, listing every file with its size and a checksum of its header, plus
  /// `info`. Every file must
  /// already be durable (cairn's writers fsync each file before naming it).
  CAIRN_DECL void commit(std::int64_t iteration, boost::json::object info = {});

  /// Whether the save at `iteration` holds finite values only, as its marker says: a marker
  /// with `"finite": false` (the manager's, for a state holding NaN or infinity), or one that
  /// cannot be read, says no.
  [[nodiscard]] CAIRN_DECL bool finite(std::int64_t iteration) const;

  /// Removes the save at `iteration`: its marker first (durably), so that a crash midway
  /// leaves a save that is plainly incomplete, then everything else.
  CAIRN_DECL void remove(std::int64_t iteration);

  /// The iteration a directory named `name` holds, when `name` is one (decimal digits, no sign,
  /// no leading zero).
  [[nodiscard]] CAIRN_DECL static std::optional<std::int64_t> iteration_of(std::string_view name);

  /// Whether saves are staged and renamed into place (the storage renames atomically).
  [[nodiscard]] bool renames() const { return storage_.backend->guarantees().atomic_rename; }

private:
  /// Subdirectories named `<prefix><iteration>`. A listing that fails throws.
  [[nodiscard]] CAIRN_DECL std::vector<std::pair<std::int64_t, std::filesystem::path>>
  numbered(std::string_view prefix) const;

  /// Whether the file or object `path` is there.
  [[nodiscard]] CAIRN_DECL bool exists(std::filesystem::path const& path) const;

  /// The key of `path` (a save or a file of one) in this directory's storage.
  [[nodiscard]] CAIRN_DECL std::string key_of(std::filesystem::path const& path) const;

  std::filesystem::path root_;
  io::storage_location storage_;
};

namespace detail {
/// Whether a directory is one save of an experiment's directory of saves, and when it is, why
/// it is not complete and sound (nothing when it is).
struct save_completeness {
  bool is_save = false;
  std::optional<std::string> problem;
};
} // namespace detail

/// The completeness of `path` as a save: whether it is one (a directory named by an iteration
/// under an experiment's `checkpoints/` or `export/`, or any directory holding a completion
/// marker: `.is_save`) and, when it is, why it is not complete and sound (`.problem`).
CAIRN_DECL detail::save_completeness save_status(std::filesystem::path const& path);

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/directory.ipp>
#endif
