// Definitions of <cairn/config/value.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/config/detail/show.hpp>
#include <cairn/config/value.hpp>

#include <boost/json/value.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace cairn::detail {

CAIRN_DECL std::string describe_json(boost::json::value const& j) {
  switch (j.kind()) {
  case boost::json::kind::null:
    return "null";
  case boost::json::kind::bool_:
    return j.get_bool() ? "true" : "false";
  case boost::json::kind::int64:
    return "number " + show(j.get_int64());
  case boost::json::kind::uint64:
    return "number " + show(j.get_uint64());
  case boost::json::kind::double_:
    return "number " + show(j.get_double());
  case boost::json::kind::string:
    return "string " + show(std::string_view(j.get_string()));
  case boost::json::kind::array:
    return "an array";
  case boost::json::kind::object:
    return "an object";
  }
  return "a value";
}

CAIRN_DECL void store_bool(boost::json::value& out, bool v) { out = v; }
CAIRN_DECL void store_int64(boost::json::value& out, std::int64_t v) { out = v; }
CAIRN_DECL void store_uint64(boost::json::value& out, std::uint64_t v) { out = v; }
CAIRN_DECL void store_double(boost::json::value& out, double v) { out = v; }
CAIRN_DECL void store_string(boost::json::value& out, std::string_view v) {
  out = boost::json::string_view(v.data(), v.size());
}

CAIRN_DECL std::optional<std::string> read_path(boost::json::value const& j, read_context& ctx) {
  if (j.is_string()) return std::string(j.get_string());
  ctx.error("expected a path (string), got " + describe_json(j));
  return std::nullopt;
}

CAIRN_DECL std::string enum_names(std::span<enum_entry const> table) {
  std::string text;
  for (auto const& e : table) {
    if (!text.empty()) text += ", ";
    text += e.name;
  }
  return text;
}

CAIRN_DECL std::optional<std::int64_t> read_enum(boost::json::value const& j, std::span<enum_entry const> table,
                                                 read_context& ctx) {
  if (!j.is_string()) {
    ctx.error("expected one of " + enum_names(table) + ", got " + describe_json(j));
    return std::nullopt;
  }
  std::string_view name = j.get_string();
  for (auto const& e : table)
    if (e.name == name) return e.value;
  ctx.error("must be one of " + enum_names(table) + ", got " + show(name));
  return std::nullopt;
}

CAIRN_DECL void write_enum(boost::json::value& out, std::span<enum_entry const> table, std::int64_t value) {
  for (auto const& e : table) {
    if (e.value == value) {
      store_string(out, e.name);
      return;
    }
  }
  out = value;
}

CAIRN_DECL void enum_schema(boost::json::object& s, std::span<enum_entry const> table) {
  s["type"] = "string";
  boost::json::array list;
  for (auto const& e : table) list.emplace_back(boost::json::string_view(e.name.data(), e.name.size()));
  s["enum"] = std::move(list);
}

CAIRN_DECL std::string integer_name(integer_kind kind) {
  return (kind.is_signed ? "int" : "uint") + std::to_string(8 * kind.bytes);
}

template <class V> void store_integer(void* out, V value) { std::memcpy(out, &value, sizeof value); }

CAIRN_DECL void read_integer(boost::json::value const& j, void* out, integer_kind kind, read_context& ctx) {
  unsigned bits = 8u * kind.bytes;
  // The largest magnitude of a negative value, and the largest value.
  std::uint64_t negative_limit = kind.is_signed ? std::uint64_t{1} << (bits - 1) : 0;
  std::uint64_t high = std::numeric_limits<std::uint64_t>::max() >> (64 - bits + (kind.is_signed ? 1 : 0));
  // The value as a sign and a magnitude, exact for every JSON integer.
  bool negative = false, huge = false;
  std::uint64_t magnitude = 0;
  std::string shown;
  if (j.is_int64()) {
    auto x = j.get_int64();
    negative = x < 0;
    magnitude = negative ? 0 - static_cast<std::uint64_t>(x) : static_cast<std::uint64_t>(x);
    shown = show(x);
  } else if (j.is_uint64()) {
    magnitude = j.get_uint64();
    shown = show(magnitude);
  } else if (j.is_double() && std::trunc(j.get_double()) == j.get_double()) {
    double x = j.get_double();
    shown = show(x);
    negative = x < 0;
    huge = std::fabs(x) >= 18446744073709551616.0; // 2^64; below it the conversion is exact
    if (!huge) magnitude = static_cast<std::uint64_t>(std::fabs(x));
  } else {
    ctx.error("expected an integer, got " + describe_json(j));
    return;
  }
  bool fits = !huge && (negative && magnitude != 0 ? magnitude <= negative_limit : magnitude <= high);
  if (!fits) {
    std::string bounds = kind.is_signed ? "-" : "0, ";
    if (kind.is_signed) bounds += show(negative_limit) + ", ";
    bounds += show(high);
    ctx.error(shown + " is out of range for " + integer_name(kind) + " [" + bounds + "]");
    return;
  }
  // Two's complement: the low bytes of the 64-bit value are the value in the smaller type.
  std::uint64_t value = negative ? 0 - magnitude : magnitude;
  switch (kind.bytes) {
  case 1:
    return store_integer(out, static_cast<std::uint8_t>(value));
  case 2:
    return store_integer(out, static_cast<std::uint16_t>(value));
  case 4:
    return store_integer(out, static_cast<std::uint32_t>(value));
  default:
    return store_integer(out, value);
  }
}

CAIRN_DECL void integer_schema(boost::json::object& s, integer_kind kind) {
  s["type"] = "integer";
  unsigned bits = 8u * kind.bytes;
  if (kind.bytes < 8) {
    s["minimum"] = kind.is_signed ? -(std::int64_t{1} << (bits - 1)) : std::int64_t{0};
    s["maximum"] = kind.is_signed ? (std::int64_t{1} << (bits - 1)) - 1 : (std::int64_t{1} << bits) - 1;
  } else if (!kind.is_signed) {
    s["minimum"] = 0;
  }
}

CAIRN_DECL std::optional<double> read_number(boost::json::value const& j, read_context& ctx, double limit,
                                             char const* type) {
  if (!j.is_number()) {
    ctx.error("expected a number, got " + describe_json(j));
    return std::nullopt;
  }
  auto x = j.to_number<double>();
  if (!std::isfinite(x)) {
    // JSON text cannot spell infinity or NaN: such a value is a number too large for a double,
    // or YAML's .inf / .nan.
    ctx.error("must be a finite number, got " + describe_json(j) +
              (std::isnan(x) ? std::string() : std::string(" (infinite, or too large for any floating type)")));
    return std::nullopt;
  }
  if (std::fabs(x) > limit) {
    ctx.error(describe_json(j) + " is out of range for " + std::string(type));
    return std::nullopt;
  }
  return x;
}

CAIRN_DECL void number_schema(boost::json::object& s) { s["type"] = "number"; }

} // namespace cairn::detail

namespace cairn {

CAIRN_DECL void value_traits<bool>::read(boost::json::value const& j, bool& v, read_context& ctx) {
  if (j.is_bool())
    v = j.get_bool();
  else
    ctx.error("expected a boolean, got " + detail::describe_json(j));
}
CAIRN_DECL boost::json::value value_traits<bool>::write(bool v) { return v; }
CAIRN_DECL void value_traits<bool>::schema(boost::json::object& s) { s["type"] = "boolean"; }

CAIRN_DECL void value_traits<std::string>::read(boost::json::value const& j, std::string& v, read_context& ctx) {
  if (j.is_string())
    v = std::string_view(j.get_string());
  else
    ctx.error("expected a string, got " + detail::describe_json(j));
}
CAIRN_DECL boost::json::value value_traits<std::string>::write(std::string const& v) { return detail::written(v); }
CAIRN_DECL void value_traits<std::string>::schema(boost::json::object& s) { s["type"] = "string"; }

} // namespace cairn
