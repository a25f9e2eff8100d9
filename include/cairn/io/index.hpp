#pragma once

#include <cairn/detail/decl.hpp>
#include <cairn/io/error.hpp> // what its functions throw

#include <boost/json/object.hpp>

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace cairn::io {

/// A sharded checkpoint's index (`*.safetensors.index.json`): free-form `metadata` and the file
/// holding each tensor.
struct safetensors_index {
  boost::json::object metadata;
  std::map<std::string, std::string> weight_map;

  /// The distinct files, sorted.
  [[nodiscard]] CAIRN_DECL std::vector<std::string> files() const;
};

/// Whether `name` stays inside the directory it is relative to: not absolute, not empty, and
/// with no `..` component.
CAIRN_DECL bool stays_inside(std::string const& name);

/// The largest index file `read_index` reads by default (1 GiB: a state_dict index holds the
/// checkpoint's metadata; Hugging Face's are a few MiB).
inline constexpr std::size_t max_index_size = std::size_t{1} << 30;

/// Reads an index file of at most `limit` bytes. A file name that escapes the index's
/// directory, a tensor mapped to something other than a string, a key given twice, a larger
/// file, something other than a regular file or a malformed document is an io_error naming the
/// file.
CAIRN_DECL safetensors_index read_index(std::filesystem::path const& path, std::size_t limit = max_index_size);

/// The text of an index file: `metadata` and `weight_map`, one line, newline-terminated.
[[nodiscard]] CAIRN_DECL std::string index_text(safetensors_index const& index);

/// Writes an index file durably and atomically.
CAIRN_DECL void write_index(std::filesystem::path const& path, safetensors_index const& index);

} // namespace cairn::io

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/io/impl/index.ipp>
#endif
