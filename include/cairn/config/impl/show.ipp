// Definitions of <cairn/config/detail/show.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/config/detail/show.hpp>

#include <charconv>
#include <system_error>

namespace cairn::detail {

template <class V> std::string shown_number(V value) {
  char buffer[32];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

template <class V> std::string shown_floating(V value) {
  char shortest[64], fixed[64];
  auto s = std::to_chars(shortest, shortest + sizeof shortest, value);
  auto f = std::to_chars(fixed, fixed + sizeof fixed, value, std::chars_format::fixed);
  if (f.ec == std::errc() && f.ptr - fixed <= 20) return std::string(fixed, f.ptr);
  return std::string(shortest, s.ptr);
}

CAIRN_DECL std::string show_integer(long long value) { return shown_number(value); }
CAIRN_DECL std::string show_unsigned(unsigned long long value) { return shown_number(value); }
CAIRN_DECL std::string show_double(double value) { return shown_floating(value); }
CAIRN_DECL std::string show_float(float value) { return shown_floating(value); }

} // namespace cairn::detail
