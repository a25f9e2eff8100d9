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
// a leftover that `clean()` removes: nothing without a marker is ever taken for complete.
//
// On a store without rename (an object store, `s3://…`), a save is written under a generation of
// its own, <iteration>/gen-<since>-<writer>-<n>/, named by its writer (the run holding the
// experiment's lease since `since`), and is complete once its marker, written last after every
// file is confirmed, is there. The save at <iteration> is its newest complete generation. No
// object another writer wrote is ever written again: a run that lost its lease while frozen and
// finishes its commit late writes only where it alone writes, and a run removes only the
// generations of writers older than itself (its own included), never a newer one's.

#include <cairn/detail/decl.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/error.hpp> // what its functions throw

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <charconv>
#include <compare>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace cairn {

/// The name of a save's generation on a store without rename: its writer's `since` (when it
/// took the experiment, unix milliseconds), the writer's random name, and the writer's count of
/// saves. Generations order by those three: a writer that took the experiment later is newer.
struct save_generation {
  std::int64_t since = 0;
  std::string writer;
  std::int64_t number = 0;

  /// The largest `since` and `number` a generation's name may hold (10^15: milliseconds past the
  /// year 33000), so that a writer moving past one (pass_future_generations) never overflows.
  static constexpr std::int64_t max_number = 1'000'000'000'000'000;

  /// `gen-<since>-<writer>-<number>`.
  [[nodiscard]] CAIRN_DECL std::string name() const;
  /// The generation a folder named `name` is, when it is one.
  [[nodiscard]] CAIRN_DECL static std::optional<save_generation> parse(std::string_view name);
  friend auto operator<=>(save_generation const&, save_generation const&) = default;
};

/// The folder that holds the save at `path`: `path` itself when it holds a completion marker, or,
/// where it holds generations, its newest generation that holds one (`path` when none does).
/// Every reader of a save given by a user's path resolves it first. A store that cannot be asked
/// throws.
CAIRN_DECL std::filesystem::path resolve_save(std::filesystem::path const& path);

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

/// Why the save in `folder` is not complete and sound, or nothing when it is: its marker must
/// parse, record `iteration` when given (and an integer in any case), and list every file there
/// with its size and the checksum of its header. A store that does not answer throws.
CAIRN_DECL std::optional<std::string> save_problem(std::filesystem::path const& folder,
                                                   std::optional<std::int64_t> iteration);

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
  CAIRN_DECL explicit save_directory(std::filesystem::path root);

  [[nodiscard]] std::filesystem::path const& root() const noexcept { return root_; }
  /// The save at `iteration`, as users name it: `<root>/<iteration>`.
  [[nodiscard]] std::filesystem::path path(std::int64_t iteration) const { return root_ / std::to_string(iteration); }
  /// The folder holding the save at `iteration`: `path(iteration)`, or on a store without rename
  /// its newest complete generation (see resolve_save).
  [[nodiscard]] std::filesystem::path resolved(std::int64_t iteration) const { return resolve_save(path(iteration)); }
  /// Where the save at `iteration` is being written: what `begin` returned, else with rename its
  /// staging directory `.partial-<iteration>`, and on a store nothing (an empty path).
  [[nodiscard]] CAIRN_DECL std::filesystem::path staging(std::int64_t iteration) const;
  [[nodiscard]] std::filesystem::path replaced(std::int64_t iteration) const {
    return root_ / (".replaced-" + std::to_string(iteration));
  }

  /// Names the writer of the saves this object begins on a store without rename: when it took
  /// the experiment (unix milliseconds; a run that took it later writes newer generations) and
  /// its random name. By default, the time this object was made and a name of its own.
  CAIRN_DECL void set_writer(std::int64_t since, std::string writer);

  /// On a store without rename: moves this writer's `since` past the generations dated after
  /// this host's clock (written on a host whose clock runs ahead, or copied in from elsewhere),
  /// which would otherwise outrank every save this writer makes of their iterations and never be
  /// removed by it. Generations dated between `since` and now do not move it: their writer took
  /// the experiment after this one (its lease was lost), and this writer must not outrank it. A
  /// lock's holder calls this once, right after taking the lock. Returns what it moved past, for
  /// the caller to report; nothing with rename or when no generation is dated ahead.
  CAIRN_DECL std::optional<std::string> pass_future_generations();

  /// The iterations of the saves holding a marker, ascending.
  [[nodiscard]] CAIRN_DECL std::vector<std::int64_t> complete() const;

  /// Every folder holding a marker of the save at `iteration`, in the order `resolved` prefers
  /// them: `path(iteration)` itself when its marker is in place, then its generations that hold
  /// one, newest first. What a resume falls back through when the newest does not load.
  [[nodiscard]] CAIRN_DECL std::vector<std::filesystem::path> complete_folders(std::int64_t iteration) const;

  /// Directories holding a marker under a name that is not an iteration (`0008`, `+8`, `8.bak`):
  /// saves renamed by hand, never resumed from nor deleted, which a resume reports.
  [[nodiscard]] CAIRN_DECL std::vector<std::filesystem::path> misnamed() const;

  /// Why the save at `iteration` is not complete and sound, or nothing when it is: its marker
  /// must parse, and every file it lists must be there with the listed size and the listed
  /// checksum of its header (so a file of another save, or of another rank, is not taken for
  /// this one's). The checksums of the contents are checked by loading or by `cairn verify`.
  [[nodiscard]] CAIRN_DECL std::optional<std::string> problem(std::int64_t iteration) const;

  /// Removes what interrupted saves left: staging directories and saves without a marker (on a
  /// store, generations without one, of this writer or older ones). A complete save that was
  /// being replaced is put back when its replacement did not finish (with rename). Returns what
  /// was removed, restored or left alone, for the caller to report.
  CAIRN_DECL std::vector<std::string> clean();

  /// An empty place to write the save at `iteration` and where it is: a staging directory
  /// (replacing a stale one), or on a store without rename a new generation of this writer's.
  CAIRN_DECL std::filesystem::path begin(std::int64_t iteration);

  /// Makes the save begun at `iteration` complete and returns where it is. With rename: fsyncs
  /// the staging directory, renames it to its final name (a complete save already there is set
  /// aside until the new one is complete), and writes the marker. On a store: writes the marker
  /// into the generation, then removes the older generations of that iteration this writer may
  /// remove. The marker lists every file with its size and a checksum of its header, plus
  /// `info`. Every file must already be durable (cairn's writers fsync each file before naming it).
  CAIRN_DECL std::filesystem::path commit(std::int64_t iteration, boost::json::object info = {});

  /// Forgets the save begun at `iteration` and removes what it wrote, as well as it can.
  CAIRN_DECL void abandon(std::int64_t iteration);

  /// Whether the save at `iteration` holds finite values only, as its marker says: a marker
  /// with `"finite": false` (the manager's, for a state holding NaN or infinity), or one that
  /// does not parse, says no. A marker that cannot be read (a store that does not answer, a
  /// save removed meanwhile) is an error, never "not finite".
  [[nodiscard]] CAIRN_DECL bool finite(std::int64_t iteration) const;

  /// Removes the save at `iteration`: its marker first (durably), so that a crash midway
  /// leaves a save that is plainly incomplete, then everything else. On a store, only the
  /// generations of this writer or older ones: a newer writer's stay.
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

  /// Whether this writer may remove `generation`: its own, or an older writer's.
  [[nodiscard]] bool may_remove(save_generation const& generation) const {
    return generation.since < since_ || (generation.since == since_ && generation.writer == writer_);
  }

  /// Removes the save in `folder` (a generation, or a save with rename), marker first.
  CAIRN_DECL void remove_folder(std::filesystem::path const& folder);

  /// On a store: removes what is directly in the save folder `dir` beside its generations (the
  /// files of a save written before generations), marker first; its generations stay.
  CAIRN_DECL void remove_flat_files(std::filesystem::path const& dir);

  std::filesystem::path root_;
  io::storage_location storage_;
  std::int64_t since_ = 0;
  std::string writer_;
  std::int64_t begun_ = 0;                               ///< saves begun by this writer
  std::map<std::int64_t, std::filesystem::path> staged_; ///< where each save begun is written
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
/// under an experiment's `checkpoints/` or `export/`, a generation of one, or any directory
/// holding a completion marker, wherever it lies: a save copied elsewhere is one: `.is_save`)
/// and, when it is, why it is not complete and sound (`.problem`). A save named by an iteration
/// (or a generation of one) must record that iteration; one under another name, its own.
CAIRN_DECL detail::save_completeness save_status(std::filesystem::path const& path);

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/directory.ipp>
#endif
