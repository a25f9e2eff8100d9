#pragma once

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
inline double load_float(std::byte const* p, dtype t) noexcept {
  switch (t) {
  case dtype::F64: {
    double v;
    std::memcpy(&v, p, 8);
    return v;
  }
  case dtype::F32: {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  default: {
    std::uint16_t v;
    std::memcpy(&v, p, 2);
    return t == dtype::F16 ? half_to_float(v) : bfloat16_to_float(v);
  }
  }
}

inline void store_float(std::byte* p, dtype t, double value) noexcept {
  switch (t) {
  case dtype::F64:
    std::memcpy(p, &value, 8);
    return;
  case dtype::F32: {
    auto v = static_cast<float>(value);
    std::memcpy(p, &v, 4);
    return;
  }
  default: {
    auto f = static_cast<float>(value);
    std::uint16_t v = t == dtype::F16 ? float_to_half(f) : float_to_bfloat16(f);
    std::memcpy(p, &v, 2);
  }
  }
}
} // namespace detail

/// Converts elements of `from` in `source` into elements of `to` in `target` (sized for the
/// same count). Conversions from F64 to a 16-bit type round through F32.
inline void convert(std::span<std::byte const> source, dtype from, std::span<std::byte> target, dtype to) {
  if (!convertible(from, to)) throw error("cannot convert " + std::string(name(from)) + " to " + std::string(name(to)));
  auto count = source.size() / size_of(from);
  if (source.size() % size_of(from) != 0 || target.size() != count * size_of(to))
    throw error("conversion buffers do not hold whole elements of the same count");
  if (from == to) {
    std::memcpy(target.data(), source.data(), source.size());
    return;
  }
  auto in = size_of(from), out = size_of(to);
  if (from == dtype::F32 && to == dtype::BF16) { // the common case, without the double round trip
    for (std::size_t i = 0; i < count; ++i) {
      float v;
      std::memcpy(&v, source.data() + i * 4, 4);
      auto b = float_to_bfloat16(v);
      std::memcpy(target.data() + i * 2, &b, 2);
    }
    return;
  }
  for (std::size_t i = 0; i < count; ++i)
    detail::store_float(target.data() + i * out, to, detail::load_float(source.data() + i * in, from));
}

} // namespace cairn::io
