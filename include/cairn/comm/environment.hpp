#pragma once

// The torchrun convention for distributed runs: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT. No libtorch.

#include <cairn/error.hpp>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace cairn::comm {

/// Where this process sits in a distributed run.
struct distributed_environment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  std::uint16_t master_port = 0;
};

namespace detail {
inline std::optional<std::string> variable(char const* name) {
  char const* value = std::getenv(name);
  return value ? std::optional<std::string>(value) : std::nullopt;
}

template <class T> T number(char const* name, std::string const& text, long long low, long long high) {
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < low || value > high)
    throw error("environment variable " + std::string(name) + "=" + text + " must be an integer in [" +
                std::to_string(low) + ", " + std::to_string(high) + "]");
  return static_cast<T>(value);
}
} // namespace detail

/// Reads the torchrun variables. RANK and WORLD_SIZE, and MASTER_ADDR and MASTER_PORT when the
/// world has more than one process, are required: a missing or malformed one is an error naming it.
inline distributed_environment read_environment() {
  auto required = [](char const* name) {
    auto value = detail::variable(name);
    if (!value)
      throw error("environment variable " + std::string(name) + " is not set (launch with `cairn launch` or torchrun)");
    return *value;
  };
  distributed_environment env;
  env.world_size = detail::number<int>("WORLD_SIZE", required("WORLD_SIZE"), 1, 1 << 20);
  env.rank = detail::number<int>("RANK", required("RANK"), 0, env.world_size - 1);
  if (auto local = detail::variable("LOCAL_RANK"))
    env.local_rank = detail::number<int>("LOCAL_RANK", *local, 0, 1 << 20);
  if (env.world_size > 1) {
    env.master_addr = required("MASTER_ADDR");
    env.master_port = detail::number<std::uint16_t>("MASTER_PORT", required("MASTER_PORT"), 1, 65535);
  }
  return env;
}

} // namespace cairn::comm
