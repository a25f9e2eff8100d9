#pragma once

#include <charconv>
#include <concepts>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

namespace cairn::detail {

/// A value as a user would write it in an error message: numbers plainly, strings quoted.
template <class V> std::string show(V const& value) {
  if constexpr (std::is_same_v<V, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_integral_v<V>) {
    char buffer[32];
    auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
    return std::string(buffer, result.ptr);
  } else if constexpr (std::is_floating_point_v<V>) {
    // The shortest text that reads back exactly, but 3000000000 rather than 3e+09.
    char shortest[64], fixed[64];
    auto s = std::to_chars(shortest, shortest + sizeof shortest, value);
    auto f = std::to_chars(fixed, fixed + sizeof fixed, value, std::chars_format::fixed);
    if (f.ec == std::errc() && f.ptr - fixed <= 20) return std::string(fixed, f.ptr);
    return std::string(shortest, s.ptr);
  } else if constexpr (std::is_convertible_v<V const&, std::string_view>) {
    std::string text = "\"";
    text += std::string_view(value);
    text += '"';
    return text;
  } else if constexpr (requires { value.lexically_normal().string(); }) { // a std::filesystem::path
    return show(value.string());
  } else {
    return "value";
  }
}

/// a < b for any two arithmetic values, exact for mixed signed and unsigned integers.
template <class A, class B> constexpr bool less(A const& a, B const& b) {
  if constexpr (std::integral<A> && std::integral<B>) {
    return std::cmp_less(a, b);
  } else {
    return static_cast<long double>(a) < static_cast<long double>(b);
  }
}

} // namespace cairn::detail
