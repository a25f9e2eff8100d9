#pragma once

#include <cstdint>
#include <optional>

namespace cairn::io::detail {

/// a * b, or nothing when it does not fit in 64 bits.
constexpr std::optional<std::uint64_t> checked_multiply(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

/// a + b, or nothing when it does not fit in 64 bits.
constexpr std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

} // namespace cairn::io::detail
