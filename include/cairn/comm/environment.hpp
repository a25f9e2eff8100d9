#pragma once

// The torchrun convention for distributed runs: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT. No libtorch.

#include <cairn/detail/decl.hpp>
#include <cairn/error.hpp>

#include <boost/describe/enum.hpp>

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
CAIRN_DECL std::optional<std::string> variable(char const* name);

template <class T> T number(char const* name, std::string const& text, long long low, long long high) {
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < low || value > high)
    throw comm_error(comm_errc::environment, "environment variable " + std::string(name) + "=" + text +
                                                 " must be an integer in [" + std::to_string(low) + ", " +
                                                 std::to_string(high) + "]");
  return static_cast<T>(value);
}
} // namespace detail

/// Reads the torchrun variables. RANK and WORLD_SIZE, and MASTER_ADDR and MASTER_PORT when the
/// world has more than one process, are required: a missing or malformed one is an error naming it.
CAIRN_DECL distributed_environment read_environment();

/// The environment of this process: the torchrun variables when a launcher set them (WORLD_SIZE
/// is set), else one process alone.
inline distributed_environment environment_or_single() {
  return detail::variable("WORLD_SIZE") ? read_environment() : distributed_environment{};
}

/// The CUDA device a rank uses: its LOCAL_RANK among the `visible` devices (NCCL puts one rank on
/// each GPU). An error says why there is none.
CAIRN_DECL int cuda_device_for(distributed_environment const& env, int visible);

/// The collective backends a program can ask for.
enum class backend {
  auto_, ///< "auto": NCCL for CUDA tensors when cairn was built with it, else Gloo
  gloo,  ///< CPU collectives; CUDA tensors travel through host memory
  nccl,  ///< GPU collectives; needs CUDA tensors and CAIRN_WITH_NCCL
};
BOOST_DESCRIBE_ENUM(backend, auto_, gloo, nccl)

/// What `requested` means for a run on `cuda` (or CPU) tensors with NCCL built in or not: gloo or
/// nccl, or an error saying why NCCL cannot be had.
CAIRN_DECL backend resolve_backend(backend requested, bool cuda, bool nccl_built);

/// Whether this program was compiled with cairn's NCCL backend.
inline constexpr bool built_with_nccl =
#ifdef CAIRN_WITH_NCCL
    true;
#else
    false;
#endif

} // namespace cairn::comm

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/comm/impl/environment.ipp>
#endif
