#pragma once
// cairn: requires libtorch

#include <cairn/error.hpp>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <concepts>
#include <cstdint>
#include <string>
#include <vector>

namespace cairn::comm {

/// How all_reduce combines values.
enum class reduce_op { sum, max };

/// What checkpoints need of a group of processes. `all_gather` takes each rank's tensor (sizes
/// may differ) and returns every rank's, flattened, in rank order. Backends: single_process,
/// c10d_communicator (Gloo on CPU, NCCL on GPU through libtorch), nccl_communicator.
/// `device()` is where its tensors must live (CPU for Gloo, a CUDA device for NCCL). A
/// communicator may also have `gather(tensor, root)` and `gather_into(tensor, root, outputs)`
/// (see comm::gather and comm::gather_into below).
template <class C>
concept communicator = requires(C& c, at::Tensor& t, at::Tensor const& ct) {
  { c.device() } -> std::same_as<c10::Device>;
  { c.rank() } -> std::same_as<int>;
  { c.size() } -> std::same_as<int>;
  c.barrier();
  c.broadcast(t, 0);
  c.all_reduce(t, reduce_op::sum);
  { c.all_gather(ct) } -> std::same_as<std::vector<at::Tensor>>;
};

/// Every rank's tensor, flattened, in rank order, on rank `root`; an empty list on the others.
/// Collective. Uses the communicator's own `gather(tensor, root)` where it has one (every cairn
/// backend does), so that the parts travel to `root` only; otherwise an all_gather whose
/// result the other ranks drop.
template <communicator C> std::vector<at::Tensor> gather(C& comm, at::Tensor const& tensor, int root) {
  if constexpr (requires {
                  { comm.gather(tensor, root) } -> std::same_as<std::vector<at::Tensor>>;
                }) {
    return comm.gather(tensor, root);
  } else {
    auto all = comm.all_gather(tensor);
    if (comm.rank() != root) return {};
    return all;
  }
}

/// Every rank's tensor into `outputs[rank]` on rank `root`, where each output already has the
/// size that rank sends (all ranks know the sizes: from the layouts, say); `outputs` is ignored
/// on the others. Collective. Through the communicator's own `gather_into` where it has one
/// (every cairn backend: point to point, no padding, straight into the outputs), else through
/// `gather` and a copy.
template <communicator C>
void gather_into(C& comm, at::Tensor const& tensor, int root, std::vector<at::Tensor>& outputs) {
  if constexpr (requires { comm.gather_into(tensor, root, outputs); }) {
    comm.gather_into(tensor, root, outputs);
  } else {
    auto parts = comm::gather(comm, tensor, root);
    for (std::size_t r = 0; r < parts.size(); ++r)
      if (parts[r].numel() > 0) outputs.at(r).copy_(parts[r]);
  }
}

/// Sends `sent` to rank `to` and receives `received` (contiguous, on device(), of the size that
/// rank sends) from rank `from`, both at once: point to point, only the two ends of each transfer
/// take part, so that every rank of a ring can send to the next while it receives from the
/// previous. `to` or `from` -1: nothing that way (and `sent` or `received` may be undefined).
/// Through the communicator's own `exchange` (every cairn backend); a comm_error on one without
/// it.
template <communicator C> void exchange(C& comm, at::Tensor const& sent, int to, at::Tensor& received, int from) {
  if constexpr (requires { comm.exchange(sent, to, received, from); }) {
    comm.exchange(sent, to, received, from);
  } else {
    if (to < 0 && from < 0) return;
    throw comm_error(comm_errc::backend, "this communicator cannot send to one rank (it has no exchange)");
  }
}

} // namespace cairn::comm
