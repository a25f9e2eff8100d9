#pragma once

#include <cairn/config/detail/decl.hpp>
#include <cairn/config/detail/show.hpp>
#include <cairn/config/detail/type_name.hpp>
#include <cairn/config/read_context.hpp>

#include <boost/describe/enum.hpp>
#include <boost/describe/enumerators.hpp>
#include <boost/json/value.hpp>
#include <boost/mp11/algorithm.hpp>

#include <cmath>
#include <concepts>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
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
/// (command-line overrides then take its value verbatim).
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
CAIRN_DECL std::optional<double> read_number(boost::json::value const& j, read_context& ctx);
CAIRN_DECL void number_schema(boost::json::object& s);

CAIRN_DECL boost::json::value string_value(std::string_view s);

// Containers are read, written and described by the ordinary functions of reflect.hpp, over
// their type operations.
struct type_ops;
template <class V> type_ops const& type_ops_for();
CAIRN_DECL void read_value(type_ops const& type, boost::json::value const& j, void* value, read_context& ctx);
CAIRN_DECL boost::json::value write_value(type_ops const& type, void const* value);
CAIRN_DECL std::string type_name_of(type_ops const& type);
CAIRN_DECL void schema_of(type_ops const& type, boost::json::object& s);

/// value_traits of a container, for user-defined traits built on them.
template <class V> struct container_traits {
  static void read(boost::json::value const& j, V& v, read_context& ctx) { read_value(type_ops_for<V>(), j, &v, ctx); }
  static boost::json::value write(V const& v) { return write_value(type_ops_for<V>(), &v); }
  static std::string type_name() { return type_name_of(type_ops_for<V>()); }
  static void schema(boost::json::object& s) { schema_of(type_ops_for<V>(), s); }
};

} // namespace detail

template <> struct value_traits<bool> {
  CAIRN_DECL static void read(boost::json::value const& j, bool& v, read_context& ctx);
  static boost::json::value write(bool v) { return v; }
  static std::string type_name() { return "bool"; }
  CAIRN_DECL static void schema(boost::json::object& s);
};

template <class V>
requires std::integral<V> &&(!std::is_same_v<V, bool>)&&(!std::is_same_v<V, char>)struct value_traits<V> {
  static void read(boost::json::value const& j, V& v, read_context& ctx) {
    detail::read_integer(j, &v, detail::integer_kind_of<V>, ctx);
  }
  static boost::json::value write(V v) {
    if constexpr (std::is_signed_v<V>)
      return static_cast<std::int64_t>(v);
    else
      return static_cast<std::uint64_t>(v);
  }
  static std::string type_name() { return detail::integer_name(detail::integer_kind_of<V>); }
  static void schema(boost::json::object& s) { detail::integer_schema(s, detail::integer_kind_of<V>); }
};

template <std::floating_point V> struct value_traits<V> {
  static void read(boost::json::value const& j, V& v, read_context& ctx) {
    if (auto x = detail::read_number(j, ctx)) v = static_cast<V>(*x);
  }
  static boost::json::value write(V v) { return static_cast<double>(v); }
  static std::string type_name() { return "float" + std::to_string(8 * sizeof(V)); }
  static void schema(boost::json::object& s) { detail::number_schema(s); }
};

template <> struct value_traits<std::string> {
  static constexpr bool textual = true;
  CAIRN_DECL static void read(boost::json::value const& j, std::string& v, read_context& ctx);
  CAIRN_DECL static boost::json::value write(std::string const& v);
  static std::string type_name() { return "string"; }
  CAIRN_DECL static void schema(boost::json::object& s);
};

template <> struct value_traits<std::filesystem::path> {
  static constexpr bool textual = true;
  CAIRN_DECL static void read(boost::json::value const& j, std::filesystem::path& v, read_context& ctx);
  CAIRN_DECL static boost::json::value write(std::filesystem::path const& v);
  static std::string type_name() { return "path"; }
  CAIRN_DECL static void schema(boost::json::object& s);
};

/// Described enums are written as their enumerator names.
template <class E>
requires std::is_enum_v<E> && boost::describe::has_describe_enumerators<E>::value struct value_traits<E> {
  static constexpr bool textual = true;
  static std::string names() {
    std::string text;
    boost::mp11::mp_for_each<boost::describe::describe_enumerators<E>>([&](auto d) {
      if (!text.empty()) text += ", ";
      text += d.name;
    });
    return text;
  }
  static void read(boost::json::value const& j, E& v, read_context& ctx) {
    if (!j.is_string()) {
      ctx.error("expected one of " + names() + ", got " + detail::describe_json(j));
      return;
    }
    std::string_view name = j.get_string();
    bool found = false;
    boost::mp11::mp_for_each<boost::describe::describe_enumerators<E>>([&](auto d) {
      if (!found && name == d.name) {
        v = d.value;
        found = true;
      }
    });
    if (!found) ctx.error("must be one of " + names() + ", got " + detail::show(name));
  }
  static boost::json::value write(E v) {
    boost::json::value out = static_cast<std::int64_t>(v);
    boost::mp11::mp_for_each<boost::describe::describe_enumerators<E>>([&](auto d) {
      if (v == d.value) out = d.name;
    });
    return out;
  }
  static std::string type_name() { return std::string(detail::type_name<E>()); }
  static void schema(boost::json::object& s) {
    s["type"] = "string";
    boost::json::array list;
    boost::mp11::mp_for_each<boost::describe::describe_enumerators<E>>([&](auto d) { list.emplace_back(d.name); });
    s["enum"] = std::move(list);
  }
};

template <class U> struct value_traits<std::optional<U>> : detail::container_traits<std::optional<U>> {};
template <class U> struct value_traits<std::vector<U>> : detail::container_traits<std::vector<U>> {};
template <class U, class C, class A> struct value_traits<std::map<std::string, U, C, A>>
    : detail::container_traits<std::map<std::string, U, C, A>> {};

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/config/impl/value.ipp>
#endif

// The containers' traits above use the type operations of reflect.hpp (which includes this header).
#include <cairn/config/reflect.hpp>
