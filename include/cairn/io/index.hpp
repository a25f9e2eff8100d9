#pragma once

#include <cairn/detail/decl.hpp>
#include <cairn/io/error.hpp> // what its functions throw

#include <boost/json/object.hpp>

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

/// Reads an index file. A file name that escapes the index's directory, a tensor mapped to
/// something other than a string, or a malformed document is an io_error naming the file.
CAIRN_DECL safetensors_index read_index(std::filesystem::path const& path);

/// Writes an index file durably and atomically.
CAIRN_DECL void write_index(std::filesystem::path const& path, safetensors_index const& index);

} // namespace cairn::io

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/io/impl/index.ipp>
#endif
