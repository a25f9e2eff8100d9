#pragma once

// A checksum computed on a thread of its own, beside the copy or the write of the same bytes.

#include <cairn/io/checksum.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <thread>

namespace cairn::io::detail {

/// Hashes bytes on a thread of its own while the caller copies them, so that a verified load
/// costs what an unverified one does where a core is free. The caller says how much is ready
/// (`ready`) as it goes; `value()` waits for the hash of all of it. Small inputs are hashed on
/// the caller's thread, where a thread would cost more than it saves.
///
/// Between pieces the hashing thread spins a little before it sleeps: a piece lands every
/// hundred microseconds or so, and a sleep and a wake-up per piece (two system calls and a
/// context switch) cost a verified load a tenth of its speed. The caller wakes it only when it
/// sleeps.
class background_hash {
public:
  static constexpr std::size_t threshold = std::size_t{4} << 20;

  /// `bytes` will be ready in order; `all_ready`: they are already.
  background_hash(std::span<std::byte const> bytes, bool all_ready)
      : bytes_(bytes), ready_(all_ready ? bytes.size() : 0) {
    if (bytes.size() >= threshold) worker_ = std::thread([this] { run(); });
  }
  background_hash(background_hash const&) = delete;
  background_hash& operator=(background_hash const&) = delete;
  ~background_hash() {
    if (worker_.joinable()) {
      stop_.store(true);
      ready_.store(bytes_.size());
      ready_.notify_one();
      worker_.join();
    }
  }

  /// The first `n` bytes are ready.
  void ready(std::size_t n) {
    if (!worker_.joinable()) return;
    // Sequentially consistent, with the worker's store to `sleeping_` and load of `ready_`:
    // either it sees `n` before it sleeps, or this sees it sleeping and wakes it.
    ready_.store(n);
    if (sleeping_.load()) ready_.notify_one();
  }

  /// The hash of all the bytes (all must have been made ready).
  std::uint64_t value() {
    if (!worker_.joinable()) {
      checksum hash;
      hash.update(bytes_);
      return hash.value();
    }
    ready(bytes_.size());
    worker_.join();
    return value_;
  }

private:
  static void pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  void run() {
    constexpr int spins_before_sleep = 4096; // a few hundred microseconds
    checksum hash;
    std::size_t done = 0;
    int spins = 0;
    while (done < bytes_.size() && !stop_.load(std::memory_order_relaxed)) {
      auto ready = ready_.load(std::memory_order_acquire);
      if (ready == done) {
        if (++spins < spins_before_sleep) {
          pause();
          continue;
        }
        sleeping_.store(true);
        if (ready_.load() == done) ready_.wait(done);
        sleeping_.store(false);
        continue;
      }
      spins = 0;
      hash.update(bytes_.subspan(done, ready - done));
      done = ready;
    }
    value_ = hash.value();
  }

  std::span<std::byte const> bytes_;
  std::atomic<std::size_t> ready_;
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> stop_{false};
  std::uint64_t value_ = 0;
  std::thread worker_;
};

} // namespace cairn::io::detail
