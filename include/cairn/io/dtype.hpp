#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace cairn::io {

/// Element types of safetensors files, with the names the format uses.
enum class dtype { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL, F8_E4M3, F8_E5M2, U64, U32, U16 };

inline constexpr std::array<dtype, 15> all_dtypes{dtype::F64,     dtype::F32,     dtype::F16, dtype::BF16, dtype::I64,
                                                  dtype::I32,     dtype::I16,     dtype::I8,  dtype::U8,   dtype::BOOL,
                                                  dtype::F8_E4M3, dtype::F8_E5M2, dtype::U64, dtype::U32,  dtype::U16};

/// The name in a safetensors header: "F32", "BF16", …
constexpr std::string_view name(dtype t) noexcept {
  switch (t) {
  case dtype::F64:
    return "F64";
  case dtype::F32:
    return "F32";
  case dtype::F16:
    return "F16";
  case dtype::BF16:
    return "BF16";
  case dtype::I64:
    return "I64";
  case dtype::I32:
    return "I32";
  case dtype::I16:
    return "I16";
  case dtype::I8:
    return "I8";
  case dtype::U8:
    return "U8";
  case dtype::BOOL:
    return "BOOL";
  case dtype::F8_E4M3:
    return "F8_E4M3";
  case dtype::F8_E5M2:
    return "F8_E5M2";
  case dtype::U64:
    return "U64";
  case dtype::U32:
    return "U32";
  case dtype::U16:
    return "U16";
  }
  return "?";
}

/// Bytes per element.
constexpr std::size_t size_of(dtype t) noexcept {
  switch (t) {
  case dtype::F64:
  case dtype::I64:
  case dtype::U64:
    return 8;
  case dtype::F32:
  case dtype::I32:
  case dtype::U32:
    return 4;
  case dtype::F16:
  case dtype::BF16:
  case dtype::I16:
  case dtype::U16:
    return 2;
  default:
    return 1;
  }
}

constexpr bool is_floating(dtype t) noexcept {
  return t == dtype::F64 || t == dtype::F32 || t == dtype::F16 || t == dtype::BF16 || t == dtype::F8_E4M3 ||
         t == dtype::F8_E5M2;
}

/// The dtype named `text`, if there is one.
constexpr std::optional<dtype> parse_dtype(std::string_view text) noexcept {
  for (auto t : all_dtypes)
    if (name(t) == text) return t;
  return std::nullopt;
}

} // namespace cairn::io
