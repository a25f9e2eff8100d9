#pragma once
// cairn: requires libtorch
// cairn: requires nccl

#include <cairn/comm/communicator.hpp>
#include <cairn/error.hpp>

#ifndef CAIRN_WITH_NCCL
#error "cairn/comm/nccl.hpp needs CAIRN_WITH_NCCL (configure cairn with CAIRN_WITH_NCCL=ON)"
#endif

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace cairn::comm {

namespace detail {
inline void check_nccl(ncclResult_t result, char const* what) {
  if (result != ncclSuccess) throw error(std::string("NCCL ") + what + " failed: " + ncclGetErrorString(result));
}
inline void check_cuda(cudaError_t result, char const* what) {
  if (result != cudaSuccess) throw error(std::string("CUDA ") + what + " failed: " + cudaGetErrorString(result));
}
inline ncclDataType_t nccl_type(at::ScalarType type) {
  switch (type) {
  case at::kFloat:
    return ncclFloat32;
  case at::kDouble:
    return ncclFloat64;
  case at::kHalf:
    return ncclFloat16;
  case at::kBFloat16:
    return ncclBfloat16;
  case at::kLong:
    return ncclInt64;
  case at::kInt:
    return ncclInt32;
  case at::kChar:
    return ncclInt8;
  case at::kByte:
  case at::kBool:
    return ncclUint8;
  default:
    throw error(std::string("NCCL cannot carry tensors of type ") + c10::toString(type));
  }
}
} // namespace detail

/// A communicator over a caller's raw NCCL communicator and CUDA stream; tensors live on
/// `device`. Every collective is enqueued on the stream and waited for before returning.
class nccl_communicator {
public:
  nccl_communicator(ncclComm_t comm, cudaStream_t stream, c10::Device device)
      : comm_(comm), stream_(stream), device_(device) {
    detail::check_nccl(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank");
    detail::check_nccl(ncclCommCount(comm_, &size_), "ncclCommCount");
  }

  [[nodiscard]] c10::Device device() const noexcept { return device_; }
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }

  void barrier() {
    auto token = at::zeros({1}, at::TensorOptions().dtype(at::kInt).device(device_));
    all_reduce(token, reduce_op::sum);
  }

  void broadcast(at::Tensor& tensor, int root) {
    auto buffer = tensor.contiguous();
    detail::check_nccl(ncclBroadcast(buffer.data_ptr(), buffer.data_ptr(), static_cast<std::size_t>(buffer.numel()),
                                     detail::nccl_type(buffer.scalar_type()), root, comm_, stream_),
                       "ncclBroadcast");
    synchronize();
    if (!buffer.is_same(tensor)) tensor.copy_(buffer);
  }

  void all_reduce(at::Tensor& tensor, reduce_op op) {
    auto buffer = tensor.contiguous();
    detail::check_nccl(ncclAllReduce(buffer.data_ptr(), buffer.data_ptr(), static_cast<std::size_t>(buffer.numel()),
                                     detail::nccl_type(buffer.scalar_type()), op == reduce_op::sum ? ncclSum : ncclMax,
                                     comm_, stream_),
                       "ncclAllReduce");
    synchronize();
    if (!buffer.is_same(tensor)) tensor.copy_(buffer);
  }

  [[nodiscard]] std::vector<at::Tensor> all_gather(at::Tensor const& tensor) {
    auto flat = tensor.reshape({-1}).contiguous();
    auto counts = gather_equal(at::full({1}, flat.numel(), at::TensorOptions().dtype(at::kLong).device(device_)))
                      .to(c10::Device(c10::kCPU));
    auto longest = counts.max().item<std::int64_t>();
    if (longest == 0) return std::vector<at::Tensor>(static_cast<std::size_t>(size_), flat);
    auto padded = at::zeros({longest}, flat.options());
    padded.narrow(0, 0, flat.numel()).copy_(flat);
    auto all = gather_equal(padded);
    std::vector<at::Tensor> out;
    for (int r = 0; r < size_; ++r) out.push_back(all.narrow(0, r * longest, counts[r].item<std::int64_t>()));
    return out;
  }

private:
  at::Tensor gather_equal(at::Tensor const& tensor) {
    auto out = at::empty({tensor.numel() * size_}, tensor.options());
    detail::check_nccl(ncclAllGather(tensor.data_ptr(), out.data_ptr(), static_cast<std::size_t>(tensor.numel()),
                                     detail::nccl_type(tensor.scalar_type()), comm_, stream_),
                       "ncclAllGather");
    synchronize();
    return out;
  }
  void synchronize() { detail::check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

  ncclComm_t comm_;
  cudaStream_t stream_;
  c10::Device device_;
  int rank_ = 0;
  int size_ = 1;
};

static_assert(communicator<nccl_communicator>);

} // namespace cairn::comm
