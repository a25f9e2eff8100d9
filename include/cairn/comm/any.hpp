#pragma once
// cairn: requires libtorch

#include <cairn/comm/communicator.hpp>

#include <ATen/core/Tensor.h>

#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace cairn::comm {

/// Any communicator, chosen at run time (one process, Gloo, NCCL…), behind one type: code
/// templated on a communicator is compiled once for it. Owns the communicator it holds.
///
///     comm::any_communicator comm = world_size > 1 ? comm::any_communicator(comm::gloo_from_environment())
///                                                  : comm::any_communicator(comm::single_process());
class any_communicator {
public:
  template <communicator C>
  requires(!std::is_same_v<std::decay_t<C>, any_communicator>) explicit any_communicator(C&& backend)
      : self_(std::make_unique<model<std::decay_t<C>>>(std::forward<C>(backend))) {}

  [[nodiscard]] c10::Device device() const { return self_->device(); }
  [[nodiscard]] int rank() const { return self_->rank(); }
  [[nodiscard]] int size() const { return self_->size(); }
  void barrier() { self_->barrier(); }
  void broadcast(at::Tensor& tensor, int root) { self_->broadcast(tensor, root); }
  void all_reduce(at::Tensor& tensor, reduce_op op) { self_->all_reduce(tensor, op); }
  [[nodiscard]] std::vector<at::Tensor> all_gather(at::Tensor const& tensor) { return self_->all_gather(tensor); }
  [[nodiscard]] std::vector<at::Tensor> gather(at::Tensor const& tensor, int root) {
    return self_->gather(tensor, root);
  }
  void gather_into(at::Tensor const& tensor, int root, std::vector<at::Tensor>& outputs) {
    self_->gather_into(tensor, root, outputs);
  }
  void exchange(at::Tensor const& sent, int to, at::Tensor& received, int from) {
    self_->exchange(sent, to, received, from);
  }

private:
  struct concept_ {
    virtual ~concept_() = default;
    [[nodiscard]] virtual c10::Device device() const = 0;
    [[nodiscard]] virtual int rank() const = 0;
    [[nodiscard]] virtual int size() const = 0;
    virtual void barrier() = 0;
    virtual void broadcast(at::Tensor& tensor, int root) = 0;
    virtual void all_reduce(at::Tensor& tensor, reduce_op op) = 0;
    [[nodiscard]] virtual std::vector<at::Tensor> all_gather(at::Tensor const& tensor) = 0;
    [[nodiscard]] virtual std::vector<at::Tensor> gather(at::Tensor const& tensor, int root) = 0;
    virtual void gather_into(at::Tensor const& tensor, int root, std::vector<at::Tensor>& outputs) = 0;
    virtual void exchange(at::Tensor const& sent, int to, at::Tensor& received, int from) = 0;
  };

  template <class C> struct model final : concept_ {
    explicit model(C backend) : c(std::move(backend)) {}
    [[nodiscard]] c10::Device device() const override { return c.device(); }
    [[nodiscard]] int rank() const override { return c.rank(); }
    [[nodiscard]] int size() const override { return c.size(); }
    void barrier() override { c.barrier(); }
    void broadcast(at::Tensor& tensor, int root) override { c.broadcast(tensor, root); }
    void all_reduce(at::Tensor& tensor, reduce_op op) override { c.all_reduce(tensor, op); }
    [[nodiscard]] std::vector<at::Tensor> all_gather(at::Tensor const& tensor) override { return c.all_gather(tensor); }
    [[nodiscard]] std::vector<at::Tensor> gather(at::Tensor const& tensor, int root) override {
      return comm::gather(c, tensor, root);
    }
    void gather_into(at::Tensor const& tensor, int root, std::vector<at::Tensor>& outputs) override {
      comm::gather_into(c, tensor, root, outputs);
    }
    void exchange(at::Tensor const& sent, int to, at::Tensor& received, int from) override {
      comm::exchange(c, sent, to, received, from);
    }
    C c;
  };

  std::unique_ptr<concept_> self_;
};

static_assert(communicator<any_communicator>);

} // namespace cairn::comm
