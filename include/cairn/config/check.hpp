#pragma once

#include <cairn/config/detail/json_fwd.hpp>
#include <cairn/config/detail/show.hpp>
#include <cairn/detail/decl.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

/// Checks attached to config fields. Each is a small value: it tests a field's value
/// (returning the reason it fails, or nothing), describes itself for documentation, and
/// adds its bounds to the JSON Schema. Checks on a `std::optional` field apply to the
/// contained value and are skipped while it is unset, except `check::is_set`.
namespace cairn::check {

namespace detail {
using cairn::detail::show;

template <class Bound> constexpr auto bound(Bound b) {
  if constexpr (std::is_integral_v<Bound> && std::is_signed_v<Bound>) {
    return static_cast<long long>(b);
  } else if constexpr (std::is_integral_v<Bound>) {
    return static_cast<unsigned long long>(b);
  } else {
    return static_cast<double>(b);
  }
}

enum class relation { greater, at_least, less, at_most };

/// A bound or a checked value, as one of four kinds of number: the ordinary functions below
/// compare (exactly, across kinds), show and describe it.
struct number {
  enum class kind : unsigned char { signed_integer, unsigned_integer, float32, float64 };
  kind type;
  long long i;
  unsigned long long u;
  long double x;
};
template <class V> constexpr number as_number(V v) {
  if constexpr (std::is_integral_v<V> && std::is_signed_v<V>)
    return {number::kind::signed_integer, v, 0, 0};
  else if constexpr (std::is_integral_v<V>)
    return {number::kind::unsigned_integer, 0, v, 0};
  else if constexpr (std::is_same_v<V, float>)
    return {number::kind::float32, 0, 0, v};
  else
    return {number::kind::float64, 0, 0, v};
}

CAIRN_DECL std::string show_number(number const& n);
/// Why `value` fails `value R bound`, or nothing.
CAIRN_DECL std::optional<std::string> test_relation(relation r, number const& bound, number const& value);
CAIRN_DECL std::string describe_relation(relation r, number const& bound);
CAIRN_DECL void schema_relation(boost::json::object& schema, relation r, number const& bound);
/// Why `value` lies outside [low, high], or nothing.
CAIRN_DECL std::optional<std::string> test_range(number const& low, number const& high, number const& value);
CAIRN_DECL std::string describe_range(number const& low, number const& high);
CAIRN_DECL void schema_range(boost::json::object& schema, number const& low, number const& high);

// What the other checks add to a JSON Schema.
CAIRN_DECL void schema_enum(boost::json::object& schema, std::span<std::string_view const> values);
CAIRN_DECL void schema_enum(boost::json::object& schema, std::span<long long const> values);
CAIRN_DECL void schema_enum(boost::json::object& schema, std::span<unsigned long long const> values);
CAIRN_DECL void schema_enum(boost::json::object& schema, std::span<double const> values);
/// `minItems`, `minProperties` or `minLength`, as the schema's type says.
CAIRN_DECL void schema_non_empty(boost::json::object& schema);

template <relation R, class Bound> struct compare {
  Bound value;

  template <class V>
  requires std::is_arithmetic_v<V> &&(!std::is_same_v<V, bool>)std::optional<std::string> operator()(V const& v) const {
    return test_relation(R, as_number(value), as_number(v));
  }
  std::string describe() const { return describe_relation(R, as_number(value)); }
  void add_schema(boost::json::object& schema) const { schema_relation(schema, R, as_number(value)); }
};

template <class Bound> struct in_range_t {
  Bound low, high;

  template <class V>
  requires std::is_arithmetic_v<V> &&(!std::is_same_v<V, bool>)std::optional<std::string> operator()(V const& v) const {
    return test_range(as_number(low), as_number(high), as_number(v));
  }
  std::string describe() const { return describe_range(as_number(low), as_number(high)); }
  void add_schema(boost::json::object& schema) const { schema_range(schema, as_number(low), as_number(high)); }
};

template <class T, std::size_t N> struct one_of_t {
  std::array<T, N> values;

  template <class V>
  requires std::equality_comparable_with<V, T> std::optional<std::string>
  operator()(V const& v) const {
    for (auto const& candidate : values)
      if (v == candidate) return std::nullopt;
    return "must be " + describe() + ", got " + show(v);
  }
  std::string describe() const {
    std::string text = "one of ";
    for (std::size_t i = 0; i < N; ++i) text += (i ? ", " : "") + show(values[i]);
    return text;
  }
  /// The values as a JSON Schema `enum`, when they are strings or numbers.
  void add_schema(boost::json::object& schema) const {
    if constexpr (std::is_same_v<T, std::string_view>) {
      schema_enum(schema, std::span<T const>(values));
    } else if constexpr (std::is_arithmetic_v<T>) {
      using item = decltype(bound(T{}));
      std::array<item, N> list;
      for (std::size_t i = 0; i < N; ++i) list[i] = item(values[i]);
      schema_enum(schema, std::span<item const>(list));
    }
  }
};

struct non_empty_t {
  template <class V>
  requires requires(V const& v) { v.empty(); }
  std::optional<std::string> operator()(V const& v) const {
    if (!v.empty()) return std::nullopt;
    return std::string("must not be empty");
  }
  static std::string describe() { return "non-empty"; }
  static void add_schema(boost::json::object& schema) { schema_non_empty(schema); }
};

struct is_set_t {
  template <class U> std::optional<std::string> operator()(std::optional<U> const& v) const {
    if (v) return std::nullopt;
    return std::string("must be set");
  }
  static std::string describe() { return "required"; }
  static void add_schema(boost::json::object&) {}
};

template <class Predicate> struct satisfies_t {
  Predicate predicate;
  std::string_view requirement;

  template <class V>
  requires std::is_invocable_r_v<bool, Predicate const&, V const&> std::optional<std::string>
  operator()(V const& v) const {
    if (predicate(v)) return std::nullopt;
    std::string text(requirement);
    if constexpr (std::is_arithmetic_v<V> || std::is_convertible_v<V const&, std::string_view>)
      text += ", got " + show(v);
    return text;
  }
  std::string describe() const { return std::string(requirement); }
  static void add_schema(boost::json::object&) {}
};

template <class T> constexpr auto element(T v) {
  if constexpr (std::is_convertible_v<T, std::string_view>)
    return std::string_view(v);
  else
    return v;
}
} // namespace detail

/// The value must be greater than `bound`.
template <class B> constexpr auto greater(B bound) {
  return detail::compare<detail::relation::greater, decltype(detail::bound(bound))>{detail::bound(bound)};
}
/// The value must be at least `bound`.
template <class B> constexpr auto at_least(B bound) {
  return detail::compare<detail::relation::at_least, decltype(detail::bound(bound))>{detail::bound(bound)};
}
/// The value must be less than `bound`.
template <class B> constexpr auto less(B bound) {
  return detail::compare<detail::relation::less, decltype(detail::bound(bound))>{detail::bound(bound)};
}
/// The value must be at most `bound`.
template <class B> constexpr auto at_most(B bound) {
  return detail::compare<detail::relation::at_most, decltype(detail::bound(bound))>{detail::bound(bound)};
}
/// The value must lie in [low, high].
template <class B> constexpr auto in_range(B low, B high) {
  return detail::in_range_t<decltype(detail::bound(low))>{detail::bound(low), detail::bound(high)};
}
/// The value must equal one of the given values: `check::one_of("adam", "sgd")`.
template <class First, class... Rest> constexpr auto one_of(First first, Rest... rest) {
  using T = decltype(detail::element(first));
  return detail::one_of_t<T, 1 + sizeof...(Rest)>{{detail::element(first), T(detail::element(rest))...}};
}
/// The value must satisfy `predicate`; `requirement` says how, as in "must be a power of two".
template <class Predicate> constexpr auto satisfies(Predicate predicate, std::string_view requirement) {
  return detail::satisfies_t<Predicate>{predicate, requirement};
}

inline constexpr auto positive = greater(0);
inline constexpr auto non_negative = at_least(0);
inline constexpr detail::non_empty_t non_empty{};
/// For a `std::optional` field that must be given.
inline constexpr detail::is_set_t is_set{};

} // namespace cairn::check

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/config/impl/check.ipp>
#endif
