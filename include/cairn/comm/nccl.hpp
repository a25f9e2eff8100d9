#pragma once
// cairn: requires libtorch
// cairn: requires nccl

#include <cairn/comm/communicator.hpp>
#include <cairn/comm/environment.hpp>
#include <cairn/comm/store.hpp>
#include <cairn/detail/decl.hpp>
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
  if (result != ncclSuccess)
    throw comm_error(comm_errc::backend, std::string("NCCL ") + what + " failed: " + ncclGetErrorString(result));
}
inline void check_cuda(cudaError_t result, char const* what) {
  if (result != cudaSuccess)
    throw comm_error(comm_errc::backend, std::string("CUDA ") + what + " failed: " + cudaGetErrorString(result));
}
CAIRN_DECL ncclDataType_t nccl_type(at::ScalarType type);
} // namespace detail

/// A communicator over a raw NCCL communicator and a CUDA stream; tensors live on `device`.
/// Every collective is enqueued on the stream and waited for before returning, polling the
/// communicator's asynchronous error state: an error, or a collective that does not finish
/// within the timeout (a dead or stuck peer), aborts the communicator and throws an error naming
/// the operation, so that a job fails instead of hanging.
///
/// Made from a caller's communicator and stream, it uses them and leaves them to the caller;
/// made by `make_nccl` / `nccl_from_environment`, it owns them and destroys them. Its own stream is
/// a blocking one: collectives wait for the work queued before them on the legacy default stream,
/// libtorch's current stream unless the program chose another (then it synchronises that stream
/// first, or passes it in).
class nccl_communicator {
public:
  CAIRN_DECL nccl_communicator(ncclComm_t comm, cudaStream_t stream, c10::Device device,
                               std::chrono::milliseconds timeout = std::chrono::minutes(5));

  /// Takes ownership of `comm` and `stream`.
  CAIRN_DECL static nccl_communicator owning(ncclComm_t comm, cudaStream_t stream, c10::Device device,
                                             std::chrono::milliseconds timeout);

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

  CAIRN_DECL void barrier();

  CAIRN_DECL void broadcast(at::Tensor& tensor, int root);

  CAIRN_DECL void all_reduce(at::Tensor& tensor, reduce_op op);

  [[nodiscard]] CAIRN_DECL std::vector<at::Tensor> all_gather(at::Tensor const& tensor);

  /// Every rank's tensor, flattened, in rank order, on rank `root` only (sends and receives).
  [[nodiscard]] CAIRN_DECL std::vector<at::Tensor> gather(at::Tensor const& tensor, int root);

  /// Every rank's tensor into `outputs[rank]` (on this device, of the size that rank sends) on
  /// rank `root`; sends and receives, no padding.
  CAIRN_DECL void gather_into(at::Tensor const& tensor, int root, std::vector<at::Tensor>& outputs);

  /// Sends `sent` to rank `to` and receives `received` (on this device, of the size `from`
  /// sends) from rank `from` at once, in one NCCL group; -1: nothing that way.
  CAIRN_DECL void exchange(at::Tensor const& sent, int to, at::Tensor& received, int from);

private:
  CAIRN_DECL at::Tensor gather_equal(at::Tensor const& tensor);
  /// Waits for what was enqueued, watching for NCCL's asynchronous errors and the timeout.
  CAIRN_DECL void synchronize(char const* what);
  /// `check_nccl` for a call that enqueues work: "in progress" (cairn's communicators are
  /// non-blocking, for a bounded start) is waited for up to the timeout, then the communicator
  /// is aborted.
  CAIRN_DECL void issued(ncclResult_t result, char const* what);
  void usable() const {
    if (aborted_)
      throw comm_error(comm_errc::backend,
                       "NCCL communicator of rank " + std::to_string(rank_) + " was aborted after an error");
  }
  CAIRN_DECL void abort() noexcept;
  CAIRN_DECL void release() noexcept;

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
CAIRN_DECL nccl_communicator make_nccl(distributed_environment const& env,
                                       std::chrono::milliseconds timeout = std::chrono::minutes(5));

/// An NCCL communicator of the ranks `members` (global ranks, in the order of their group ranks;
/// this rank among them), named `name` ("tp/0", "dp/1", ...) in the run's `store`
/// (`make_store`): the group's first member creates its unique id and publishes it there, the
/// others wait for it at most `timeout`. The rank's GPU is chosen as `make_nccl` chooses it. A
/// rank that is not a member is an error.
CAIRN_DECL nccl_communicator make_nccl_group(c10::intrusive_ptr<c10d::Store> const& store,
                                             distributed_environment const& env, std::string const& name,
                                             std::vector<int> const& members,
                                             std::chrono::milliseconds timeout = std::chrono::minutes(5));

/// `make_nccl` for the run the torchrun variables describe, or for one process when no launcher
/// set them.
inline nccl_communicator nccl_from_environment(std::chrono::milliseconds timeout = std::chrono::minutes(5)) {
  return make_nccl(environment_or_single(), timeout);
}

} // namespace cairn::comm

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/comm/impl/nccl.ipp>
#endif
