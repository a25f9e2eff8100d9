#pragma once

#include <cairn/config/detail/show.hpp>

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <cmath>
#include <string>

namespace cairn::detail {

/// Writes JSON for people: numbers in their shortest form (`0.1`, not `1E-1`), and, when
/// `indent` is not negative, two spaces per level with keys in the config's order.
inline void write_json(std::string& out, boost::json::value const& v, int indent) {
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
  } else {
    out += boost::json::serialize(v);
  }
}

/// Indented JSON text, ending with a newline.
inline std::string pretty(boost::json::value const& v) {
  std::string out;
  write_json(out, v, 0);
  out += '\n';
  return out;
}

/// JSON text on one line.
inline std::string compact(boost::json::value const& v) {
  std::string out;
  write_json(out, v, -1);
  return out;
}

} // namespace cairn::detail
