#pragma once
// cairn: requires libtorch

#include <cairn/comm/communicator.hpp>

#include <ATen/core/Tensor.h>

#include <vector>

namespace cairn::comm {

/// A world of one process: every collective is trivial.
class single_process {
public:
  explicit single_process(c10::Device device = c10::Device(c10::kCPU)) : device_(device) {}

  [[nodiscard]] c10::Device device() const noexcept { return device_; }
  [[nodiscard]] int rank() const noexcept { return 0; }
  [[nodiscard]] int size() const noexcept { return 1; }
  void barrier() {}
  void broadcast(at::Tensor&, int) {}
  void all_reduce(at::Tensor&, reduce_op) {}
  [[nodiscard]] std::vector<at::Tensor> all_gather(at::Tensor const& tensor) { return {tensor.reshape({-1}).clone()}; }
  [[nodiscard]] std::vector<at::Tensor> gather(at::Tensor const& tensor, int) { return all_gather(tensor); }
  void gather_into(at::Tensor const& tensor, int, std::vector<at::Tensor>& outputs) {
    if (tensor.numel() > 0) outputs.at(0).copy_(tensor.reshape({-1}));
  }
  /// To and from itself (rank 0), or nothing (-1).
  void exchange(at::Tensor const& sent, int to, at::Tensor& received, int from) {
    if (to > 0 || from > 0 || (to == 0) != (from == 0))
      throw comm_error(comm_errc::backend, "a world of one process has no rank but 0 to send to or receive from");
    if (to == 0 && sent.numel() > 0) received.copy_(sent.reshape(received.sizes()));
  }

private:
  c10::Device device_;
};

static_assert(communicator<single_process>);

} // namespace cairn::comm
