#pragma once

#include <cairn/detail/decl.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/dtype.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/safetensors.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace cairn::io {

class checksum;

/// Whether a writer records a checksum of every tensor in `__metadata__`.
enum class checksums { record, skip };

/// Writes one safetensors file. Tensors are added first (their sizes fix the header), then
/// `write()` streams the header and their bytes, in the order they were added, to a temporary
/// file that is fsynced and renamed into place: a crash never leaves a partial file under the
/// final name. The header is padded with spaces so that the data starts at a multiple of
/// `data_alignment` bytes (the format asks for 8): a tensor whose size is a multiple of 64 bytes
/// then lies in the file as it lies in memory, cache-line aligned, and reads and writes of it copy
/// at memory speed (a copy between buffers 8 bytes out of line runs at a third of it). To hold
/// one tensor at a time instead, `declare` them all, `open`, `put` each in turn, `commit`.
///
/// Several processes can write one file together: each declares the same tensors and metadata,
/// one `open_shared`s it and the others `join_shared` it (one token naming its temporary), each
/// `put_part`s its elements of the tensors declared shared, the joiners `release`, and once they
/// all have, the opener `put`s the rest and `commit`s, checksumming the shared tensors from the
/// file. Nothing appears under the final name before that commit.
///
///     io::safetensors_writer writer("model.safetensors");
///     writer.add("w", io::dtype::F32, {4, 4}, std::as_bytes(std::span(data)));
///     writer.write();
class safetensors_writer {
public:
  /// Where the data starts: a cache line.
  static constexpr std::size_t data_alignment = 64;

  explicit safetensors_writer(std::filesystem::path path, checksums policy = checksums::record)
      : path_(std::move(path)), policy_(policy) {}

  /// Adds a tensor whose `bytes` (of `source_type`) stay valid until `write()`; it is stored as
  /// `stored_type` (converted on the way out) or as it is.
  CAIRN_DECL void add(std::string name, dtype source_type, std::vector<std::uint64_t> shape,
                      std::span<std::byte const> bytes, std::optional<dtype> stored_type = std::nullopt);

  /// Declares a tensor whose bytes come later, through `put` after `open` (streaming: one
  /// tensor in memory at a time). Its name, type and shape fix the header.
  CAIRN_DECL void declare(std::string name, dtype source_type, std::vector<std::uint64_t> shape,
                          std::optional<dtype> stored_type = std::nullopt);

  /// Declares a tensor several writers of a shared file write in parts (`put_part`).
  CAIRN_DECL void declare_shared(std::string name, dtype source_type, std::vector<std::uint64_t> shape,
                                 std::optional<dtype> stored_type = std::nullopt);

  /// A string in `__metadata__`.
  void set_metadata(std::string key, std::string value) { metadata_[std::move(key)] = std::move(value); }

  /// Bytes the file will take.
  [[nodiscard]] std::uint64_t file_size() const { return 8 + header_text().size() + data_size(); }

  /// Writes and commits the file of the tensors added. Throws io_error naming the file on any
  /// failure, leaving nothing under the final name.
  CAIRN_DECL void write();

  /// Starts the file (a temporary one until `commit`) with its header; after it, `put` each
  /// declared tensor in the order declared. A header larger than `max_header_size` (readers
  /// refuse it) is an io_error before anything is written.
  CAIRN_DECL void open();

  /// Writes the bytes (of its source type) of declared tensor `name`, the next one in order
  /// (the shared tensors are skipped in that order).
  CAIRN_DECL void put(std::string const& name, std::span<std::byte const> bytes);

  /// `open`, under a temporary name made of `token` (letters, digits, '-' and '_'), for other
  /// writers to `join_shared`. The file has its whole size from the start.
  CAIRN_DECL void open_shared(std::string const& token);

  /// Opens, to `put_part` into it, the file another writer has `open_shared(token)`; its
  /// declarations and metadata must be the opener's. `release` when done; never `commit`.
  CAIRN_DECL void join_shared(std::string const& token);

  /// Writes `bytes` (of its source type) as the elements from `first` of shared tensor `name`.
  CAIRN_DECL void put_part(std::string const& name, std::uint64_t first, std::span<std::byte const> bytes);

  /// A joined writer's end: what it wrote is durable (fsynced) and the file closed.
  CAIRN_DECL void release();

  /// Completes the file: every declared tensor must have been written (the shared ones by every
  /// writer, which the caller knows and the file cannot).
  CAIRN_DECL void commit();

private:
  struct entry {
    std::string name;
    dtype source_type;
    dtype stored_type;
    std::vector<std::uint64_t> shape;
    std::span<std::byte const> bytes; ///< given to add(); empty when declared
    std::uint64_t numel;
    std::uint64_t stored_size;
    std::uint64_t begin;
    std::optional<std::uint64_t> checksum{};
    bool shared = false;
  };

  [[nodiscard]] CAIRN_DECL std::uint64_t data_size() const;

  [[nodiscard]] CAIRN_DECL std::string header_text() const;

  CAIRN_DECL void check_size(entry const& e, std::span<std::byte const> bytes) const;

  /// Lays the tensors out: the placeholder header (checksums not known yet), which fixes where
  /// the data starts.
  CAIRN_DECL std::string lay_out();

  /// Writes the length and the placeholder header at the start of the file.
  CAIRN_DECL void write_prefix(std::string const& placeholder);

  /// Lays the tensors out and opens `file`, the header written; nothing when joining (`file` null).
  CAIRN_DECL void start(std::unique_ptr<atomic_file> file);

  CAIRN_DECL entry& shared_entry(std::string const& name);

  /// Writes `bytes` (source type) at `offset` of the file, converted; their checksum into `hash`.
  CAIRN_DECL void write_converted(entry const& e, std::span<std::byte const> bytes, std::uint64_t offset,
                                  checksum* hash);

  CAIRN_DECL void write_tensor(entry& e, std::span<std::byte const> bytes);

  CAIRN_DECL void hash_shared();

  void write_at(std::span<std::byte const> bytes, std::uint64_t offset) {
    if (stream_)
      stream_->write_at(bytes, offset);
    else
      pwrite_all(file_ ? file_->fd() : joined_.get(), bytes, offset, path_);
  }

  std::filesystem::path path_;
  checksums policy_;
  std::vector<entry> entries_;
  std::map<std::string, std::size_t, std::less<>> index_; // of entries_, to refuse a name given twice
  std::map<std::string, std::string> metadata_;
  std::unique_ptr<object_writer> stream_; // `open`'s file or object, through its storage backend
  std::unique_ptr<atomic_file> file_;     // `open_shared`'s (POSIX only); a pointer: the writer stays movable
  unique_fd joined_;                      // a joiner's: the opener's temporary file
  std::uint64_t data_start_ = 0;
  std::size_t next_ = 0;
  std::vector<std::byte> buffer_;
};

} // namespace cairn::io

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/io/impl/safetensors_writer.ipp>
#endif
