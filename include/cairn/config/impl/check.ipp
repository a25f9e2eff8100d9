// Definitions of <cairn/config/check.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/config/check.hpp>

#include <boost/json/object.hpp>

#include <utility>

namespace cairn::check::detail {

CAIRN_DECL std::string show_number(number const& n) {
  switch (n.type) {
  case number::kind::signed_integer:
    return show(n.i);
  case number::kind::unsigned_integer:
    return show(n.u);
  case number::kind::float32:
    return show(static_cast<float>(n.x));
  case number::kind::float64:
    break;
  }
  return show(static_cast<double>(n.x));
}

/// a < b, exact for mixed signed and unsigned integers.
inline bool number_less(number const& a, number const& b) {
  using kind = number::kind;
  bool a_int = a.type == kind::signed_integer || a.type == kind::unsigned_integer;
  bool b_int = b.type == kind::signed_integer || b.type == kind::unsigned_integer;
  if (a_int && b_int) {
    if (a.type == kind::signed_integer) return b.type == kind::signed_integer ? a.i < b.i : std::cmp_less(a.i, b.u);
    return b.type == kind::signed_integer ? std::cmp_less(a.u, b.i) : a.u < b.u;
  }
  auto value = [](number const& n) {
    return n.type == kind::signed_integer     ? static_cast<long double>(n.i)
           : n.type == kind::unsigned_integer ? static_cast<long double>(n.u)
                                              : n.x;
  };
  return value(a) < value(b);
}

CAIRN_DECL std::string describe_relation(relation r, number const& bound) {
  char const* op = r == relation::greater ? "> " : r == relation::at_least ? ">= " : r == relation::less ? "< " : "<= ";
  return op + show_number(bound);
}

CAIRN_DECL std::optional<std::string> test_relation(relation r, number const& bound, number const& value) {
  bool ok = r == relation::greater    ? number_less(bound, value)
            : r == relation::at_least ? !number_less(value, bound)
            : r == relation::less     ? number_less(value, bound)
                                      : !number_less(bound, value);
  if (ok) return std::nullopt;
  return "must be " + describe_relation(r, bound) + ", got " + show_number(value);
}

/// Sets `key` of `schema` to the number, as JSON has it.
inline void set_number(boost::json::object& schema, char const* key, number const& n) {
  switch (n.type) {
  case number::kind::signed_integer:
    schema[key] = n.i;
    return;
  case number::kind::unsigned_integer:
    schema[key] = n.u;
    return;
  case number::kind::float32:
  case number::kind::float64:
    schema[key] = static_cast<double>(n.x);
    return;
  }
}

CAIRN_DECL void schema_relation(boost::json::object& schema, relation r, number const& bound) {
  set_number(schema,
             r == relation::greater    ? "exclusiveMinimum"
             : r == relation::at_least ? "minimum"
             : r == relation::less     ? "exclusiveMaximum"
                                       : "maximum",
             bound);
}

CAIRN_DECL std::string describe_range(number const& low, number const& high) {
  return "in [" + show_number(low) + ", " + show_number(high) + "]";
}

CAIRN_DECL std::optional<std::string> test_range(number const& low, number const& high, number const& value) {
  if (!number_less(value, low) && !number_less(high, value)) return std::nullopt;
  return "must be " + describe_range(low, high) + ", got " + show_number(value);
}

CAIRN_DECL void schema_range(boost::json::object& schema, number const& low, number const& high) {
  set_number(schema, "minimum", low);
  set_number(schema, "maximum", high);
}

template <class T> void set_enum(boost::json::object& schema, std::span<T const> values) {
  boost::json::array list;
  for (auto const& v : values) {
    if constexpr (std::is_same_v<T, std::string_view>)
      list.emplace_back(boost::json::string_view(v.data(), v.size()));
    else
      list.emplace_back(v);
  }
  schema["enum"] = std::move(list);
}
CAIRN_DECL void schema_enum(boost::json::object& schema, std::span<std::string_view const> values) {
  set_enum(schema, values);
}
CAIRN_DECL void schema_enum(boost::json::object& schema, std::span<long long const> values) {
  set_enum(schema, values);
}
CAIRN_DECL void schema_enum(boost::json::object& schema, std::span<unsigned long long const> values) {
  set_enum(schema, values);
}
CAIRN_DECL void schema_enum(boost::json::object& schema, std::span<double const> values) { set_enum(schema, values); }

CAIRN_DECL void schema_non_empty(boost::json::object& schema) {
  auto type = schema.if_contains("type");
  if (type && type->is_string() && type->as_string() == "array")
    schema["minItems"] = 1;
  else if (type && type->is_string() && type->as_string() == "object")
    schema["minProperties"] = 1;
  else
    schema["minLength"] = 1;
}

} // namespace cairn::check::detail
