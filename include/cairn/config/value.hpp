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

template <class V> std::string integer_name() {
  return (std::is_signed_v<V> ? "int" : "uint") + std::to_string(8 * sizeof(V));
}

CAIRN_DECL boost::json::value string_value(std::string_view s);

} // namespace detail

template <> struct value_traits<bool> {
  static void read(boost::json::value const& j, bool& v, read_context& ctx) {
    if (j.is_bool())
      v = j.get_bool();
    else
      ctx.error("expected a boolean, got " + detail::describe_json(j));
  }
  static boost::json::value write(bool v) { return v; }
  static std::string type_name() { return "bool"; }
  static void schema(boost::json::object& s) { s["type"] = "boolean"; }
};

template <class V>
requires std::integral<V> &&(!std::is_same_v<V, bool>)&&(!std::is_same_v<V, char>)struct value_traits<V> {
  static void read(boost::json::value const& j, V& v, read_context& ctx) {
    using limits = std::numeric_limits<V>;
    auto out_of_range = [&](std::string const& shown) {
      ctx.error(shown + " is out of range for " + type_name() + " [" + detail::show(limits::min()) + ", " +
                detail::show(limits::max()) + "]");
    };
    if (j.is_int64()) {
      auto x = j.get_int64();
      if (std::in_range<V>(x))
        v = static_cast<V>(x);
      else
        out_of_range(detail::show(x));
    } else if (j.is_uint64()) {
      auto x = j.get_uint64();
      if (std::in_range<V>(x))
        v = static_cast<V>(x);
      else
        out_of_range(detail::show(x));
    } else if (j.is_double()) {
      double x = j.get_double();
      if (std::trunc(x) != x) {
        ctx.error("expected an integer, got " + detail::describe_json(j));
      } else if (static_cast<long double>(x) < static_cast<long double>(limits::min()) ||
                 static_cast<long double>(x) > static_cast<long double>(limits::max())) {
        out_of_range(detail::show(x));
      } else {
        v = static_cast<V>(x);
      }
    } else {
      ctx.error("expected an integer, got " + detail::describe_json(j));
    }
  }
  static boost::json::value write(V v) {
    if constexpr (std::is_signed_v<V>)
      return static_cast<std::int64_t>(v);
    else
      return static_cast<std::uint64_t>(v);
  }
  static std::string type_name() { return detail::integer_name<V>(); }
  static void schema(boost::json::object& s) {
    s["type"] = "integer";
    if constexpr (sizeof(V) < 8) {
      s["minimum"] = static_cast<std::int64_t>(std::numeric_limits<V>::min());
      s["maximum"] = static_cast<std::int64_t>(std::numeric_limits<V>::max());
    } else if constexpr (std::is_unsigned_v<V>) {
      s["minimum"] = 0;
    }
  }
};

template <std::floating_point V> struct value_traits<V> {
  static void read(boost::json::value const& j, V& v, read_context& ctx) {
    if (j.is_number())
      v = static_cast<V>(j.to_number<double>());
    else
      ctx.error("expected a number, got " + detail::describe_json(j));
  }
  static boost::json::value write(V v) { return static_cast<double>(v); }
  static std::string type_name() { return "float" + std::to_string(8 * sizeof(V)); }
  static void schema(boost::json::object& s) { s["type"] = "number"; }
};

template <> struct value_traits<std::string> {
  static constexpr bool textual = true;
  static void read(boost::json::value const& j, std::string& v, read_context& ctx) {
    if (j.is_string())
      v = std::string_view(j.get_string());
    else
      ctx.error("expected a string, got " + detail::describe_json(j));
  }
  static boost::json::value write(std::string const& v) { return detail::string_value(v); }
  static std::string type_name() { return "string"; }
  static void schema(boost::json::object& s) { s["type"] = "string"; }
};

template <> struct value_traits<std::filesystem::path> {
  static constexpr bool textual = true;
  static void read(boost::json::value const& j, std::filesystem::path& v, read_context& ctx) {
    if (j.is_string())
      v = std::string_view(j.get_string());
    else
      ctx.error("expected a path (string), got " + detail::describe_json(j));
  }
  static boost::json::value write(std::filesystem::path const& v) { return detail::string_value(v.string()); }
  static std::string type_name() { return "path"; }
  static void schema(boost::json::object& s) { s["type"] = "string"; }
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

template <class U> struct value_traits<std::optional<U>> {
  static void read(boost::json::value const& j, std::optional<U>& v, read_context& ctx) {
    if (j.is_null()) {
      v.reset();
      return;
    }
    U inner{};
    auto errors = ctx.errors().size();
    value_traits<U>::read(j, inner, ctx);
    if (ctx.errors().size() == errors) v = std::move(inner);
  }
  static boost::json::value write(std::optional<U> const& v) {
    return v ? value_traits<U>::write(*v) : boost::json::value(nullptr);
  }
  static std::string type_name() { return "optional<" + value_traits<U>::type_name() + ">"; }
  static void schema(boost::json::object& s) {
    boost::json::object inner;
    value_traits<U>::schema(inner);
    if (auto* list = inner.if_contains("enum"); list && list->is_array()) list->as_array().emplace_back(nullptr);
    if (auto* type = inner.if_contains("type"); type && type->is_string() && !inner.contains("properties")) {
      boost::json::array both{*type, "null"};
      inner["type"] = std::move(both);
      for (auto& entry : inner) s[entry.key()] = entry.value();
    } else {
      s["anyOf"] = boost::json::array{std::move(inner), boost::json::object{{"type", "null"}}};
    }
  }
};

template <class U> struct value_traits<std::vector<U>> {
  static void read(boost::json::value const& j, std::vector<U>& v, read_context& ctx) {
    if (!j.is_array()) {
      ctx.error("expected an array, got " + detail::describe_json(j));
      return;
    }
    auto const& array = j.get_array();
    v.assign(array.size(), U{});
    for (std::size_t i = 0; i < array.size(); ++i) {
      auto scope = ctx.enter(i);
      value_traits<U>::read(array[i], v[i], ctx);
    }
  }
  static boost::json::value write(std::vector<U> const& v) {
    boost::json::array out;
    out.reserve(v.size());
    for (auto const& x : v) out.push_back(value_traits<U>::write(x));
    return out;
  }
  static std::string type_name() { return "list<" + value_traits<U>::type_name() + ">"; }
  static void schema(boost::json::object& s) {
    s["type"] = "array";
    boost::json::object items;
    value_traits<U>::schema(items);
    s["items"] = std::move(items);
  }
};

template <class U, class C, class A> struct value_traits<std::map<std::string, U, C, A>> {
  using map_type = std::map<std::string, U, C, A>;
  static void read(boost::json::value const& j, map_type& v, read_context& ctx) {
    if (!j.is_object()) {
      ctx.error("expected an object, got " + detail::describe_json(j));
      return;
    }
    v.clear();
    for (auto const& entry : j.get_object()) {
      auto scope = ctx.enter(entry.key());
      value_traits<U>::read(entry.value(), v[std::string(entry.key())], ctx);
    }
  }
  static boost::json::value write(map_type const& v) {
    boost::json::object out;
    for (auto const& [key, value] : v) out[key] = value_traits<U>::write(value);
    return out;
  }
  static std::string type_name() { return "map<string, " + value_traits<U>::type_name() + ">"; }
  static void schema(boost::json::object& s) {
    s["type"] = "object";
    boost::json::object values;
    value_traits<U>::schema(values);
    s["additionalProperties"] = std::move(values);
  }
};

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/config/impl/value.ipp>
#endif
