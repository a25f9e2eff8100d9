#pragma once
// cairn: requires libtorch

#include <cairn/comm/communicator.hpp>
#include <cairn/error.hpp>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <cstdint>
#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace cairn::comm {

/// A communicator over a libtorch c10d process group (or backend): ProcessGroupGloo on CPU,
/// ProcessGroupNCCL on GPU, or any other. Works with libtorch 1.13 and 2.x.
template <class Group> class c10d_communicator {
public:
  explicit c10d_communicator(c10::intrusive_ptr<Group> group, c10::Device device = c10::Device(c10::kCPU))
      : group_(std::move(group)), device_(device) {}

  [[nodiscard]] c10::Device device() const noexcept { return device_; }
  [[nodiscard]] int rank() const { return group_->getRank(); }
  [[nodiscard]] int size() const { return group_->getSize(); }
  [[nodiscard]] Group& group() const noexcept { return *group_; }

  void barrier() {
    run("barrier", [&] { group_->barrier(c10d::BarrierOptions())->wait(); });
  }

  void broadcast(at::Tensor& tensor, int root) {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    run("broadcast", [&] { group_->broadcast(tensors, options)->wait(); });
  }

  void all_reduce(at::Tensor& tensor, reduce_op op) {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = op == reduce_op::sum ? c10d::ReduceOp::SUM : c10d::ReduceOp::MAX;
    run("all_reduce", [&] { group_->allreduce(tensors, options)->wait(); });
  }

  /// Every rank's tensor, flattened, in rank order; sizes may differ between ranks.
  [[nodiscard]] std::vector<at::Tensor> all_gather(at::Tensor const& tensor) {
    auto flat = tensor.reshape({-1}).contiguous();
    auto counts = counts_of(flat);
    auto longest = *std::max_element(counts.begin(), counts.end());
    if (longest == 0) return std::vector<at::Tensor>(counts.size(), flat); // Gloo fails on empty gathers
    at::Tensor padded = flat;
    if (flat.numel() != longest) {
      padded = at::zeros({longest}, flat.options());
      padded.narrow(0, 0, flat.numel()).copy_(flat);
    }
    std::vector<at::Tensor> gathered = gather_equal(padded);
    for (std::size_t r = 0; r < gathered.size(); ++r) gathered[r] = gathered[r].narrow(0, 0, counts[r]);
    return gathered;
  }

  /// Every rank's tensor, flattened, in rank order, on rank `root` only (the others get an empty
  /// list): what a rank that writes a whole tensor needs, without sending it to every rank.
  [[nodiscard]] std::vector<at::Tensor> gather(at::Tensor const& tensor, int root) {
    auto flat = tensor.reshape({-1}).contiguous();
    auto counts = counts_of(flat);
    std::vector<at::Tensor> out;
    if (rank() == root)
      for (auto n : counts) out.push_back(at::empty({n}, flat.options()));
    gather_into(flat, root, out);
    return out;
  }

  /// Every rank's tensor into `outputs[rank]` on rank `root` (each of the size that rank sends,
  /// contiguous, on device(); views of one larger tensor will do); `outputs` is ignored on the
  /// others. Point to point: no padding, no exchange of sizes.
  void gather_into(at::Tensor const& tensor, int root, std::vector<at::Tensor>& outputs) {
    auto flat = tensor.reshape({-1}).contiguous();
    if (rank() != root) {
      if (flat.numel() == 0) return;
      std::vector<at::Tensor> sent{flat};
      run("gather (send)", [&] { group_->send(sent, root, 0)->wait(); });
      return;
    }
    std::vector<std::vector<at::Tensor>> received;
    received.reserve(outputs.size()); // the works hold references to these lists
    std::vector<c10::intrusive_ptr<c10d::Work>> pending;
    for (int r = 0; r < size(); ++r) {
      auto& out = outputs.at(static_cast<std::size_t>(r));
      if (r == root) {
        if (flat.numel() > 0) out.copy_(flat);
      } else if (out.numel() > 0) {
        received.push_back({out});
        run("gather (receive)", [&] { pending.push_back(group_->recv(received.back(), r, 0)); });
      }
    }
    run("gather (receive)", [&] {
      for (auto& work : pending) work->wait();
    });
  }

  /// Sends `sent` to rank `to` and receives `received` (contiguous, on device(), of the size
  /// `from` sends) from rank `from` at once; -1: nothing that way (see comm::exchange).
  void exchange(at::Tensor const& sent, int to, at::Tensor& received, int from) {
    std::vector<at::Tensor> out, in{received};
    if (to >= 0) out.push_back(sent.reshape({-1}).contiguous());
    std::vector<c10::intrusive_ptr<c10d::Work>> pending;
    run("exchange", [&] {
      if (from >= 0 && received.numel() > 0) pending.push_back(group_->recv(in, from, 1));
      if (to >= 0 && out[0].numel() > 0) pending.push_back(group_->send(out, to, 1));
      for (auto& work : pending) work->wait();
    });
  }

private:
  /// Runs `step` of collective `what`; a failure of the backend (a rank that died, a broken
  /// connection, a timeout) becomes a comm_error naming this rank and the collective, its kind
  /// comm_errc::timeout or comm_errc::backend, the backend's own message kept.
  template <class Step> void run(char const* what, Step&& step) const {
    try {
      step();
    } catch (error const&) {
      throw;
    } catch (std::exception const& e) {
      std::string message = e.what();
      bool timed_out = message.find("imed out") != std::string::npos || message.find("imeout") != std::string::npos;
      throw comm_error(timed_out ? comm_errc::timeout : comm_errc::backend,
                       "rank " + std::to_string(group_->getRank()) + " of " + std::to_string(group_->getSize()) + ": " +
                           what + " failed (" + (timed_out ? "timed out" : "a rank died or the connection broke") +
                           "): " + message.substr(0, message.find('\n')));
    }
  }

  /// Every rank's element count, in rank order.
  std::vector<std::int64_t> counts_of(at::Tensor const& flat) {
    std::vector<std::int64_t> counts;
    for (at::Tensor const& s :
         gather_equal(at::full({1}, flat.numel(), at::TensorOptions().dtype(at::kLong).device(device_))))
      counts.push_back(s.to(c10::Device(c10::kCPU)).item<std::int64_t>());
    return counts;
  }

  std::vector<at::Tensor> gather_equal(at::Tensor const& tensor) {
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int r = 0; r < size(); ++r) outputs[0].push_back(at::empty_like(tensor));
    std::vector<at::Tensor> inputs{tensor};
    run("all_gather", [&] { group_->allgather(outputs, inputs, c10d::AllgatherOptions())->wait(); });
    return std::move(outputs[0]);
  }

  c10::intrusive_ptr<Group> group_;
  c10::Device device_;
};

} // namespace cairn::comm
