#pragma once

#include <cairn/detail/decl.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/dtype.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/slice.hpp>

#include <boost/json/value.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn::io {

/// Headers larger than this (100,000,000 bytes, the limit of Hugging Face's own safetensors) are
/// refused by the reader and never written: no real file has one, a forged length must not make
/// a reader allocate or scan gigabytes, and a file cairn writes must load everywhere.
inline constexpr std::uint64_t max_header_size = 100'000'000;

/// The `__metadata__` key under which a tensor's XXH3 checksum is stored.
inline constexpr std::string_view checksum_key_prefix = "cairn.xxh3:";
inline std::string checksum_key(std::string_view tensor) {
  return std::string(checksum_key_prefix) + std::string(tensor);
}
/// Whether a `__metadata__` key is one of the checksums cairn records.
inline bool is_checksum_key(std::string_view key) noexcept { return key.starts_with(checksum_key_prefix); }

/// One tensor of a safetensors file.
struct tensor_info {
  std::string name;
  io::dtype dtype = io::dtype::F32;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0; ///< offset of its bytes in the data section
  std::uint64_t end = 0;

  [[nodiscard]] CAIRN_DECL std::uint64_t numel() const noexcept;
  [[nodiscard]] std::uint64_t byte_size() const noexcept { return end - begin; }
};

/// A safetensors header, parsed from untrusted bytes and checked against the file's size.
struct safetensors_header {
  std::vector<tensor_info> tensors; ///< in the order of their bytes
  std::map<std::string, std::string> metadata;
  std::uint64_t data_offset = 0;      ///< where the data section starts in the file
  std::vector<std::uint32_t> by_name; ///< indices of `tensors` in name order, for `find`

  /// The tensor named `name`, or null: a binary search (a file may hold thousands).
  [[nodiscard]] CAIRN_DECL tensor_info const* find(std::string_view name) const noexcept;
};

namespace detail {

CAIRN_DECL std::uint64_t read_le64(std::span<std::byte const> bytes) noexcept;

CAIRN_DECL std::uint64_t header_number(boost::json::value const& v, std::filesystem::path const& source,
                                       std::string const& what);

CAIRN_DECL tensor_info parse_tensor_entry(std::string name, boost::json::value const& entry,
                                          std::filesystem::path const& source);

} // namespace detail

/// Parses and checks the header of a safetensors file held in `file` (the whole file, or at
/// least its first 8 + header-length bytes when `file_size` is given). Every inconsistency is an
/// io_error naming `source` and the tensor: a header length beyond the file or beyond
/// `max_header_size`, invalid JSON, a key given twice in any object (two tensors of one name, a
/// tensor's "dtype" twice), unknown dtypes, dimensions of 2^63 or more, shapes whose size
/// overflows, offsets out of range, overlapping or out of order, bytes no tensor covers, byte
/// counts that do not match.
CAIRN_DECL safetensors_header parse_header(std::span<std::byte const> file, std::filesystem::path const& source);

/// The same, of a file of `file_size` bytes of which `file` holds the first (at least its length
/// and header): a header read from an object without the rest.
CAIRN_DECL safetensors_header parse_header(std::span<std::byte const> file, std::uint64_t file_size,
                                           std::filesystem::path const& source);

/// A safetensors file, mapped read-only: tensors are spans over the mapping, never copied. An
/// object (`s3://…`) is read through its storage backend instead: its header with two ranged
/// reads, each tensor with ranged reads of exactly its bytes when it is first asked for.
class safetensors_file {
public:
  CAIRN_DECL explicit safetensors_file(std::filesystem::path path);
  safetensors_file(safetensors_file const&) = delete;
  safetensors_file& operator=(safetensors_file const&) = delete;

  [[nodiscard]] std::filesystem::path const& path() const noexcept { return path_; }
  /// Whether it is an object read through a storage backend rather than a mapped file.
  [[nodiscard]] bool remote() const noexcept { return !file_; }
  [[nodiscard]] std::vector<tensor_info> const& tensors() const noexcept { return header_.tensors; }
  [[nodiscard]] std::map<std::string, std::string> const& metadata() const noexcept { return header_.metadata; }
  [[nodiscard]] tensor_info const* find(std::string_view name) const noexcept { return header_.find(name); }
  /// Bytes before the data: the header's length and its JSON.
  [[nodiscard]] std::uint64_t header_size() const noexcept { return header_.data_offset; }

  /// The tensor named `name`; an io_error naming the file when there is none.
  [[nodiscard]] CAIRN_DECL tensor_info const& at(std::string_view name) const;

  /// The tensor's bytes, in the mapping (of an object: read when first asked for, kept while the
  /// file is open; an io_error when they cannot be read).
  [[nodiscard]] CAIRN_DECL std::span<std::byte const> bytes(tensor_info const& t) const;

  /// Lets go of an object's tensor read by `bytes` (spans it gave are then invalid): a reader
  /// that goes through a file once (a conversion) holds one tensor at a time, not the file.
  /// Nothing for a mapped file.
  CAIRN_DECL void release(tensor_info const& t) const noexcept;

  /// Reads `out.size()` bytes of the tensor from `offset` (in bytes) with pread, straight into
  /// `out`: the fastest way to copy a large tensor out whole.
  CAIRN_DECL void read_into(tensor_info const& t, std::uint64_t offset, std::span<std::byte> out) const;

  /// For an object read front to back (a load reading its own file whole): each read that misses
  /// reads `bytes` from where it starts (within the file), so that many small tensors cost few
  /// requests. Nothing for a mapped file.
  void read_ahead(std::uint64_t bytes) noexcept { read_ahead_ = bytes; }

  /// Whether the file records checksums (every file cairn writes does).
  [[nodiscard]] CAIRN_DECL bool has_checksums() const;

  /// Checks the tensor's bytes against its recorded checksum; an io_error naming the file and
  /// the tensor when it is missing or differs.
  CAIRN_DECL void verify(tensor_info const& t) const;

  void verify() const {
    for (auto const& t : tensors()) verify(t);
  }

  /// Copies a box of the tensor into `target` (dense, row-major), for resharding.
  CAIRN_DECL void read_box(tensor_info const& t, box const& region, std::span<std::byte> target) const;

private:
  /// Reads `out.size()` bytes of the object at `offset`, through the window read ahead when set.
  CAIRN_DECL void fetch(std::uint64_t offset, std::span<std::byte> out) const;

  std::filesystem::path path_;
  std::optional<mapped_file> file_; // a file's mapping; none for an object
  storage_location remote_;         // an object's
  std::uint64_t size_ = 0;
  safetensors_header header_;
  std::uint64_t read_ahead_ = 0;
  mutable std::uint64_t window_begin_ = 0;
  mutable std::vector<std::byte> window_; // read ahead, from window_begin_
  mutable std::mutex fetched_mutex_;
  // An object's tensors read, by their byte range (an empty tensor shares its start with the next).
  mutable std::map<std::pair<std::uint64_t, std::uint64_t>, std::unique_ptr<std::vector<std::byte>>> fetched_;
};

} // namespace cairn::io

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/io/impl/safetensors.ipp>
#endif
