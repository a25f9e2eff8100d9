#pragma once

#include <cairn/config/detail/json_fwd.hpp>
#include <cairn/config/detail/type_name.hpp>
#include <cairn/config/read_context.hpp>
#include <cairn/detail/decl.hpp>

#include <boost/describe/enum.hpp>
#include <boost/describe/enumerators.hpp>

#include <array>
#include <concepts>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace cairn {

/// How a value type is read from and written to JSON, named in documentation and
/// described in JSON Schema. Specialize it for your own types with four static members:
///
///     static void read(boost::json::value const&, T&, cairn::read_context&);
///     static boost::json::value write(T const&);
///     static std::string type_name();
///     static void schema(boost::json::object&);
///
/// and, for a type written as a JSON string, `static constexpr bool textual = true;`
/// (command-line overrides then take its value verbatim). cairn's headers only declare the
/// JSON types; the header that defines them, <boost/json.hpp>, is the traits' to include.
template <class T> struct value_traits; // An error about an incomplete `value_traits<X>` here means
                                        // that X is not a type cairn can read: describe it
                                        // (BOOST_DESCRIBE_STRUCT or BOOST_DESCRIBE_ENUM) or
                                        // specialize cairn::value_traits<X>.

namespace detail {

template <class T> inline constexpr bool is_optional = false;
template <class T> inline constexpr bool is_optional<std::optional<T>> = true;
template <class T> inline constexpr bool is_vector = false;
template <class T, class A> inline constexpr bool is_vector<std::vector<T, A>> = true;
template <class T> inline constexpr bool is_string_map = false;
template <class T, class C, class A> inline constexpr bool is_string_map<std::map<std::string, T, C, A>> = true;

/// How a JSON value is named in "expected X, got Y".
CAIRN_DECL std::string describe_json(boost::json::value const& j);

/// The size and signedness of an integer type, for the ordinary functions that read it.
struct integer_kind {
  bool is_signed;
  unsigned char bytes;
};
template <class V> inline constexpr integer_kind integer_kind_of{std::is_signed_v<V>, sizeof(V)};

/// `int32`, `uint64`, ...
CAIRN_DECL std::string integer_name(integer_kind kind);
/// Reads an integer of `kind` into `out` (an object of that type); out of range, fractional and
/// non-numeric values are errors in `ctx`, and leave `out` alone.
CAIRN_DECL void read_integer(boost::json::value const& j, void* out, integer_kind kind, read_context& ctx);
CAIRN_DECL void integer_schema(boost::json::object& s, integer_kind kind);
/// Reads a number as a double; anything else is an error in `ctx`, and gives nothing.
/// A finite number of magnitude at most `limit` (the largest value of the field's type): JSON
/// text like `1e999` that parses to infinity, and values a float32 field cannot hold, are errors.
CAIRN_DECL std::optional<double> read_number(boost::json::value const& j, read_context& ctx, double limit,
                                             char const* type);
CAIRN_DECL void number_schema(boost::json::object& s);

// Stores a scalar in a JSON value: ordinary functions, so that the traits below need no
// definition of boost::json::value.
CAIRN_DECL void store_bool(boost::json::value& out, bool v);
CAIRN_DECL void store_int64(boost::json::value& out, std::int64_t v);
CAIRN_DECL void store_uint64(boost::json::value& out, std::uint64_t v);
CAIRN_DECL void store_double(boost::json::value& out, double v);
CAIRN_DECL void store_string(boost::json::value& out, std::string_view v);

/// An enumerator of a described enum: its name and value.
struct enum_entry {
  std::string_view name;
  std::int64_t value;
};
/// An enumerator named after a C++ keyword takes a trailing underscore (`auto_`); its name in a
/// config does not.
constexpr std::string_view enumerator_name(std::string_view name) {
  return name.size() > 1 && name.back() == '_' ? name.substr(0, name.size() - 1) : name;
}
template <template <class...> class L, class... D>
constexpr std::array<enum_entry, sizeof...(D)> enum_entries(L<D...>) {
  return {{{enumerator_name(D::name), static_cast<std::int64_t>(D::value)}...}};
}
/// The enumerators of E, a constant.
template <class E> inline constexpr auto enum_table = enum_entries(boost::describe::describe_enumerators<E>());

/// "a, b, c"
CAIRN_DECL std::string enum_names(std::span<enum_entry const> table);
/// The value of the enumerator named by `j`; anything else is an error in `ctx`, and gives nothing.
CAIRN_DECL std::optional<std::int64_t> read_enum(boost::json::value const& j, std::span<enum_entry const> table,
                                                 read_context& ctx);
/// The enumerator's name, or the number for a value that has none.
CAIRN_DECL void write_enum(boost::json::value& out, std::span<enum_entry const> table, std::int64_t value);
CAIRN_DECL void enum_schema(boost::json::object& s, std::span<enum_entry const> table);

} // namespace detail

namespace detail {
/// `value_traits<V>::write` of a type whose traits store through `write_to`.
template <class V> json_value<V> written(V const& v) {
  json_value<V> out;
  value_traits<V>::write_to(v, out);
  return out;
}
} // namespace detail

// The traits of cairn's own value types also give `write_to`, which stores into a JSON value
// without needing its definition; `write` is for callers who have it.

template <> struct value_traits<bool> {
  CAIRN_DECL static void read(boost::json::value const& j, bool& v, read_context& ctx);
  CAIRN_DECL static boost::json::value write(bool v);
  static void write_to(bool v, boost::json::value& out) { detail::store_bool(out, v); }
  static std::string type_name() { return "bool"; }
  CAIRN_DECL static void schema(boost::json::object& s);
};

template <class V>
requires std::integral<V> &&(!std::is_same_v<V, bool>)&&(!std::is_same_v<V, char>)struct value_traits<V> {
  static void read(boost::json::value const& j, V& v, read_context& ctx) {
    detail::read_integer(j, &v, detail::integer_kind_of<V>, ctx);
  }
  static void write_to(V v, boost::json::value& out) {
    if constexpr (std::is_signed_v<V>)
      detail::store_int64(out, v);
    else
      detail::store_uint64(out, v);
  }
  static detail::json_value<V> write(V v) { return detail::written(v); }
  static std::string type_name() { return detail::integer_name(detail::integer_kind_of<V>); }
  static void schema(boost::json::object& s) { detail::integer_schema(s, detail::integer_kind_of<V>); }
};

template <std::floating_point V> struct value_traits<V> {
  static void read(boost::json::value const& j, V& v, read_context& ctx) {
    if (auto x = detail::read_number(j, ctx, static_cast<double>(std::numeric_limits<V>::max()),
                                     sizeof(V) == 4 ? "float32" : "float64"))
      v = static_cast<V>(*x);
  }
  static void write_to(V v, boost::json::value& out) { detail::store_double(out, static_cast<double>(v)); }
  static detail::json_value<V> write(V v) { return detail::written(v); }
  static std::string type_name() { return "float" + std::to_string(8 * sizeof(V)); }
  static void schema(boost::json::object& s) { detail::number_schema(s); }
};

template <> struct value_traits<std::string> {
  static constexpr bool textual = true;
  CAIRN_DECL static void read(boost::json::value const& j, std::string& v, read_context& ctx);
  CAIRN_DECL static boost::json::value write(std::string const& v);
  static void write_to(std::string const& v, boost::json::value& out) { detail::store_string(out, v); }
  static std::string type_name() { return "string"; }
  CAIRN_DECL static void schema(boost::json::object& s);
};

namespace detail {
/// `std::filesystem::path`, recognised without including <filesystem> (a translation unit with
/// a path member has it); a path type with the same interface, like Boost's, reads the same.
template <class P>
concept filesystem_path = requires(P const& p) {
  typename P::string_type;
  { p.string() } -> std::convertible_to<std::string>;
  p.root_path();
  p.lexically_normal();
  P(std::string());
};
/// Reads a path's text; anything but a string is an error in `ctx`, and gives nothing.
CAIRN_DECL std::optional<std::string> read_path(boost::json::value const& j, read_context& ctx);
} // namespace detail

template <detail::filesystem_path P> struct value_traits<P> {
  static constexpr bool textual = true;
  static void read(boost::json::value const& j, P& v, read_context& ctx) {
    if (auto text = detail::read_path(j, ctx)) v = P(*text);
  }
  static void write_to(P const& v, boost::json::value& out) { detail::store_string(out, v.string()); }
  static detail::json_value<P> write(P const& v) { return detail::written(v); }
  static std::string type_name() { return "path"; }
  static void schema(boost::json::object& s) { value_traits<std::string>::schema(s); }
};

/// Described enums are written as their enumerator names.
template <class E>
requires std::is_enum_v<E> && boost::describe::has_describe_enumerators<E>::value struct value_traits<E> {
  static constexpr bool textual = true;
  static std::string names() { return detail::enum_names(detail::enum_table<E>); }
  static void read(boost::json::value const& j, E& v, read_context& ctx) {
    if (auto x = detail::read_enum(j, detail::enum_table<E>, ctx)) v = static_cast<E>(*x);
  }
  static void write_to(E v, boost::json::value& out) {
    detail::write_enum(out, detail::enum_table<E>, static_cast<std::int64_t>(v));
  }
  static detail::json_value<E> write(E v) { return detail::written(v); }
  static std::string type_name() { return std::string(detail::type_name<E>()); }
  static void schema(boost::json::object& s) { detail::enum_schema(s, detail::enum_table<E>); }
};

// The traits of std::optional, std::vector and std::map of strings are in reflect.hpp: they work
// through the type operations defined there.

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/config/impl/value.ipp>
#endif
