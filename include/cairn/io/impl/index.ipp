// Definitions of <cairn/io/index.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/detail/json_feed.hpp>
#include <cairn/detail/json_keys.hpp>
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
  // Parsed as it is read: a file that is not JSON is read only up to its first bad byte.
  cairn::detail::json_feed feed;
  std::string text;
  if (is_object_store_path(path.string())) {
    auto where = open_location(path.string());
    text = where.backend->read_all(where.key, limit);
    feed.feed(text);
  } else if (auto problem = cairn::detail::read_regular_file(path, limit, text,
                                                             [&](std::string_view piece) { return feed.feed(piece); });
             !problem.empty()) {
    throw io_error(path, problem.kind, problem.text);
  }
  if (!feed.finish() || (feed.ended && text.find_first_not_of(" \t\r\n", feed.consumed) != std::string::npos))
    throw io_error(path,
                   "not valid JSON: " + (feed.error ? feed.error.message() : std::string("text after the value")));
  auto document = feed.parser.release();
  if (auto duplicate = cairn::detail::duplicate_key(text)) throw io_error(path, "duplicate key '" + *duplicate + "'");
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
