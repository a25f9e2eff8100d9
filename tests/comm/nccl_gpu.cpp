// The raw NCCL communicator on one GPU (world size 1). Exits 77, which ctest reports as
// skipped, where there is no GPU or libtorch was built without CUDA.
#include <cairn/comm/collectives.hpp>
#include <cairn/comm/nccl.hpp>

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <cstdio>

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  if (!at::globalContext().hasCUDA()) {
    std::printf("SKIPPED: libtorch was built without CUDA\n");
    return 77;
  }
  int device = 0;
  ncclComm_t nccl = nullptr;
  cairn::comm::detail::check_nccl(ncclCommInitAll(&nccl, 1, &device), "ncclCommInitAll");
  cudaStream_t stream = nullptr;
  cairn::comm::detail::check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  cairn::comm::nccl_communicator comm(nccl, stream, c10::Device(c10::kCUDA, 0));
  int failures = 0;
  auto expect = [&](bool ok, char const* what) {
    if (!ok) {
      std::fprintf(stderr, "FAILED: %s\n", what);
      ++failures;
    }
  };
  auto cuda = at::TensorOptions().device(c10::Device(c10::kCUDA, 0));
  comm.barrier();
  auto t = at::arange(8, cuda.dtype(at::kFloat));
  comm.broadcast(t, 0);
  expect(t.cpu().equal(at::arange(8, at::kFloat)), "broadcast");
  comm.all_reduce(t, cairn::comm::reduce_op::sum);
  expect(t.cpu().equal(at::arange(8, at::kFloat)), "all_reduce sum");
  auto b = at::ones({4}, cuda.dtype(at::kBFloat16));
  comm.all_reduce(b, cairn::comm::reduce_op::max);
  expect(b.cpu().equal(at::ones({4}, at::kBFloat16)), "all_reduce max bf16");
  auto gathered = comm.all_gather(at::full({2, 3}, 5.0, cuda));
  expect(gathered.size() == 1 && gathered[0].cpu().equal(at::full({6}, 5.0)), "all_gather");
  expect(cairn::comm::all_gather_strings(comm, "gpu") == std::vector<std::string>{"gpu"}, "all_gather_strings");
  ncclCommDestroy(nccl);
  cudaStreamDestroy(stream);
  std::printf("%s\n", failures ? "NCCL communicator: FAILED" : "NCCL communicator: all collectives agree");
  return failures ? 1 : 0;
}
