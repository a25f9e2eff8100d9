#pragma once
// cairn: requires libtorch

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
/// `device()` is where its tensors must live (CPU for Gloo, a CUDA device for NCCL).
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

} // namespace cairn::comm
