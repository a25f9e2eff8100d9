// Definitions of <cairn/comm/environment.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/comm/environment.hpp>
#include <cairn/error.hpp>

#include <boost/describe/enum.hpp>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace cairn::comm::detail {

CAIRN_DECL std::optional<std::string> variable(char const* name) {
  char const* value = std::getenv(name);
  return value ? std::optional<std::string>(value) : std::nullopt;
}

} // namespace cairn::comm::detail

namespace cairn::comm {

CAIRN_DECL distributed_environment read_environment() {
  auto required = [](char const* name) {
    auto value = detail::variable(name);
    if (!value)
      throw comm_error(comm_errc::environment, "environment variable " + std::string(name) +
                                                   " is not set (launch with `cairn launch` or torchrun)");
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

CAIRN_DECL int cuda_device_for(distributed_environment const& env, int visible) {
  auto devices = detail::variable("CUDA_VISIBLE_DEVICES");
  auto shown = devices ? " (CUDA_VISIBLE_DEVICES=" + *devices + ")" : std::string();
  if (visible <= 0)
    throw comm_error(comm_errc::environment, "rank " + std::to_string(env.rank) + ": no GPU is visible" + shown);
  if (env.local_rank >= visible)
    throw comm_error(comm_errc::environment,
                     "rank " + std::to_string(env.rank) + ": LOCAL_RANK=" + std::to_string(env.local_rank) + ", but " +
                         std::to_string(visible) + (visible == 1 ? " GPU is" : " GPUs are") + " visible" + shown +
                         "; NCCL needs a GPU of its own for each rank of a node");
  return env.local_rank;
}

CAIRN_DECL backend resolve_backend(backend requested, bool cuda, bool nccl_built) {
  switch (requested) {
  case backend::gloo:
    return backend::gloo;
  case backend::nccl:
    if (!nccl_built)
      throw comm_error(comm_errc::environment,
                       "comm=nccl, but cairn was built without NCCL (configure it with CAIRN_WITH_NCCL=ON)");
    if (!cuda) throw comm_error(comm_errc::environment, "comm=nccl needs CUDA tensors (device=cuda)");
    return backend::nccl;
  default:
    return cuda && nccl_built ? backend::nccl : backend::gloo;
  }
}

} // namespace cairn::comm
