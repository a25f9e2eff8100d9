#pragma once

// What names a writer of an experiment's saves: when it took the experiment and a random name of
// its own (the lock's holder, a store's save generations). No libtorch.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

namespace cairn::detail {

/// The time now, in unix milliseconds.
inline std::int64_t unix_milliseconds() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// 8 random hexadecimal digits: a writer's name.
inline std::string random_writer_name() {
  std::random_device random;
  char text[16];
  std::snprintf(text, sizeof text, "%08x", static_cast<unsigned>(random()));
  return text;
}

} // namespace cairn::detail
