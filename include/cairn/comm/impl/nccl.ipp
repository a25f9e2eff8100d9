// Definitions of <cairn/comm/nccl.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/comm/communicator.hpp>
#include <cairn/comm/environment.hpp>
#include <cairn/comm/nccl.hpp>
#include <cairn/comm/store.hpp>
#include <cairn/error.hpp>

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

namespace cairn::comm::detail {

CAIRN_DECL ncclDataType_t nccl_type(at::ScalarType type) {
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
    throw comm_error(comm_errc::backend, std::string("NCCL cannot carry tensors of type ") + c10::toString(type));
  }
}

} // namespace cairn::comm::detail

namespace cairn::comm {

CAIRN_DECL nccl_communicator::nccl_communicator(ncclComm_t comm, cudaStream_t stream, c10::Device device,
                                                std::chrono::milliseconds timeout)
    : comm_(comm), stream_(stream), device_(device), timeout_(timeout) {
  detail::check_nccl(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank");
  detail::check_nccl(ncclCommCount(comm_, &size_), "ncclCommCount");
}

CAIRN_DECL nccl_communicator nccl_communicator::owning(ncclComm_t comm, cudaStream_t stream, c10::Device device,
                                                       std::chrono::milliseconds timeout) {
  nccl_communicator c(comm, stream, device, timeout);
  c.owned_ = true;
  return c;
}

CAIRN_DECL void nccl_communicator::barrier() {
  auto token = at::zeros({1}, at::TensorOptions().dtype(at::kInt).device(device_));
  all_reduce(token, reduce_op::sum);
}

CAIRN_DECL void nccl_communicator::broadcast(at::Tensor& tensor, int root) {
  usable();
  auto buffer = tensor.contiguous();
  issued(ncclBroadcast(buffer.data_ptr(), buffer.data_ptr(), static_cast<std::size_t>(buffer.numel()),
                       detail::nccl_type(buffer.scalar_type()), root, comm_, stream_),
         "ncclBroadcast");
  synchronize("broadcast");
  if (!buffer.is_same(tensor)) tensor.copy_(buffer);
}

CAIRN_DECL void nccl_communicator::all_reduce(at::Tensor& tensor, reduce_op op) {
  usable();
  auto buffer = tensor.contiguous();
  issued(ncclAllReduce(buffer.data_ptr(), buffer.data_ptr(), static_cast<std::size_t>(buffer.numel()),
                       detail::nccl_type(buffer.scalar_type()), op == reduce_op::sum ? ncclSum : ncclMax, comm_,
                       stream_),
         "ncclAllReduce");
  synchronize("all_reduce");
  if (!buffer.is_same(tensor)) tensor.copy_(buffer);
}

CAIRN_DECL std::vector<at::Tensor> nccl_communicator::all_gather(at::Tensor const& tensor) {
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

CAIRN_DECL std::vector<at::Tensor> nccl_communicator::gather(at::Tensor const& tensor, int root) {
  auto flat = tensor.reshape({-1}).contiguous();
  auto counts = gather_equal(at::full({1}, flat.numel(), at::TensorOptions().dtype(at::kLong).device(device_)))
                    .to(c10::Device(c10::kCPU));
  std::vector<at::Tensor> out;
  if (rank_ == root)
    for (int r = 0; r < size_; ++r) out.push_back(at::empty({counts[r].item<std::int64_t>()}, flat.options()));
  gather_into(flat, root, out);
  return out;
}

CAIRN_DECL void nccl_communicator::gather_into(at::Tensor const& tensor, int root, std::vector<at::Tensor>& outputs) {
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
        issued(ncclRecv(out.data_ptr(), static_cast<std::size_t>(out.numel()), type, r, comm_, stream_), "ncclRecv");
      }
    }
  } else if (flat.numel() > 0) {
    issued(ncclSend(flat.data_ptr(), static_cast<std::size_t>(flat.numel()), type, root, comm_, stream_), "ncclSend");
  }
  issued(ncclGroupEnd(), "ncclGroupEnd");
  synchronize("gather");
}

CAIRN_DECL void nccl_communicator::exchange(at::Tensor const& sent, int to, at::Tensor& received, int from) {
  usable();
  auto flat = to >= 0 ? sent.reshape({-1}).contiguous() : at::Tensor();
  detail::check_nccl(ncclGroupStart(), "ncclGroupStart");
  if (from >= 0 && received.numel() > 0)
    issued(ncclRecv(received.data_ptr(), static_cast<std::size_t>(received.numel()),
                    detail::nccl_type(received.scalar_type()), from, comm_, stream_),
           "ncclRecv");
  if (to >= 0 && flat.numel() > 0)
    issued(ncclSend(flat.data_ptr(), static_cast<std::size_t>(flat.numel()), detail::nccl_type(flat.scalar_type()), to,
                    comm_, stream_),
           "ncclSend");
  issued(ncclGroupEnd(), "ncclGroupEnd");
  synchronize("exchange");
}

CAIRN_DECL at::Tensor nccl_communicator::gather_equal(at::Tensor const& tensor) {
  usable();
  auto out = at::empty({tensor.numel() * size_}, tensor.options());
  issued(ncclAllGather(tensor.data_ptr(), out.data_ptr(), static_cast<std::size_t>(tensor.numel()),
                       detail::nccl_type(tensor.scalar_type()), comm_, stream_),
         "ncclAllGather");
  synchronize("all_gather");
  return out;
}

CAIRN_DECL void nccl_communicator::synchronize(char const* what) {
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    auto status = cudaStreamQuery(stream_);
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) detail::check_cuda(status, what);
    ncclResult_t async = ncclSuccess;
    detail::check_nccl(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
    if (async != ncclSuccess && async != ncclInProgress) { // in progress: still being issued
      abort();
      throw comm_error(comm_errc::backend, "NCCL " + std::string(what) + " failed on rank " + std::to_string(rank_) +
                                               ": " + ncclGetErrorString(async) + "; the communicator is aborted");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      abort();
      throw comm_error(comm_errc::timeout, "NCCL " + std::string(what) + " did not finish within " +
                                               std::to_string(timeout_.count()) + " ms on rank " +
                                               std::to_string(rank_) +
                                               " (a dead or stuck peer?); the communicator is aborted");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

CAIRN_DECL void nccl_communicator::issued(ncclResult_t result, char const* what) {
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (result == ncclInProgress) {
    if (std::chrono::steady_clock::now() > deadline) {
      abort();
      throw comm_error(comm_errc::timeout, std::string("NCCL ") + what + " was not issued within " +
                                               std::to_string(timeout_.count()) + " ms on rank " +
                                               std::to_string(rank_) + "; the communicator is aborted");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    detail::check_nccl(ncclCommGetAsyncError(comm_, &result), "ncclCommGetAsyncError");
  }
  detail::check_nccl(result, what);
}

CAIRN_DECL void nccl_communicator::abort() noexcept {
  if (!aborted_ && comm_) ncclCommAbort(comm_);
  aborted_ = true;
}

CAIRN_DECL void nccl_communicator::release() noexcept {
  if (!owned_) return;
  if (comm_ && !aborted_) ncclCommDestroy(comm_);
  if (stream_) cudaStreamDestroy(stream_);
  comm_ = nullptr;
  stream_ = nullptr;
  owned_ = false;
}

namespace detail {

/// The rank's GPU, made current.
inline int select_nccl_device(distributed_environment const& env) {
  int visible = 0;
  if (cudaGetDeviceCount(&visible) != cudaSuccess) visible = 0;
  int device = cuda_device_for(env, visible);
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  return device;
}

inline std::vector<std::uint8_t> new_nccl_id() {
  ncclUniqueId id;
  check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  auto const* bytes = reinterpret_cast<std::uint8_t const*>(&id);
  return std::vector<std::uint8_t>(bytes, bytes + sizeof id);
}

/// Rank `rank` of the `size` ranks of the communicator of unique id `shared`, with a stream of
/// its own, on `device`.
inline nccl_communicator init_nccl(std::vector<std::uint8_t> const& shared, int size, int rank, int device,
                                   std::chrono::milliseconds timeout) {
  ncclUniqueId id;
  if (shared.size() != sizeof id) throw comm_error(comm_errc::backend, "the shared NCCL unique id has the wrong size");
  std::memcpy(&id, shared.data(), sizeof id);
  ncclComm_t comm = nullptr;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
  // A non-blocking start, waited for here up to `timeout`: a blocking ncclCommInitRank waits
  // for a peer that never comes for ever.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  auto started = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  if (started != ncclSuccess && started != ncclInProgress) check_nccl(started, "ncclCommInitRankConfig");
  auto deadline = std::chrono::steady_clock::now() + timeout;
  ncclResult_t state = ncclInProgress;
  while (true) {
    if (auto asked = ncclCommGetAsyncError(comm, &state); asked != ncclSuccess) state = asked;
    if (state != ncclInProgress) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ncclCommAbort(comm);
      throw comm_error(comm_errc::timeout, "rank " + std::to_string(rank) + " of an NCCL communicator of " +
                                               std::to_string(size) + " ranks: not every rank joined within " +
                                               std::to_string(timeout.count()) +
                                               " ms (a dead or stuck peer?); the communicator is aborted");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (state != ncclSuccess) {
    ncclCommAbort(comm);
    check_nccl(state, "ncclCommInitRankConfig");
  }
#else
  check_nccl(ncclCommInitRank(&comm, size, id, rank), "ncclCommInitRank");
#endif
  // A blocking stream: work on it waits for what the legacy default stream (libtorch's current
  // stream unless a program sets another) has queued before, so a collective never reads a tensor
  // that a kernel has yet to write.
  cudaStream_t stream = nullptr;
  if (auto status = cudaStreamCreateWithFlags(&stream, cudaStreamDefault); status != cudaSuccess) {
    ncclCommDestroy(comm);
    check_cuda(status, "cudaStreamCreateWithFlags");
  }
  return nccl_communicator::owning(comm, stream, c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device)),
                                   timeout);
}

} // namespace detail

CAIRN_DECL nccl_communicator make_nccl(distributed_environment const& env, std::chrono::milliseconds timeout) {
  int device = detail::select_nccl_device(env);
  auto store = make_store(env, timeout, {{"backend", "nccl"}});
  auto shared = share_from_rank0(*store, env, "cairn/nccl_unique_id", detail::new_nccl_id, timeout);
  return detail::init_nccl(shared, env.world_size, env.rank, device, timeout);
}

CAIRN_DECL nccl_communicator make_nccl_group(c10::intrusive_ptr<c10d::Store> const& store,
                                             distributed_environment const& env, std::string const& name,
                                             std::vector<int> const& members, std::chrono::milliseconds timeout) {
  auto me = std::find(members.begin(), members.end(), env.rank);
  if (me == members.end())
    throw comm_error(comm_errc::environment,
                     "rank " + std::to_string(env.rank) + " is not a member of the group '" + name + "'");
  int device = detail::select_nccl_device(env);
  auto key = "cairn.group/" + name + "/nccl_unique_id";
  if (me == members.begin()) store->set(key, detail::new_nccl_id());
  std::vector<std::uint8_t> shared;
  try {
    store->wait({key}, timeout);
    shared = store->get(key);
  } catch (std::exception const& e) {
    throw comm_error(comm_errc::timeout, "rank " + std::to_string(env.rank) + " got no NCCL id for the group '" + name +
                                             "' from rank " + std::to_string(members.front()) + " within " +
                                             std::to_string(timeout.count()) + " ms: " + e.what());
  }
  return detail::init_nccl(shared, static_cast<int>(members.size()), static_cast<int>(me - members.begin()), device,
                           timeout);
}

} // namespace cairn::comm
