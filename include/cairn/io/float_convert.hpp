#pragma once

#include <cairn/detail/decl.hpp>
#include <cairn/error.hpp>
#include <cairn/io/dtype.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace cairn::io {

/// float to bfloat16, rounding to nearest even; NaN stays NaN.
constexpr std::uint16_t float_to_bfloat16(float value) noexcept {
  auto bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

constexpr float bfloat16_to_float(std::uint16_t value) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(value) << 16);
}

/// float to IEEE half, rounding to nearest even; overflow goes to infinity, NaN stays NaN.
constexpr std::uint16_t float_to_half(float value) noexcept {
  auto bits = std::bit_cast<std::uint32_t>(value);
  auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  auto magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u); // rounds to infinity
  if (magnitude < 0x38800000u) {                                                   // subnormal or zero in half
    if (magnitude < 0x33000000u) return sign;                                      // below half the smallest
    auto exponent = magnitude >> 23;
    auto mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    auto shift = 126u - exponent; // 14 + (127 - 1 - exponent)... aligns to the subnormal scale
    auto half = mantissa >> shift;
    auto remainder = mantissa & ((1u << shift) - 1u);
    auto halfway = 1u << (shift - 1u);
    if (remainder > halfway || (remainder == halfway && (half & 1u))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  auto rebased = magnitude - 0x38000000u; // exponent bias 127 -> 15
  auto half = rebased >> 13;
  auto remainder = rebased & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (half & 1u))) ++half;
  return static_cast<std::uint16_t>(sign | half);
}

constexpr float half_to_float(std::uint16_t value) noexcept {
  std::uint32_t sign = static_cast<std::uint32_t>(value & 0x8000u) << 16;
  std::uint32_t exponent = (value >> 10) & 0x1fu;
  std::uint32_t mantissa = value & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return std::bit_cast<float>(sign);
    // Subnormal: normalise.
    exponent = 113; // 127 - 15 + 1
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    mantissa &= 0x3ffu;
    return std::bit_cast<float>(sign | (exponent << 23) | (mantissa << 13));
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

/// Whether `convert` can turn `from` into `to`: the same type, or two of F64, F32, F16, BF16.
constexpr bool convertible(dtype from, dtype to) noexcept {
  auto plain_float = [](dtype t) { return t == dtype::F64 || t == dtype::F32 || t == dtype::F16 || t == dtype::BF16; };
  return from == to || (plain_float(from) && plain_float(to));
}

namespace detail {
CAIRN_DECL double load_float(std::byte const* p, dtype t) noexcept;

CAIRN_DECL void store_float(std::byte* p, dtype t, double value) noexcept;
} // namespace detail

/// Converts elements of `from` in `source` into elements of `to` in `target` (sized for the
/// same count). Conversions from F64 to a 16-bit type round through F32.
CAIRN_DECL void convert(std::span<std::byte const> source, dtype from, std::span<std::byte> target, dtype to);

} // namespace cairn::io

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/io/impl/float_convert.ipp>
#endif
