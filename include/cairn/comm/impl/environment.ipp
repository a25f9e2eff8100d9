// Definitions of <cairn/comm/environment.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/comm/environment.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/error.hpp>

#include <boost/describe/enum.hpp>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace cairn::comm::detail {

CAIRN_DECL std::optional<std::string> variable(char const* name) {
  char const* value = std::getenv(name);
  return value ? std::optional<std::string>(value) : std::nullopt;
}

CAIRN_DECL slurm_hosts read_slurm_hosts(std::string_view variable, std::string_view nodelist) {
  auto refuse = [&](std::string const& why) {
    return comm_error(comm_errc::environment, std::string(variable) + "=" + std::string(nodelist) +
                                                  " is not a SLURM node list (host[01-04,07],...): " + why);
  };
  auto name_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_';
  };
  auto digits = [](std::string_view text) {
    return !text.empty() && text.size() <= 18 && text.find_first_not_of("0123456789") == std::string_view::npos;
  };
  constexpr long long many = 1LL << 40; // counts saturate here: no job has more nodes
  slurm_hosts hosts;
  bool first_item = true;
  std::size_t i = 0;
  while (true) {
    // One item: a literal name, then bracketed ranges and literals in any order.
    std::string host; // the item's first host
    long long count = 1;
    auto item_start = i;
    while (i < nodelist.size() && nodelist[i] != ',') {
      char c = nodelist[i];
      if (name_char(c)) {
        host += c;
        ++i;
        continue;
      }
      if (c != '[') throw refuse(c == ']' ? "a ']' without its '['" : "the character '" + std::string(1, c) + "'");
      if (i == item_start) throw refuse("a host name does not start with '['");
      auto close = nodelist.find(']', i);
      if (close == std::string_view::npos) throw refuse("a '[' without its ']'");
      auto inside = nodelist.substr(i + 1, close - i - 1);
      if (inside.find('[') != std::string_view::npos) throw refuse("nested brackets");
      long long listed = 0;
      std::size_t at = 0;
      while (true) { // ranges: 07 or 01-04, separated by commas
        auto end = std::min(inside.find(',', at), inside.size());
        auto range = inside.substr(at, end - at);
        auto dash = range.find('-');
        auto low_text = range.substr(0, dash);
        auto high_text = dash == std::string_view::npos ? low_text : range.substr(dash + 1);
        if (!digits(low_text) || !digits(high_text))
          throw refuse("'[" + std::string(inside) + "]' holds '" + std::string(range) +
                       "', not a number or a range low-high");
        auto low = std::stoll(std::string(low_text));
        auto high = std::stoll(std::string(high_text));
        if (high < low) throw refuse("the range " + std::string(range) + " runs backwards");
        if (listed == 0) host += low_text; // the first host takes the first number, padded as written
        listed = std::min(many, listed + (high - low + 1));
        if (end == inside.size()) break;
        at = end + 1;
      }
      count = count > many / listed ? many : count * listed;
      i = close + 1;
    }
    if (host.empty()) throw refuse("an empty host name");
    if (first_item) hosts.first = host;
    first_item = false;
    hosts.count = std::min(many, hosts.count + count);
    if (i == nodelist.size()) break;
    ++i; // the comma between items
  }
  return hosts;
}

CAIRN_DECL std::string first_slurm_host(std::string_view nodelist) {
  return read_slurm_hosts("SLURM_JOB_NODELIST", nodelist).first;
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

namespace detail {

CAIRN_DECL distributed_environment read_environment(variable_lookup const& lookup, std::atomic<bool>* warned) {
  auto required = [&](char const* name, char const* how) {
    auto value = lookup(name);
    if (!value)
      throw comm_error(comm_errc::environment, "environment variable " + std::string(name) + " is not set" + how);
    return *value;
  };
  auto optional_number = [&](char const* name, int fallback, int low, int high) {
    auto value = lookup(name);
    return value ? number<int>(name, *value, low, high) : fallback;
  };
  // The first of `names` that is set, with its name.
  auto first_of = [&](std::initializer_list<char const*> names) -> std::optional<std::pair<char const*, std::string>> {
    for (auto name : names)
      if (auto value = lookup(name)) return std::pair{name, *value};
    return std::nullopt;
  };
  distributed_environment env;
  if (lookup("WORLD_SIZE") || !lookup("SLURM_PROCID") || !lookup("SLURM_NTASKS")) {
    char const* how = " (launch with `cairn launch` or torchrun)";
    env.source = "torchrun variables";
    env.world_size = number<int>("WORLD_SIZE", required("WORLD_SIZE", how), 1, 1 << 20);
    env.rank = number<int>("RANK", required("RANK", how), 0, env.world_size - 1);
    env.local_world_size = optional_number("LOCAL_WORLD_SIZE", env.world_size, 1, env.world_size);
    env.local_rank = optional_number("LOCAL_RANK", 0, 0, env.local_world_size - 1);
    env.node_rank = optional_number("GROUP_RANK", 0, 0, env.world_size - 1);
    if (env.world_size > 1) {
      env.master_addr = required("MASTER_ADDR", how);
      env.master_port = number<std::uint16_t>("MASTER_PORT", required("MASTER_PORT", how), 1, 65535);
      // torchrun's agent serves the store itself and says so; its restarts number the attempts.
      env.agent_store = lookup("TORCHELASTIC_USE_AGENT_STORE") == std::optional<std::string>("True");
      if (env.agent_store)
        env.attempt =
            number<int>("TORCHELASTIC_RESTART_COUNT", required("TORCHELASTIC_RESTART_COUNT", how), 0, 1 << 30);
    }
    return env;
  }
  env.source = "SLURM";
  env.world_size = number<int>("SLURM_NTASKS", *lookup("SLURM_NTASKS"), 1, 1 << 20);
  env.rank = number<int>("SLURM_PROCID", *lookup("SLURM_PROCID"), 0, env.world_size - 1);
  if (env.world_size > 1 && !lookup("SLURM_STEP_ID") && !lookup("SLURM_STEPID")) {
    // The batch script itself: its variables describe the job, but only this process runs.
    if (!warned || !warned->exchange(true))
      emit(severity::warning, {"SLURM_NTASKS", "SLURM_NTASKS=" + std::to_string(env.world_size) +
                                                   " outside an srun step (SLURM_STEP_ID is not set): this is the "
                                                   "batch script, so this program runs as one process; start the "
                                                   "ranks with srun"});
    distributed_environment alone;
    alone.source = "SLURM batch script (one process)";
    return alone;
  }
  // A step's own variables, where srun sets them, before the job's: a step may run on a part of
  // the allocation.
  auto nodes = first_of({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  std::optional<slurm_hosts> hosts;
  if (nodes) hosts = read_slurm_hosts(nodes->first, nodes->second);
  auto node_limit = hosts ? static_cast<int>(std::min<long long>(hosts->count, env.world_size)) : env.world_size;
  env.node_rank = optional_number("SLURM_NODEID", 0, 0, node_limit - 1);
  std::string tasks_from = "SLURM_NTASKS"; // the variable this node's task count comes from
  if (auto per_node = lookup("SLURM_NTASKS_PER_NODE")) {
    env.local_world_size = slurm_tasks_on_node(*per_node, 0);
    tasks_from = "SLURM_NTASKS_PER_NODE";
  } else if (auto tasks = first_of({"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})) {
    env.local_world_size = slurm_tasks_on_node(tasks->second, env.node_rank);
    tasks_from = tasks->first;
  } else {
    env.local_world_size = env.world_size;
  }
  if (auto local = lookup("SLURM_LOCALID")) {
    env.local_rank = number<int>("SLURM_LOCALID", *local, 0, 1 << 20);
    if (env.local_rank >= env.local_world_size)
      throw comm_error(comm_errc::environment,
                       "environment variable SLURM_LOCALID=" + *local + " names no task of node " +
                           std::to_string(env.node_rank) + ", which runs " + std::to_string(env.local_world_size) +
                           (env.local_world_size == 1 ? " task" : " tasks") + " (" + tasks_from + ")");
  }
  if (env.world_size == 1) return env;
  if (auto addr = lookup("MASTER_ADDR"))
    env.master_addr = *addr;
  else if (hosts)
    env.master_addr = hosts->first;
  else
    throw comm_error(comm_errc::environment,
                     "environment variable SLURM_JOB_NODELIST is not set, nor MASTER_ADDR: no host for the rendezvous");
  if (auto port = lookup("MASTER_PORT"))
    env.master_port = number<std::uint16_t>("MASTER_PORT", *port, 1, 65535);
  else if (auto job = lookup("SLURM_JOB_ID"))
    env.master_port = static_cast<std::uint16_t>(20000 + number<long long>("SLURM_JOB_ID", *job, 0, 1LL << 62) % 10000);
  else
    throw comm_error(comm_errc::environment,
                     "environment variable MASTER_PORT is not set, nor SLURM_JOB_ID: no port for the rendezvous");
  return env;
}

} // namespace detail

CAIRN_DECL distributed_environment read_environment(variable_lookup const& lookup) {
  return detail::read_environment(lookup, nullptr);
}

CAIRN_DECL distributed_environment read_environment() {
  // A program reads its environment more than once (its grid, then its communicators): what it
  // is told about its environment, it is told once.
  static std::atomic<bool> warned{false};
  return detail::read_environment(&detail::variable, &warned);
}

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
