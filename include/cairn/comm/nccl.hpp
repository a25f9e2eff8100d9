#pragma once
// cairn: requires libtorch
// cairn: requires nccl

#include <cairn/comm/communicator.hpp>
#include <cairn/comm/environment.hpp>
#include <cairn/comm/store.hpp>
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
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
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

/// A communicator over a raw NCCL communicator and a CUDA stream; tensors live on `device`.
/// Every collective is enqueued on the stream and waited for before returning, polling the
/// communicator's asynchronous error state: an error, or a collective that does not finish
/// within the timeout (a dead or stuck peer), aborts the communicator and throws an error naming
/// the operation, so that a job fails instead of hanging.
///
/// Made from a caller's communicator and stream, it uses them and leaves them to the caller;
/// made by `make_nccl` / `nccl_from_environment`, it owns them and destroys them.
class nccl_communicator {
public:
  nccl_communicator(ncclComm_t comm, cudaStream_t stream, c10::Device device,
                    std::chrono::milliseconds timeout = std::chrono::minutes(5))
      : comm_(comm), stream_(stream), device_(device), timeout_(timeout) {
    detail::check_nccl(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank");
    detail::check_nccl(ncclCommCount(comm_, &size_), "ncclCommCount");
  }

  /// Takes ownership of `comm` and `stream`.
  static nccl_communicator owning(ncclComm_t comm, cudaStream_t stream, c10::Device device,
                                  std::chrono::milliseconds timeout) {
    nccl_communicator c(comm, stream, device, timeout);
    c.owned_ = true;
    return c;
  }

  nccl_communicator(nccl_communicator&& other) noexcept
      : comm_(std::exchange(other.comm_, nullptr)), stream_(std::exchange(other.stream_, nullptr)),
        device_(other.device_), timeout_(other.timeout_), rank_(other.rank_), size_(other.size_),
        owned_(std::exchange(other.owned_, false)), aborted_(other.aborted_) {}
  nccl_communicator& operator=(nccl_communicator&& other) noexcept {
    if (this != &other) {
      release();
      comm_ = std::exchange(other.comm_, nullptr);
      stream_ = std::exchange(other.stream_, nullptr);
      device_ = other.device_;
      timeout_ = other.timeout_;
      rank_ = other.rank_;
      size_ = other.size_;
      owned_ = std::exchange(other.owned_, false);
      aborted_ = other.aborted_;
    }
    return *this;
  }
  nccl_communicator(nccl_communicator const&) = delete;
  nccl_communicator& operator=(nccl_communicator const&) = delete;
  ~nccl_communicator() { release(); }

  [[nodiscard]] c10::Device device() const noexcept { return device_; }
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }

  void barrier() {
    auto token = at::zeros({1}, at::TensorOptions().dtype(at::kInt).device(device_));
    all_reduce(token, reduce_op::sum);
  }

  void broadcast(at::Tensor& tensor, int root) {
    usable();
    auto buffer = tensor.contiguous();
    detail::check_nccl(ncclBroadcast(buffer.data_ptr(), buffer.data_ptr(), static_cast<std::size_t>(buffer.numel()),
                                     detail::nccl_type(buffer.scalar_type()), root, comm_, stream_),
                       "ncclBroadcast");
    synchronize("broadcast");
    if (!buffer.is_same(tensor)) tensor.copy_(buffer);
  }

  void all_reduce(at::Tensor& tensor, reduce_op op) {
    usable();
    auto buffer = tensor.contiguous();
    detail::check_nccl(ncclAllReduce(buffer.data_ptr(), buffer.data_ptr(), static_cast<std::size_t>(buffer.numel()),
                                     detail::nccl_type(buffer.scalar_type()), op == reduce_op::sum ? ncclSum : ncclMax,
                                     comm_, stream_),
                       "ncclAllReduce");
    synchronize("all_reduce");
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

  /// Every rank's tensor, flattened, in rank order, on rank `root` only (sends and receives).
  [[nodiscard]] std::vector<at::Tensor> gather(at::Tensor const& tensor, int root) {
    auto flat = tensor.reshape({-1}).contiguous();
    auto counts = gather_equal(at::full({1}, flat.numel(), at::TensorOptions().dtype(at::kLong).device(device_)))
                      .to(c10::Device(c10::kCPU));
    std::vector<at::Tensor> out;
    if (rank_ == root)
      for (int r = 0; r < size_; ++r) out.push_back(at::empty({counts[r].item<std::int64_t>()}, flat.options()));
    gather_into(flat, root, out);
    return out;
  }

  /// Every rank's tensor into `outputs[rank]` (on this device, of the size that rank sends) on
  /// rank `root`; sends and receives, no padding.
  void gather_into(at::Tensor const& tensor, int root, std::vector<at::Tensor>& outputs) {
    usable();
    auto flat = tensor.reshape({-1}).contiguous();
    auto type = detail::nccl_type(flat.scalar_type());
    detail::check_nccl(ncclGroupStart(), "ncclGroupStart");
    if (rank_ == root) {
      for (int r = 0; r < size_; ++r) {
        auto& out = outputs.at(static_cast<std::size_t>(r));
        if (r == root) {
          if (flat.numel() > 0) out.copy_(flat);
        } else if (out.numel() > 0) {
          detail::check_nccl(ncclRecv(out.data_ptr(), static_cast<std::size_t>(out.numel()), type, r, comm_, stream_),
                             "ncclRecv");
        }
      }
    } else if (flat.numel() > 0) {
      detail::check_nccl(ncclSend(flat.data_ptr(), static_cast<std::size_t>(flat.numel()), type, root, comm_, stream_),
                         "ncclSend");
    }
    detail::check_nccl(ncclGroupEnd(), "ncclGroupEnd");
    synchronize("gather");
  }

private:
  at::Tensor gather_equal(at::Tensor const& tensor) {
    usable();
    auto out = at::empty({tensor.numel() * size_}, tensor.options());
    detail::check_nccl(ncclAllGather(tensor.data_ptr(), out.data_ptr(), static_cast<std::size_t>(tensor.numel()),
                                     detail::nccl_type(tensor.scalar_type()), comm_, stream_),
                       "ncclAllGather");
    synchronize("all_gather");
    return out;
  }
  /// Waits for what was enqueued, watching for NCCL's asynchronous errors and the timeout.
  void synchronize(char const* what) {
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (;;) {
      auto status = cudaStreamQuery(stream_);
      if (status == cudaSuccess) return;
      if (status != cudaErrorNotReady) detail::check_cuda(status, what);
      ncclResult_t async = ncclSuccess;
      detail::check_nccl(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
      if (async != ncclSuccess) {
        abort();
        throw error("NCCL " + std::string(what) + " failed on rank " + std::to_string(rank_) + ": " +
                    ncclGetErrorString(async) + "; the communicator is aborted");
      }
      if (std::chrono::steady_clock::now() > deadline) {
        abort();
        throw error("NCCL " + std::string(what) + " did not finish within " + std::to_string(timeout_.count()) +
                    " ms on rank " + std::to_string(rank_) + " (a dead or stuck peer?); the communicator is aborted");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  void usable() const {
    if (aborted_) throw error("NCCL communicator of rank " + std::to_string(rank_) + " was aborted after an error");
  }
  void abort() noexcept {
    if (!aborted_ && comm_) ncclCommAbort(comm_);
    aborted_ = true;
  }
  void release() noexcept {
    if (!owned_) return;
    if (comm_ && !aborted_) ncclCommDestroy(comm_);
    if (stream_) cudaStreamDestroy(stream_);
    comm_ = nullptr;
    stream_ = nullptr;
    owned_ = false;
  }

  ncclComm_t comm_;
  cudaStream_t stream_;
  c10::Device device_;
  std::chrono::milliseconds timeout_;
  int rank_ = 0;
  int size_ = 1;
  bool owned_ = false;
  bool aborted_ = false;
};

static_assert(communicator<nccl_communicator>);

/// An NCCL communicator for the run `env` describes: the rank's GPU is its LOCAL_RANK, rank 0
/// creates NCCL's unique id and shares it through the run's store (the others wait for it at
/// most `timeout`), and the communicator gets a stream of its own; it owns both. Collectives
/// that do not finish within `timeout` abort it and throw.
inline nccl_communicator make_nccl(distributed_environment const& env,
                                   std::chrono::milliseconds timeout = std::chrono::minutes(5)) {
  int visible = 0;
  if (cudaGetDeviceCount(&visible) != cudaSuccess) visible = 0;
  int device = cuda_device_for(env, visible);
  detail::check_cuda(cudaSetDevice(device), "cudaSetDevice");
  auto store = make_store(env, timeout);
  auto shared = share_from_rank0(
      *store, env, "cairn/nccl_unique_id",
      [] {
        ncclUniqueId id;
        detail::check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
        auto const* bytes = reinterpret_cast<std::uint8_t const*>(&id);
        return std::vector<std::uint8_t>(bytes, bytes + sizeof id);
      },
      timeout);
  ncclUniqueId id;
  if (shared.size() != sizeof id) throw error("the NCCL unique id shared by rank 0 has the wrong size");
  std::memcpy(&id, shared.data(), sizeof id);
  ncclComm_t comm = nullptr;
  detail::check_nccl(ncclCommInitRank(&comm, env.world_size, id, env.rank), "ncclCommInitRank");
  cudaStream_t stream = nullptr;
  if (auto status = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); status != cudaSuccess) {
    ncclCommDestroy(comm);
    detail::check_cuda(status, "cudaStreamCreateWithFlags");
  }
  return nccl_communicator::owning(comm, stream, c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device)),
                                   timeout);
}

/// `make_nccl` for the run the torchrun variables describe, or for one process when no launcher
/// set them.
inline nccl_communicator nccl_from_environment(std::chrono::milliseconds timeout = std::chrono::minutes(5)) {
  return make_nccl(environment_or_single(), timeout);
}

} // namespace cairn::comm
