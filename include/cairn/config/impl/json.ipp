// Definitions of <cairn/config/json.hpp>: inline in a header-only build, compiled once by
// <cairn/config/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/config/json.hpp>

#include <boost/json/stream_parser.hpp>
#include <boost/json/value.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

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
  apply_overrides(ops, document, overrides, ctx);
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
  auto document = read_json_file(file);
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

CAIRN_DECL boost::json::value parse_json(std::string_view text, std::string_view source) {
  boost::json::stream_parser parser;
  boost::system::error_code ec;
  auto consumed = parser.write_some(text.data(), text.size(), ec);
  if (!ec && consumed == text.size()) parser.finish(ec);
  if (!ec && consumed < text.size()) {
    auto extra = text.find_first_not_of(" \t\r\n", consumed);
    if (extra != std::string_view::npos)
      throw config_error(
          {{std::string(source), "unexpected text after the JSON value at " + detail::line_and_column(text, extra)}});
  }
  if (ec)
    throw config_error(
        {{std::string(source), "invalid JSON at " + detail::line_and_column(text, consumed) + ": " + ec.message()}});
  return parser.release();
}

CAIRN_DECL boost::json::value read_json_file(std::string const& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw config_error({{file, std::string("cannot open: ") + std::strerror(errno)}});
  std::ostringstream text;
  text << in.rdbuf();
  return parse_json(text.str(), file);
}

} // namespace cairn
