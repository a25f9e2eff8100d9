// Definitions of <cairn/comm/environment.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/comm/environment.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/error.hpp>

#include <boost/describe/enum.hpp>

#include <algorithm>
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

CAIRN_DECL std::string first_slurm_host(std::string_view nodelist) {
  auto refuse = [&] {
    return comm_error(comm_errc::environment,
                      "SLURM_JOB_NODELIST=" + std::string(nodelist) + " is not a SLURM node list (host[01-04,07],...)");
  };
  // The first host: up to the first comma outside brackets, each bracket replaced by the first
  // number (or range start) it lists.
  std::string host;
  for (std::size_t i = 0; i < nodelist.size(); ++i) {
    char c = nodelist[i];
    if (c == ',') break;
    if (c == ']') throw refuse();
    if (c != '[') {
      host += c;
      continue;
    }
    auto close = nodelist.find(']', i);
    if (close == std::string_view::npos) throw refuse();
    auto inside = nodelist.substr(i + 1, close - i - 1);
    auto first = inside.substr(0, inside.find_first_of(",-"));
    if (first.empty() || first.find_first_not_of("0123456789") != std::string_view::npos) throw refuse();
    host += first;
    i = close;
  }
  if (host.empty()) throw refuse();
  return host;
}

CAIRN_DECL int slurm_tasks_on_node(std::string_view list, int node) {
  auto refuse = [&](std::string const& why) {
    return comm_error(comm_errc::environment, "SLURM tasks per node '" + std::string(list) + "': " + why);
  };
  int seen = 0; // nodes counted so far
  std::size_t at = 0;
  while (at <= list.size()) {
    auto end = std::min(list.find(',', at), list.size());
    auto item = list.substr(at, end - at);
    auto open = item.find("(x");
    int tasks = number<int>("SLURM_TASKS_PER_NODE", std::string(item.substr(0, open)), 1, 1 << 20);
    int repeat = 1;
    if (open != std::string_view::npos) {
      if (!item.ends_with(")")) throw refuse("unbalanced repeat");
      repeat =
          number<int>("SLURM_TASKS_PER_NODE", std::string(item.substr(open + 2, item.size() - open - 3)), 1, 1 << 20);
    }
    if (node < seen + repeat) return tasks;
    seen += repeat;
    at = end + 1;
  }
  throw refuse("no node " + std::to_string(node) + " (it lists " + std::to_string(seen) + ")");
}

} // namespace cairn::comm::detail

namespace cairn::comm {

CAIRN_DECL bool launched_as_rank(variable_lookup const& lookup) {
  return lookup("WORLD_SIZE") || (lookup("SLURM_PROCID") && lookup("SLURM_NTASKS"));
}

CAIRN_DECL distributed_environment read_environment(variable_lookup const& lookup) {
  auto required = [&](char const* name, char const* how) {
    auto value = lookup(name);
    if (!value)
      throw comm_error(comm_errc::environment, "environment variable " + std::string(name) + " is not set" + how);
    return *value;
  };
  auto optional_number = [&](char const* name, int fallback, int high) {
    auto value = lookup(name);
    return value ? detail::number<int>(name, *value, 0, high) : fallback;
  };
  distributed_environment env;
  if (lookup("WORLD_SIZE") || !lookup("SLURM_PROCID") || !lookup("SLURM_NTASKS")) {
    char const* how = " (launch with `cairn launch` or torchrun)";
    env.source = "torchrun variables";
    env.world_size = detail::number<int>("WORLD_SIZE", required("WORLD_SIZE", how), 1, 1 << 20);
    env.rank = detail::number<int>("RANK", required("RANK", how), 0, env.world_size - 1);
    env.local_rank = optional_number("LOCAL_RANK", 0, 1 << 20);
    env.local_world_size = optional_number("LOCAL_WORLD_SIZE", env.world_size, 1 << 20);
    env.node_rank = optional_number("GROUP_RANK", 0, 1 << 20);
    if (env.world_size > 1) {
      env.master_addr = required("MASTER_ADDR", how);
      env.master_port = detail::number<std::uint16_t>("MASTER_PORT", required("MASTER_PORT", how), 1, 65535);
    }
    return env;
  }
  env.source = "SLURM";
  env.world_size = detail::number<int>("SLURM_NTASKS", *lookup("SLURM_NTASKS"), 1, 1 << 20);
  env.rank = detail::number<int>("SLURM_PROCID", *lookup("SLURM_PROCID"), 0, env.world_size - 1);
  env.local_rank = optional_number("SLURM_LOCALID", 0, 1 << 20);
  env.node_rank = optional_number("SLURM_NODEID", 0, 1 << 20);
  if (auto per_node = lookup("SLURM_NTASKS_PER_NODE"))
    env.local_world_size = detail::slurm_tasks_on_node(*per_node, 0);
  else if (auto tasks = lookup("SLURM_TASKS_PER_NODE"))
    env.local_world_size = detail::slurm_tasks_on_node(*tasks, env.node_rank);
  else
    env.local_world_size = env.world_size;
  if (env.world_size == 1) return env;
  if (!lookup("SLURM_STEP_ID") && !lookup("SLURM_STEPID"))
    emit(severity::warning, {"SLURM_NTASKS", "SLURM_NTASKS=" + std::to_string(env.world_size) +
                                                 " outside an srun step (SLURM_STEP_ID is not set): if this is the "
                                                 "batch script, only this process runs; start the ranks with srun"});
  if (auto addr = lookup("MASTER_ADDR"))
    env.master_addr = *addr;
  else if (auto nodes = lookup("SLURM_JOB_NODELIST") ? lookup("SLURM_JOB_NODELIST") : lookup("SLURM_NODELIST"))
    env.master_addr = detail::first_slurm_host(*nodes);
  else
    throw comm_error(comm_errc::environment,
                     "environment variable SLURM_JOB_NODELIST is not set, nor MASTER_ADDR: no host for the rendezvous");
  if (auto port = lookup("MASTER_PORT"))
    env.master_port = detail::number<std::uint16_t>("MASTER_PORT", *port, 1, 65535);
  else if (auto job = lookup("SLURM_JOB_ID"))
    env.master_port =
        static_cast<std::uint16_t>(20000 + detail::number<long long>("SLURM_JOB_ID", *job, 0, 1LL << 62) % 10000);
  else
    throw comm_error(comm_errc::environment,
                     "environment variable MASTER_PORT is not set, nor SLURM_JOB_ID: no port for the rendezvous");
  return env;
}

CAIRN_DECL distributed_environment read_environment() { return read_environment(&detail::variable); }

CAIRN_DECL distributed_environment environment_or_single() {
  return launched_as_rank(&detail::variable) ? read_environment() : distributed_environment{};
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
