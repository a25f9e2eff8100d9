// Definitions of <cairn/config/json.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/config/json.hpp>
#include <cairn/detail/json_feed.hpp>
#include <cairn/detail/read_file.hpp>

#include <boost/json/stream_parser.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace cairn::detail {

CAIRN_DECL boost::json::object write_changes(config_ops const& ops, void const* config, void const* defaults) {
  boost::json::object out;
  for (auto const& f : ops.fields) {
    if (f.type->config) {
      auto nested = write_changes(f.type->config(), f.member(config), f.member(defaults));
      if (!nested.empty()) out[f.name] = std::move(nested);
    } else {
      auto value = write_value(*f.type, f.member(config));
      if (value != write_value(*f.type, f.member(defaults))) out[f.name] = std::move(value);
    }
  }
  return out;
}

CAIRN_DECL void build_config(config_ops const& ops, boost::json::value& document,
                             std::span<std::string const> overrides, void* config) {
  read_context ctx;
  apply_config_legacy(ops, document, ctx);
  for (auto const& text : overrides) {
    // Each override is read into a document of its own and brought up to date there (an old key
    // renamed, with its deprecation), then set: an old key overrides the new one a file holds.
    boost::json::value single = boost::json::object();
    apply_overrides(ops, single, std::span(&text, 1), ctx);
    apply_config_legacy(ops, single, ctx);
    auto equals = text.find('=');
    if (equals == std::string::npos) continue; // reported
    std::vector<std::string> path;
    boost::json::value* at = &single;
    for (auto depth = split_key(std::string_view(text).substr(0, equals)).size(); depth > 0; --depth) {
      if (!at->is_object() || at->get_object().size() != 1) break; // a legacy rule refused it: reported
      auto& entry = *at->get_object().begin();
      path.emplace_back(entry.key());
      at = &entry.value();
    }
    if (path.size() != split_key(std::string_view(text).substr(0, equals)).size()) continue;
    std::vector<std::string_view> key(path.begin(), path.end());
    set_at(document, key, std::move(*at));
  }
  read_config(ops, document, config, ctx);
  finish_validation(ops, config, std::move(ctx.errors()));
}

CAIRN_DECL void build_from_text(config_ops const& ops, std::string_view text, std::span<std::string const> overrides,
                                void* config) {
  auto document = parse_json(text);
  build_config(ops, document, overrides, config);
}

CAIRN_DECL void build_from_file(config_ops const& ops, std::string const& file, std::span<std::string const> overrides,
                                void* config) {
  auto document = read_config_file(file, max_config_file_size);
  build_config(ops, document, overrides, config);
}

CAIRN_DECL void build_from_config(config_ops const& ops, void const* from, std::span<std::string const> overrides,
                                  void* config) {
  auto document = write_config(ops, from);
  build_config(ops, document, overrides, config);
}

CAIRN_DECL void parse_config(config_ops const& ops, boost::json::value const& document, void* config,
                             read_context& ctx) {
  read_config(ops, document, config, ctx);
  if (!ctx.errors().empty()) throw config_error(ctx.errors());
}

CAIRN_DECL boost::json::value config_to_json(config_ops const& ops, void const* config, output which) {
  if (which == output::changed) return write_changes(ops, config, ops.defaults());
  return write_config(ops, config);
}

CAIRN_DECL std::string config_to_string(config_ops const& ops, void const* config, output which) {
  return pretty(config_to_json(ops, config, which));
}

CAIRN_DECL std::string line_and_column(std::string_view text, std::size_t offset) {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

} // namespace cairn::detail

namespace cairn {

CAIRN_DECL boost::json::value detail::finish_json(json_feed& feed, std::string_view source) {
  if (feed.finish()) return feed.release();
  if (!feed.problem.empty()) throw config_error({{std::string(source), feed.problem}});
  throw config_error({{std::string(source), "invalid JSON at " + feed.where() + ": " + feed.error.message()}});
}

CAIRN_DECL boost::json::value parse_json(std::string_view text, std::string_view source) {
  detail::json_feed feed;
  feed.feed(text);
  return detail::finish_json(feed, source);
}

CAIRN_DECL std::string detail::read_config_text(std::string const& file, std::size_t limit) {
  std::string text;
  if (auto problem = detail::read_regular_file(file, limit, text); !problem.empty())
    throw config_error({{file, problem.text}});
  return text;
}

CAIRN_DECL boost::json::value read_json_file(std::string const& file, std::size_t limit) {
  // Parsed as it is read, never held whole: a file that is not JSON is read only up to its first
  // bad byte, and one whose strings or size would cost more than json_limits is refused there.
  detail::json_feed feed;
  if (auto problem =
          detail::read_regular_file_pieces(file, limit, [&](std::string_view piece) { return feed.feed(piece); });
      !problem.empty())
    throw config_error({{file, problem.text}});
  return detail::finish_json(feed, file);
}

namespace detail {

struct config_file_formats {
  std::mutex mutex;
  std::vector<config_file_format> formats;
};

inline config_file_formats& file_formats() {
  static config_file_formats registry;
  return registry;
}

inline std::string extension_of(std::string const& file) {
  auto slash = file.find_last_of('/');
  auto dot = file.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return {};
  std::string extension = file.substr(dot);
  for (auto& c : extension) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return extension;
}

} // namespace detail

CAIRN_DECL bool register_config_file_format(config_file_format format) {
  auto& registry = detail::file_formats();
  std::lock_guard lock(registry.mutex);
  std::erase_if(registry.formats, [&](auto const& f) { return f.name == format.name; });
  registry.formats.push_back(std::move(format));
  return true;
}

CAIRN_DECL std::optional<config_file_format> find_config_file_format(std::string_view name) {
  auto& registry = detail::file_formats();
  std::lock_guard lock(registry.mutex);
  for (auto const& f : registry.formats)
    if (f.name == name) return f;
  return std::nullopt;
}

CAIRN_DECL std::optional<config_file_format> config_file_format_of(std::string const& file) {
  auto extension = detail::extension_of(file);
  auto& registry = detail::file_formats();
  std::lock_guard lock(registry.mutex);
  for (auto const& f : registry.formats)
    if (std::find(f.extensions.begin(), f.extensions.end(), extension) != f.extensions.end()) return f;
  return std::nullopt;
}

CAIRN_DECL boost::json::value read_config_file(std::string const& file, std::size_t limit) {
  if (auto format = config_file_format_of(file)) return format->read(file, limit);
  auto extension = detail::extension_of(file);
  if (extension == ".yaml" || extension == ".yml")
    throw config_error({{file, "a YAML file, and this program does not read YAML (it needs yaml-cpp and a call "
                               "to cairn::enable_yaml() from <cairn/config/yaml.hpp>); give the config as JSON"}});
  return read_json_file(file, limit);
}

} // namespace cairn
