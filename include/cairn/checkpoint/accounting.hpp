#pragma once

// What this process's loads have read of checkpoint files: the account behind "each rank reads
// only what it needs". A program takes one reading before a load and one after, and subtracts.

#include <atomic>
#include <cstdint>

namespace cairn {

/// Bytes read from checkpoint files by loads (every format), counted as they are read.
struct read_accounting {
  /// Bytes of tensors read: copied, converted, or hashed to check them (a tensor whose checksum
  /// is checked is read whole, whatever part of it the rank needs).
  std::uint64_t tensor_bytes = 0;
  std::uint64_t header_bytes = 0; ///< bytes of safetensors headers read (length and JSON)
  std::uint64_t files = 0;        ///< safetensors files opened

  [[nodiscard]] read_accounting operator-(read_accounting const& earlier) const noexcept {
    return {tensor_bytes - earlier.tensor_bytes, header_bytes - earlier.header_bytes, files - earlier.files};
  }
};

namespace detail {
struct read_counters {
  std::atomic<std::uint64_t> tensor_bytes{0}, header_bytes{0}, files{0};
};
inline read_counters& read_counts() noexcept {
  static read_counters counts;
  return counts;
}
} // namespace detail

/// What loads in this process have read so far.
[[nodiscard]] inline read_accounting bytes_read() noexcept {
  auto const& c = detail::read_counts();
  return {c.tensor_bytes.load(std::memory_order_relaxed), c.header_bytes.load(std::memory_order_relaxed),
          c.files.load(std::memory_order_relaxed)};
}

} // namespace cairn
