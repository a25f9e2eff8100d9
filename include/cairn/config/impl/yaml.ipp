// Definitions of <cairn/config/yaml.hpp>: inline in a header-only build, compiled once by
// <cairn/config/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/config/detail/pretty.hpp>
#include <cairn/config/yaml.hpp>

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <vector>
#include <yaml-cpp/yaml.h>

namespace cairn::detail {

/// What a plain (unquoted, untagged) scalar means in the YAML 1.2 core schema. Returns false
/// for an integer out of range.
inline bool resolve_plain_scalar(std::string_view s, boost::json::value& out) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") {
    out = nullptr;
    return true;
  }
  if (s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" || s == "FALSE") {
    out = s[0] == 't' || s[0] == 'T';
    return true;
  }
  auto digits = [](std::string_view d, auto accept) {
    return !d.empty() && std::all_of(d.begin(), d.end(), [&](char c) { return accept(c); });
  };
  auto decimal = [](char c) { return c >= '0' && c <= '9'; };
  std::string_view body = s;
  bool negative = false;
  if (body[0] == '-' || body[0] == '+') {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  // Integers: [-+]?[0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+.
  int base = 0;
  std::string_view number;
  if (digits(body, decimal)) {
    base = 10;
    number = body;
  } else if (body.size() > 2 && body[0] == '0' && body[1] == 'o' && body.data() == s.data() &&
             digits(body.substr(2), [](char c) { return c >= '0' && c <= '7'; })) {
    base = 8;
    number = body.substr(2);
  } else if (body.size() > 2 && body[0] == '0' && body[1] == 'x' && body.data() == s.data() &&
             digits(body.substr(2), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; })) {
    base = 16;
    number = body.substr(2);
  }
  if (base) {
    std::uint64_t magnitude = 0;
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), magnitude, base);
    if (ec != std::errc{} || end != number.data() + number.size()) return false;
    if (!negative && magnitude <= std::uint64_t(std::numeric_limits<std::int64_t>::max()))
      out = static_cast<std::int64_t>(magnitude);
    else if (!negative)
      out = magnitude;
    else if (magnitude <= std::uint64_t(std::numeric_limits<std::int64_t>::max()) + 1)
      out = static_cast<std::int64_t>(0 - magnitude);
    else
      return false;
    return true;
  }
  // Floats: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?, [-+]?\.inf, \.nan.
  if (body == ".inf" || body == ".Inf" || body == ".INF") {
    out = negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    return true;
  }
  if (s == ".nan" || s == ".NaN" || s == ".NAN") {
    out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  std::size_t at = 0;
  std::size_t whole = 0, fraction = 0;
  while (at < body.size() && decimal(body[at])) ++at, ++whole;
  if (at < body.size() && body[at] == '.') {
    ++at;
    while (at < body.size() && decimal(body[at])) ++at, ++fraction;
  }
  bool mantissa = whole > 0 || fraction > 0;
  if (mantissa && at < body.size() && (body[at] == 'e' || body[at] == 'E')) {
    std::size_t exponent = at + 1;
    if (exponent < body.size() && (body[exponent] == '-' || body[exponent] == '+')) ++exponent;
    if (!digits(body.substr(std::min(exponent, body.size())), decimal)) mantissa = false;
    at = body.size();
  }
  if (mantissa && at == body.size()) {
    double value = 0;
    auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), value);
    if (ec == std::errc::result_out_of_range)
      value = std::numeric_limits<double>::infinity(); // as large as YAML says; the config refuses it
    else if (ec != std::errc{} || end != body.data() + body.size())
      return false;
    out = negative ? -value : value;
    return true;
  }
  out = std::string(s);
  return true;
}

struct yaml_reader {
  std::string source;

  [[noreturn]] void fail(YAML::Mark const& mark, std::string const& what) const {
    throw config_error(
        {{source, what + " at line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1)}});
  }

  static std::string child(std::string const& path, std::string const& key) {
    return path.empty() ? key : path + "." + key;
  }

  std::string key_of(YAML::Node const& key, std::string const& path) const {
    if (!key.IsScalar())
      fail(key.Mark(), "a key that is not a scalar" + (path.empty() ? std::string() : " in '" + path + "'"));
    return key.Scalar();
  }

  boost::json::value convert(YAML::Node const& node, std::string const& path) const {
    auto const& tag = node.Tag();
    std::string_view core = tag;
    constexpr std::string_view prefix = "tag:yaml.org,2002:";
    bool explicit_core = core.starts_with(prefix);
    if (explicit_core) core.remove_prefix(prefix.size());
    bool known = tag.empty() || tag == "?" || tag == "!" ||
                 (explicit_core && (core == "str" || core == "int" || core == "float" || core == "bool" ||
                                    core == "null" || core == "map" || core == "seq"));
    if (!known) fail(node.Mark(), "unsupported tag '" + tag + "'" + (path.empty() ? "" : " at '" + path + "'"));
    switch (node.Type()) {
    case YAML::NodeType::Null:
      if (explicit_core && core == "str") return boost::json::string();
      return nullptr;
    case YAML::NodeType::Scalar: {
      if (tag == "!" || (explicit_core && core == "str")) return boost::json::string(node.Scalar());
      boost::json::value value;
      if (!resolve_plain_scalar(node.Scalar(), value))
        fail(node.Mark(), "integer out of range: '" + node.Scalar() + "'");
      if (explicit_core && core != "str") {
        bool fits = (core == "int" && (value.is_int64() || value.is_uint64())) ||
                    (core == "float" && (value.is_double() || value.is_int64() || value.is_uint64())) ||
                    (core == "bool" && value.is_bool()) || (core == "null" && value.is_null());
        if (!fits) fail(node.Mark(), "'" + node.Scalar() + "' is not a valid !!" + std::string(core));
        if (core == "float" && !value.is_double()) value = value.to_number<double>();
      }
      return value;
    }
    case YAML::NodeType::Sequence: {
      boost::json::array array;
      std::size_t index = 0;
      for (auto const& element : node) array.push_back(convert(element, path + "[" + std::to_string(index++) + "]"));
      return array;
    }
    case YAML::NodeType::Map: {
      boost::json::object object;
      std::vector<YAML::Node> merged;
      for (auto it = node.begin(); it != node.end(); ++it) {
        if (it->first.IsScalar() && it->first.Tag() == "?" && it->first.Scalar() == "<<") {
          if (it->second.IsMap()) {
            merged.push_back(it->second);
          } else if (it->second.IsSequence() &&
                     std::all_of(it->second.begin(), it->second.end(), [](auto const& m) { return m.IsMap(); })) {
            for (auto const& m : it->second) merged.push_back(m);
          } else {
            fail(it->second.Mark(), "a merge key '<<' takes a mapping or a list of mappings");
          }
          continue;
        }
        auto key = key_of(it->first, path);
        if (object.contains(key)) fail(it->first.Mark(), "duplicate key '" + child(path, key) + "'");
        object[key] = convert(it->second, child(path, key));
      }
      // Merged keys never replace the mapping's own; among merged mappings the first wins.
      for (auto const& m : merged) {
        auto from = convert(m, path).as_object();
        for (auto& [key, value] : from)
          if (!object.contains(key)) object[key] = std::move(value);
      }
      return object;
    }
    default:
      return nullptr;
    }
  }
};

inline bool plain_is_safe(std::string_view s) {
  if (s.empty() || s.back() == ' ') return false;
  auto first = static_cast<unsigned char>(s[0]);
  if (!(std::isalnum(first) || s[0] == '_' || s[0] == '/' || s[0] == '.')) return false;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (!(std::isalnum(u) || c == '_' || c == '-' || c == '.' || c == '/' || c == '+' || c == '@' || c == ' ' ||
          c == '='))
      return false;
  }
  boost::json::value resolved;
  return resolve_plain_scalar(s, resolved) && resolved.is_string();
}

inline std::string yaml_scalar(boost::json::value const& v) {
  switch (v.kind()) {
  case boost::json::kind::null:
    return "null";
  case boost::json::kind::bool_:
    return v.get_bool() ? "true" : "false";
  case boost::json::kind::double_: {
    double d = v.get_double();
    if (std::isnan(d)) return ".nan";
    if (std::isinf(d)) return d > 0 ? ".inf" : "-.inf";
    auto text = compact(v);
    if (text.find_first_of(".eE") == std::string::npos) text += ".0";
    return text;
  }
  case boost::json::kind::string: {
    auto const& s = v.get_string();
    if (plain_is_safe(s)) return std::string(s);
    return boost::json::serialize(s);
  }
  case boost::json::kind::object:
    return "{}";
  case boost::json::kind::array:
    return "[]";
  default:
    return compact(v);
  }
}

inline bool yaml_block(boost::json::value const& v) {
  return (v.is_object() && !v.get_object().empty()) || (v.is_array() && !v.get_array().empty());
}

inline void write_yaml(boost::json::value const& v, std::size_t indent, std::string& out) {
  std::string pad(indent, ' ');
  if (v.is_object()) {
    for (auto const& [key, value] : v.get_object()) {
      out += pad + yaml_scalar(boost::json::string(key)) + ":";
      if (yaml_block(value)) {
        out += "\n";
        write_yaml(value, indent + 2, out);
      } else {
        out += " " + yaml_scalar(value) + "\n";
      }
    }
  } else if (v.is_array()) {
    for (auto const& element : v.get_array()) {
      if (yaml_block(element)) {
        std::string nested;
        write_yaml(element, indent + 2, nested);
        out += pad + "- " + nested.substr(indent + 2);
      } else {
        out += pad + "- " + yaml_scalar(element) + "\n";
      }
    }
  } else {
    out += pad + yaml_scalar(v) + "\n";
  }
}

} // namespace cairn::detail

namespace cairn {

CAIRN_DECL boost::json::value parse_yaml(std::string_view text, std::string_view source) {
  detail::yaml_reader reader{std::string(source)};
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(std::string(text));
  } catch (YAML::Exception const& e) {
    reader.fail(e.mark, "invalid YAML (" + e.msg + ")");
  }
  if (documents.size() > 1) throw config_error({{std::string(source), "more than one YAML document"}});
  if (documents.empty() || documents[0].IsNull()) return boost::json::object{}; // comments only: all defaults
  return reader.convert(documents[0], "");
}

CAIRN_DECL boost::json::value read_yaml_file(std::string const& file, std::size_t limit) {
  return parse_yaml(detail::read_config_text(file, limit), file);
}

CAIRN_DECL std::string to_yaml(boost::json::value const& document) {
  std::string out;
  if (detail::yaml_block(document))
    detail::write_yaml(document, 0, out);
  else
    out = detail::yaml_scalar(document) + "\n";
  return out;
}

} // namespace cairn
