#pragma once

#include <cairn/config/detail/show.hpp>

#include <boost/json/object.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

/// Checks attached to config fields. Each is a small value: it tests a field's value
/// (returning the reason it fails, or nothing), describes itself for documentation, and
/// adds its bounds to the JSON Schema. Checks on a `std::optional` field apply to the
/// contained value and are skipped while it is unset, except `check::is_set`.
namespace cairn::check {

namespace detail {
using cairn::detail::less;
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

template <relation R, class Bound> struct compare {
  Bound value;

  template <class V>
  requires std::is_arithmetic_v<V> &&(!std::is_same_v<V, bool>)std::optional<std::string> operator()(V const& v) const {
    bool ok = R == relation::greater    ? less(value, v)
              : R == relation::at_least ? !less(v, value)
              : R == relation::less     ? less(v, value)
                                        : !less(value, v);
    if (ok) return std::nullopt;
    return "must be " + describe() + ", got " + show(v);
  }
  std::string describe() const {
    constexpr char const* op = R == relation::greater    ? "> "
                               : R == relation::at_least ? ">= "
                               : R == relation::less     ? "< "
                                                         : "<= ";
    return op + show(value);
  }
  void add_schema(boost::json::object& schema) const {
    constexpr char const* key = R == relation::greater    ? "exclusiveMinimum"
                                : R == relation::at_least ? "minimum"
                                : R == relation::less     ? "exclusiveMaximum"
                                                          : "maximum";
    schema[key] = value;
  }
};

template <class Bound> struct in_range_t {
  Bound low, high;

  template <class V>
  requires std::is_arithmetic_v<V> &&(!std::is_same_v<V, bool>)std::optional<std::string> operator()(V const& v) const {
    if (!less(v, low) && !less(high, v)) return std::nullopt;
    return "must be " + describe() + ", got " + show(v);
  }
  std::string describe() const { return "in [" + show(low) + ", " + show(high) + "]"; }
  void add_schema(boost::json::object& schema) const {
    schema["minimum"] = low;
    schema["maximum"] = high;
  }
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
  void add_schema(boost::json::object& schema) const {
    boost::json::array list;
    for (auto const& v : values) {
      if constexpr (std::is_same_v<T, std::string_view>)
        list.emplace_back(boost::json::string_view(v.data(), v.size()));
      else
        list.emplace_back(v);
    }
    schema["enum"] = std::move(list);
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
  static void add_schema(boost::json::object& schema) {
    auto type = schema.if_contains("type");
    if (type && type->is_string() && type->as_string() == "array")
      schema["minItems"] = 1;
    else if (type && type->is_string() && type->as_string() == "object")
      schema["minProperties"] = 1;
    else
      schema["minLength"] = 1;
  }
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
