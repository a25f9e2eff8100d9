// Definitions of <cairn/config/override.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/config/override.hpp>

#include <boost/json/parse.hpp>

namespace cairn::detail {

CAIRN_DECL std::vector<std::string_view> split_key(std::string_view key) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    auto dot = key.find('.', start);
    parts.push_back(key.substr(start, dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

CAIRN_DECL bool parse_json_value(std::string_view text, boost::json::value& out) {
  boost::system::error_code ec;
  out = boost::json::parse(boost::json::string_view(text.data(), text.size()), ec);
  return !ec;
}

CAIRN_DECL void set_at(boost::json::value& document, std::span<std::string_view const> key, boost::json::value value) {
  boost::json::value* at = &document;
  for (auto part : key) {
    if (!at->is_object()) *at = boost::json::object();
    at = &at->get_object()[boost::json::string_view(part.data(), part.size())];
  }
  *at = std::move(value);
}

CAIRN_DECL void apply_overrides(config_ops const& ops, boost::json::value& document,
                                std::span<std::string const> overrides, read_context& ctx) {
  for (auto const& text : overrides) {
    auto equals = text.find('=');
    if (equals == std::string::npos || equals == 0) {
      ctx.error("override '" + text + "' must look like key.path=value");
      continue;
    }
    std::string_view key = std::string_view(text).substr(0, equals);
    std::string_view raw = std::string_view(text).substr(equals + 1);
    auto path = detail::split_key(key);
    if (std::find(path.begin(), path.end(), std::string_view()) != path.end()) {
      ctx.error("override '" + text + "' has an empty key segment");
      continue;
    }
    boost::json::value value;
    switch (detail::config_kind_at(ops, path)) {
    case detail::value_kind::text:
      if (!raw.starts_with('"') || !detail::parse_json_value(raw, value) || !value.is_string())
        value = boost::json::string(raw.data(), raw.size());
      break;
    case detail::value_kind::json:
      if (!detail::parse_json_value(raw, value)) {
        ctx.error(key, "override '" + text + "': " + detail::show(raw) + " is not a valid value (write it as JSON)");
        continue;
      }
      break;
    case detail::value_kind::unknown:
      if (!detail::parse_json_value(raw, value)) value = boost::json::string(raw.data(), raw.size());
      break;
    }
    detail::set_at(document, path, std::move(value));
  }
}

} // namespace cairn::detail
