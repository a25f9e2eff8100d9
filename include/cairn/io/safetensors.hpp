#pragma once

#include <cairn/detail/decl.hpp>
#include <cairn/io/dtype.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/slice.hpp>

#include <boost/json/value.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
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

/// A safetensors file, mapped read-only: tensors are spans over the mapping, never copied.
class safetensors_file {
public:
  explicit safetensors_file(std::filesystem::path path)
      : file_(std::move(path)), header_(parse_header(file_.bytes(), file_.path())) {}

  [[nodiscard]] std::filesystem::path const& path() const noexcept { return file_.path(); }
  [[nodiscard]] std::vector<tensor_info> const& tensors() const noexcept { return header_.tensors; }
  [[nodiscard]] std::map<std::string, std::string> const& metadata() const noexcept { return header_.metadata; }
  [[nodiscard]] tensor_info const* find(std::string_view name) const noexcept { return header_.find(name); }
  /// Bytes before the data: the header's length and its JSON.
  [[nodiscard]] std::uint64_t header_size() const noexcept { return header_.data_offset; }

  /// The tensor named `name`; an io_error naming the file when there is none.
  [[nodiscard]] CAIRN_DECL tensor_info const& at(std::string_view name) const;

  /// The tensor's bytes, in the mapping.
  [[nodiscard]] CAIRN_DECL std::span<std::byte const> bytes(tensor_info const& t) const noexcept;

  /// Reads `out.size()` bytes of the tensor from `offset` (in bytes) with pread, straight into
  /// `out`: the fastest way to copy a large tensor out whole.
  CAIRN_DECL void read_into(tensor_info const& t, std::uint64_t offset, std::span<std::byte> out) const;

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
  mapped_file file_;
  safetensors_header header_;
};

} // namespace cairn::io

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/io/impl/safetensors.ipp>
#endif
