#pragma once

// Where a process sits in a distributed run, from its environment: the torchrun variables
// (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT), which
// `cairn launch` and torchrun set, else SLURM's (a task of `srun`). No libtorch.

#include <cairn/detail/decl.hpp>
#include <cairn/error.hpp>

#include <boost/describe/enum.hpp>

#include <atomic>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace cairn::comm {

/// Where this process sits in a distributed run.
struct distributed_environment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;       ///< among the ranks of this node
  int local_world_size = 1; ///< the ranks of this node
  int node_rank = 0;        ///< this node's index among the job's nodes
  std::string master_addr = "127.0.0.1";
  std::uint16_t master_port = 0;
  std::string source = "one process"; ///< "torchrun variables", "SLURM" or "one process"
  /// torchrun's agent serves the store at MASTER_ADDR:MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE):
  /// every rank is its client, rank 0 included.
  bool agent_store = false;
  int attempt = 0; ///< with `agent_store`: torchrun's restarts so far (TORCHELASTIC_RESTART_COUNT)
};

/// Reads an environment variable: nothing when it is not set.
using variable_lookup = std::function<std::optional<std::string>(char const* name)>;

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

/// Where this process sits, in this order of precedence:
/// 1. The torchrun variables, when WORLD_SIZE is set (`cairn launch`, torchrun): RANK and
///    WORLD_SIZE are required, and MASTER_ADDR and MASTER_PORT when the world has more than one
///    process; LOCAL_RANK (0), LOCAL_WORLD_SIZE (the world) and GROUP_RANK (0) are optional.
/// 2. SLURM's, when SLURM_PROCID and SLURM_NTASKS are set (a task of `srun`): the rank, the
///    world size, SLURM_LOCALID (0), SLURM_NODEID (0), the tasks of this node from
///    SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE (`4(x2),3`: four on each of the first two
///    nodes, three on the third); MASTER_ADDR if set, else the first host of SLURM_JOB_NODELIST
///    (or SLURM_NODELIST), its bracket syntax expanded (`gpu[07-09,12]` -> `gpu07`); MASTER_PORT
///    if set, else 20000 + SLURM_JOB_ID mod 10000 (the same on every task of the job).
///    A step's own SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE come before the job's. A
///    malformed node list, a SLURM_NODEID beyond it or a SLURM_LOCALID beyond the node's tasks
///    is an error naming the variable.
///    Outside an `srun` step (no SLURM_STEP_ID: the batch script itself) the program is one
///    process alone, and a warning says so (once a process, from `read_environment()`).
/// Under torchrun (TORCHELASTIC_USE_AGENT_STORE=True) `agent_store` and `attempt` say that the
/// agent serves the store.
/// A missing or malformed variable is an error naming it; anything else is an error too.
CAIRN_DECL distributed_environment read_environment(variable_lookup const& lookup);

/// `read_environment` of this process's environment.
CAIRN_DECL distributed_environment read_environment();

/// Whether a launcher started this process as a rank: WORLD_SIZE, or SLURM_PROCID and
/// SLURM_NTASKS, are set.
CAIRN_DECL bool launched_as_rank(variable_lookup const& lookup);

/// The environment of this process: what its launcher says (`read_environment`) when one
/// started it, else one process alone.
CAIRN_DECL distributed_environment environment_or_single();

namespace detail {
/// What a SLURM node list holds: its first host and how many hosts it names (saturating at 2^40).
struct slurm_hosts {
  std::string first;
  long long count = 0;
};
/// Reads the SLURM node list `nodelist` (`node[01-04,07],gpu2`), the value of `variable`: an
/// error naming the variable refuses anything else (`[1-3]`, `a[1--3]`, `a[3-1]`, `a[1`).
CAIRN_DECL slurm_hosts read_slurm_hosts(std::string_view variable, std::string_view nodelist);
/// `read_environment(lookup)`, with the warning of a batch script's process (it runs alone)
/// given only when `warned` is null or was false (it is set then): once a process.
CAIRN_DECL distributed_environment read_environment(variable_lookup const& lookup, std::atomic<bool>* warned);
/// The first host of a SLURM node list: `node[01-04,07],gpu2` -> `node01`. An error names a
/// list it cannot read.
CAIRN_DECL std::string first_slurm_host(std::string_view nodelist);
/// The tasks on node `node` of a SLURM tasks-per-node list (`4(x2),3`); an error names a list
/// it cannot read or that has no such node.
CAIRN_DECL int slurm_tasks_on_node(std::string_view list, int node);
} // namespace detail

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
