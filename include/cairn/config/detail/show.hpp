#pragma once

#include <cairn/detail/decl.hpp>

#include <string>
#include <string_view>
#include <type_traits>

namespace cairn::detail {

CAIRN_DECL std::string show_integer(long long value);
CAIRN_DECL std::string show_unsigned(unsigned long long value);
/// The shortest text that reads back exactly, but 3000000000 rather than 3e+09.
CAIRN_DECL std::string show_double(double value);
CAIRN_DECL std::string show_float(float value);

/// A value as a user would write it in an error message: numbers plainly, strings quoted.
template <class V> std::string show(V const& value) {
  if constexpr (std::is_same_v<V, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_integral_v<V> && std::is_signed_v<V>) {
    return show_integer(value);
  } else if constexpr (std::is_integral_v<V>) {
    return show_unsigned(value);
  } else if constexpr (std::is_same_v<V, float>) {
    return show_float(value);
  } else if constexpr (std::is_floating_point_v<V>) {
    return show_double(static_cast<double>(value));
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

} // namespace cairn::detail

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/config/impl/show.ipp>
#endif
