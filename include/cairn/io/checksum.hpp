#pragma once

// Checksums of tensor bytes: XXH3 (64-bit) from xxHash, compiled inline so that cairn stays
// header-only. XXH3 hashes at memory bandwidth on one core, so a save is not slowed by it.
//
// Inline, xxHash is compiled for the build's baseline (SSE2 on x86-64). With CAIRN_XXHASH_DISPATCH
// (set by cairn's CMake targets where the xxHash library has it) the bulk of the hashing goes
// through the library's runtime dispatch instead, which picks AVX2 or AVX-512 where the CPU has
// them: about twice as fast on data in cache. Every variant gives the same hash.

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#if defined(CAIRN_XXHASH_DISPATCH) && (defined(__GNUC__) || defined(__clang__))
#define CAIRN_DETAIL_XXHASH_DISPATCH 1
namespace cairn::io::detail {
// The library's entry points under names of cairn's own (an asm label), so that they cannot clash
// with a declaration from <xxh_x86dispatch.h> in the same program; the state is the inline one,
// laid out as the library's (one package, one version).
int xxh3_update_dispatch(void* state, void const* input, std::size_t length) noexcept
    __asm__("XXH3_64bits_update_dispatch");
std::uint64_t xxh3_dispatch(void const* input, std::size_t length) noexcept __asm__("XXH3_64bits_dispatch");
} // namespace cairn::io::detail
#endif

namespace cairn::io {

/// XXH3-64 of some bytes, fed in pieces.
class checksum {
public:
  checksum() { XXH3_64bits_reset(&state_); }

  void update(std::span<std::byte const> bytes) noexcept {
#ifdef CAIRN_DETAIL_XXHASH_DISPATCH
    detail::xxh3_update_dispatch(&state_, bytes.data(), bytes.size());
#else
    XXH3_64bits_update(&state_, bytes.data(), bytes.size());
#endif
  }
  [[nodiscard]] std::uint64_t value() const noexcept { return XXH3_64bits_digest(&state_); }

private:
  XXH3_state_t state_{};
};

inline std::uint64_t checksum_of(std::span<std::byte const> bytes) noexcept {
#ifdef CAIRN_DETAIL_XXHASH_DISPATCH
  return detail::xxh3_dispatch(bytes.data(), bytes.size());
#else
  return XXH3_64bits(bytes.data(), bytes.size());
#endif
}

/// 16 lowercase hex digits, as stored in a file's metadata.
inline std::string to_hex(std::uint64_t value) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string text(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) text[static_cast<std::size_t>(i)] = digits[value & 0xf];
  return text;
}

inline std::optional<std::uint64_t> from_hex(std::string_view text) noexcept {
  if (text.size() != 16) return std::nullopt;
  std::uint64_t value = 0;
  for (char c : text) {
    int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) return std::nullopt;
    value = (value << 4) | static_cast<std::uint64_t>(digit);
  }
  return value;
}

} // namespace cairn::io
