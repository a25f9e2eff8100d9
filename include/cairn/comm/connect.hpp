#pragma once
// cairn: requires libtorch

// Choosing and making the communicator of a run, from what its config asks for: no trainer
// writes this itself.

#include <cairn/comm/any.hpp>
#include <cairn/comm/environment.hpp>
#include <cairn/comm/grid.hpp>
#include <cairn/detail/decl.hpp>

#include <chrono>
#include <optional>

namespace cairn::comm {

/// The communicator of this process for a run of tensors on CUDA (`cuda`) or CPU that asks for
/// `requested`: the launcher's ranks (the torchrun variables) or one process
/// alone; NCCL on the rank's GPU where `requested` resolves to it (`resolve_backend`), else Gloo.
/// Collectives, and the start of the job, wait at most `timeout` for every rank. A config_error
/// on the key `comm` says why NCCL cannot be had (not built in, no CUDA tensors) before any rank
/// waits for another.
///
///     auto comm = cairn::comm::connect(cfg.comm, cfg.device == cairn::device_type::cuda, cfg.run.timeout());
CAIRN_DECL any_communicator connect(backend requested, bool cuda,
                                    std::chrono::milliseconds timeout = std::chrono::minutes(5));

/// The communicators of a rank of a run on a parallel grid: the whole job's, and the rank's group
/// along each axis, where a rank's index is its coordinate. A group of one rank is a
/// `single_process` communicator. Checkpoints go through `world`; a trainer's collectives
/// through the groups (gradients summed over `data`, activations over `tensor`).
struct grid_communicators {
  parallel_grid grid;
  grid_coordinates at;
  any_communicator world, tensor, pipeline, data;
  /// Every rank of the job again, in a group of its own, where asked for: the local tier's
  /// background transfers (`checkpoint_manager::set_transfer_communicator`), beside `world`'s
  /// collectives.
  std::optional<any_communicator> transfers;

  [[nodiscard]] any_communicator& along(axis a) noexcept {
    return a == axis::tensor ? tensor : a == axis::pipeline ? pipeline : data;
  }
};

/// `connect`, for a run on `grid`: every group of the grid over one store, on the backend
/// `requested` resolves to (Gloo, or NCCL with its groups' communicators of their own). Every
/// rank makes its groups in the same order (world, tensor, pipeline, data, then `transfers` when
/// asked for, in a job of several ranks), so that the members of a group meet. A comm_error
/// (kind environment) when the grid's size is not the job's.
///
///     auto env = cairn::comm::environment_or_single();
///     cairn::comm::parallel_grid grid(cfg.parallel.tensor, 1, env.world_size / cfg.parallel.tensor, env.world_size);
///     auto comms = cairn::comm::connect(cfg.comm, cuda, grid, cfg.run.timeout());
CAIRN_DECL grid_communicators connect(backend requested, bool cuda, parallel_grid const& grid,
                                      std::chrono::milliseconds timeout = std::chrono::minutes(5),
                                      bool transfers = false);

} // namespace cairn::comm

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/comm/impl/connect.ipp>
#endif
