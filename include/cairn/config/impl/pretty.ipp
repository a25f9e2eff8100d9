// Definitions of <cairn/config/detail/pretty.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/config/detail/pretty.hpp>

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <cmath>

namespace cairn::detail {

CAIRN_DECL void write_json(std::string& out, boost::json::value const& v, int indent) {
  auto newline = [&](int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<std::size_t>(level) * 2, ' ');
  };
  auto next = indent < 0 ? indent : indent + 1;
  if (v.is_object() && !v.get_object().empty()) {
    out += '{';
    bool first = true;
    for (auto const& entry : v.get_object()) {
      if (!first) out += indent < 0 ? ", " : ",";
      first = false;
      newline(indent + 1);
      out += boost::json::serialize(boost::json::value(entry.key()));
      out += ": ";
      write_json(out, entry.value(), next);
    }
    newline(indent);
    out += '}';
  } else if (v.is_array() && !v.get_array().empty()) {
    out += '[';
    bool first = true;
    for (auto const& item : v.get_array()) {
      if (!first) out += indent < 0 ? ", " : ",";
      first = false;
      newline(indent + 1);
      write_json(out, item, next);
    }
    newline(indent);
    out += ']';
  } else if (v.is_double() && std::isfinite(v.get_double())) {
    out += show(v.get_double());
  } else if (v.is_double()) {
    // JSON has no NaN or infinity: written as strings, so that every file cairn writes parses.
    auto x = v.get_double();
    out += std::isnan(x) ? "\"NaN\"" : x > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  } else {
    out += boost::json::serialize(v);
  }
}

CAIRN_DECL std::string pretty(boost::json::value const& v) {
  std::string out;
  write_json(out, v, 0);
  out += '\n';
  return out;
}

CAIRN_DECL std::string compact(boost::json::value const& v) {
  std::string out;
  write_json(out, v, -1);
  return out;
}

} // namespace cairn::detail
