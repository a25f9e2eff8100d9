#pragma once

// Where cairn's bytes go: one interface below the reads, writes, listings, deletes and the
// exclusive create that saves, loads and the tool do, with a backend chosen from the path alone.
// A path `s3://bucket/key` is an object in S3 or an S3-compatible store (<cairn/io/s3.hpp>);
// anything else is a POSIX path. What a backend guarantees is data (`backend_guarantees`) that
// the commit code asks for, never an `if` on its name. No libtorch, no libcurl here.

#include <cairn/detail/decl.hpp>
#include <cairn/io/error.hpp> // what its functions throw

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cairn::io {

/// What a backend guarantees of the operations a commit rests on.
struct backend_guarantees {
  /// A file or directory is renamed in one step that a crash cannot split (POSIX rename); a
  /// store without it commits by writing its marker last.
  bool atomic_rename = false;
  /// `create_exclusive` fails for the second of two writers, even at the same instant (O_EXCL
  /// and link on POSIX, `If-None-Match: *` on a store that honours it).
  bool conditional_create = false;
  /// What is written is listed by the next listing (POSIX; S3 since 2020).
  bool list_after_write = false;
  /// Names are directories: a key's parents exist as entries of their own (POSIX).
  bool directories = false;
  /// Several processes can write one file together, each at offsets of its own (POSIX).
  bool shared_writes = false;
};

/// One entry of a listing: a name under the listed prefix (no '/'), its size, and whether it is
/// a directory (POSIX) or a common prefix of keys (an object store).
struct listed_entry {
  std::string name;
  std::uint64_t size = 0;
  bool directory = false;
  bool link = false; ///< a symbolic link (POSIX), listed as neither file nor directory
};

/// A new object written front to back; nothing is visible under its name until `commit`, and
/// an object destroyed uncommitted leaves nothing (its multipart upload aborted where the store
/// allows it).
class object_writer {
public:
  virtual ~object_writer() = default;
  /// Appends `bytes`. May block while earlier bytes are sent (the memory held is bounded).
  virtual void write(std::span<std::byte const> bytes) = 0;
  /// Writes `bytes` at `offset`: at the end (`size()`), as `write`, or over bytes already written
  /// within the first `held` the writer was opened with (an object store keeps those until the
  /// commit); anything else is an io_error on a backend that writes front to back.
  virtual void write_at(std::span<std::byte const> bytes, std::uint64_t offset) = 0;
  /// Makes the whole object durable under its name; throws when it could not be.
  virtual void commit() = 0;
  /// Bytes written so far.
  [[nodiscard]] virtual std::uint64_t size() const noexcept = 0;
};

/// The operations cairn needs of a place that holds files. Keys are paths (POSIX) or object
/// keys (`a/b/c`, no leading '/'); every error is an io_error naming `describe(key)`.
class storage_backend {
public:
  virtual ~storage_backend() = default;

  /// The key as the user would write it: the path, or `s3://bucket/key`.
  [[nodiscard]] virtual std::string describe(std::string_view key) const = 0;
  [[nodiscard]] virtual backend_guarantees guarantees() const = 0;

  /// The size of the file or object `key`, nothing when there is none (any other failure
  /// throws: an unreachable store is never "no file").
  [[nodiscard]] virtual std::optional<std::uint64_t> size(std::string_view key) = 0;
  /// Reads exactly `out.size()` bytes at `offset` (fewer is an io_error).
  virtual void read(std::string_view key, std::uint64_t offset, std::span<std::byte> out) = 0;
  /// The whole file, refused when larger than `limit` bytes.
  [[nodiscard]] virtual std::string read_all(std::string_view key, std::uint64_t limit) = 0;
  /// Reads `key` front to back, handing each piece to `consume`, which returns false to stop:
  /// one piece held at a time (what a parser of a large file wants). Refused before a byte is
  /// read when larger than `limit` bytes; a missing file is an io_error of kind
  /// no_such_file_or_directory. By default, ranged reads of 8 MiB.
  CAIRN_DECL virtual void read_pieces(std::string_view key, std::uint64_t limit,
                                      std::function<bool(std::string_view)> const& consume);

  /// Writes a whole small file durably and atomically, replacing one of that name. On POSIX its
  /// directory must exist (a directory removed under a writer is never made again).
  virtual void write(std::string_view key, std::span<std::byte const> bytes) = 0;
  /// Creates `key` holding `bytes` only when nothing has that name: false when something does.
  /// Where `guarantees().conditional_create` is false, a second writer at the same instant may
  /// win too (the caller checks what it reads back).
  [[nodiscard]] virtual bool create_exclusive(std::string_view key, std::span<std::byte const> bytes) = 0;
  /// A new file or object `key`, written front to back, its first `held` bytes rewritable until
  /// the commit (`object_writer::write_at`).
  [[nodiscard]] virtual std::unique_ptr<object_writer> open_writer(std::string_view key, std::uint64_t held = 0) = 0;

  /// The entries directly under `prefix` (a directory, or keys `prefix/…`), sorted by name. A
  /// prefix with nothing under it is empty; a listing that fails throws, never "nothing there".
  [[nodiscard]] virtual std::vector<listed_entry> list(std::string_view prefix) = 0;
  /// Every file under `prefix`, at any depth, named by its path below it (`a/b/c`), where the
  /// backend lists them in bulk (an object store: one request per 1,000 keys); nothing where
  /// walking every directory would cost more than asking for what is wanted (POSIX).
  [[nodiscard]] virtual std::optional<std::vector<listed_entry>> list_all(std::string_view prefix) {
    (void)prefix;
    return std::nullopt;
  }
  /// Removes the file or object `key`; nothing there is not an error.
  virtual void remove(std::string_view key) = 0;
  /// Removes everything under `prefix`; nothing there is not an error.
  virtual void remove_tree(std::string_view prefix) = 0;

  /// Bytes that can still be written under `key`: a filesystem's free space, nothing for a
  /// store without a known bound.
  [[nodiscard]] virtual std::optional<std::uint64_t> available(std::string_view key) {
    (void)key;
    return std::nullopt;
  }

  /// Ends what writers killed midway left under `prefix` that no listing shows (an object
  /// store's multipart uploads never completed), returning what it ended; nothing on POSIX,
  /// whose temporary files are listed like any other.
  virtual std::vector<std::string> end_unfinished(std::string_view prefix) {
    (void)prefix;
    return {};
  }
};

/// A backend and a key in it: what a path names.
struct storage_location {
  std::shared_ptr<storage_backend> backend;
  std::string key;

  [[nodiscard]] std::string describe() const { return backend->describe(key); }
  /// The location of `name` under this one.
  [[nodiscard]] CAIRN_DECL storage_location operator/(std::string_view name) const;
};

/// Whether `path` names an object in an object store (`s3://…`) rather than a POSIX path.
[[nodiscard]] CAIRN_DECL bool is_object_store_path(std::string_view path) noexcept;

/// The backend of `path` and its key there: `s3://bucket/key` (an io_error when this build has
/// no S3 support, or when the bucket is missing), else a POSIX path.
[[nodiscard]] CAIRN_DECL storage_location open_location(std::string_view path);

/// Writes the whole file or object `path` durably and atomically, through its backend.
CAIRN_DECL void write_stored(std::string_view path, std::span<std::byte const> bytes);

/// Makes the directory `path` and its parents on POSIX; nothing on an object store, whose keys
/// need no parents.
CAIRN_DECL void make_folder(std::string_view path);

/// The POSIX backend: today's durable file calls (fsync of each file and of its directory,
/// rename into place, O_EXCL), one instance for the process.
[[nodiscard]] CAIRN_DECL std::shared_ptr<storage_backend> posix_backend();

} // namespace cairn::io

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/io/impl/backend.ipp>
#endif
