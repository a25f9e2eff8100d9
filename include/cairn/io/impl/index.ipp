// Definitions of <cairn/io/index.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/detail/json_feed.hpp>
#include <cairn/detail/read_file.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/error.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/index.hpp>

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace cairn::io {

CAIRN_DECL std::vector<std::string> safetensors_index::files() const {
  std::set<std::string> names;
  for (auto const& [tensor, file] : weight_map) names.insert(file);
  return {names.begin(), names.end()};
}

CAIRN_DECL bool stays_inside(std::string const& name) {
  if (name.empty()) return false;
  std::filesystem::path path(name);
  if (path.is_absolute() || path.has_root_name() || path.has_root_directory()) return false;
  for (auto const& part : path)
    if (part == "..") return false;
  return true;
}

CAIRN_DECL safetensors_index read_index(std::filesystem::path const& path, std::size_t limit) {
  // Parsed as it is read, piece by piece, within json_limits: a file that is not JSON is read only
  // up to its first bad byte, and none is held whole.
  cairn::detail::json_feed feed;
  auto where = open_location(path.string());
  where.backend->read_pieces(where.key, limit, [&](std::string_view piece) { return feed.feed(piece); });
  if (!feed.finish()) {
    if (feed.problem.starts_with("duplicate key")) throw io_error(path, feed.problem);
    throw io_error(path, "not valid JSON: " + (feed.problem.empty() ? feed.error.message() : feed.problem));
  }
  auto document = feed.release();
  if (!document.is_object()) throw io_error(path, "an index must be a JSON object");
  safetensors_index index;
  auto const& object = document.get_object();
  if (auto const* metadata = object.if_contains("metadata")) {
    if (!metadata->is_object()) throw io_error(path, "metadata must be an object");
    index.metadata = metadata->get_object();
  }
  auto const* map = object.if_contains("weight_map");
  if (!map || !map->is_object()) throw io_error(path, "weight_map must be an object");
  for (auto const& entry : map->get_object()) {
    if (!entry.value().is_string())
      throw io_error(path, "weight_map entry '" + std::string(entry.key()) + "' must name a file");
    std::string file(entry.value().get_string());
    if (!stays_inside(file))
      throw io_error(path, "weight_map entry '" + std::string(entry.key()) + "' names '" + file +
                               "', which is outside the checkpoint directory");
    index.weight_map.emplace(entry.key(), std::move(file));
  }
  return index;
}

CAIRN_DECL std::string index_text(safetensors_index const& index) {
  boost::json::object map;
  for (auto const& [tensor, file] : index.weight_map) map[tensor] = file;
  boost::json::object document{{"metadata", index.metadata}, {"weight_map", std::move(map)}};
  auto text = boost::json::serialize(document);
  text += '\n';
  return text;
}

CAIRN_DECL void write_index(std::filesystem::path const& path, safetensors_index const& index) {
  auto text = index_text(index);
  write_stored(path.string(), std::as_bytes(std::span(text)));
}

} // namespace cairn::io
