#pragma once
// cairn: requires libtorch

#include <cairn/comm/communicator.hpp>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <memory>
#include <type_traits>
#include <vector>

namespace cairn::comm {

/// A reference to any communicator, behind one type: what cairn's compiled functions take, so
/// that a save or a load is compiled once (with CAIRN_SEPARATE_COMPILATION, in the translation
/// unit of <cairn/src.hpp>) whatever the caller's communicator. It does not own the
/// communicator, which must outlive it; it is cheap to copy (two pointers).
///
///     void save(comm::communicator_ref comm);   // called as save(my_gloo_communicator)
class communicator_ref {
public:
  template <communicator C>
  requires(!std::is_same_v<std::remove_cv_t<C>, communicator_ref>) communicator_ref(C& backend)
  noexcept : self_(std::addressof(backend)), table_(&table_for<C>) {}

  [[nodiscard]] c10::Device device() const { return table_->device(self_); }
  [[nodiscard]] int rank() const { return table_->rank(self_); }
  [[nodiscard]] int size() const { return table_->size(self_); }
  void barrier() { table_->barrier(self_); }
  void broadcast(at::Tensor& tensor, int root) { table_->broadcast(self_, tensor, root); }
  void all_reduce(at::Tensor& tensor, reduce_op op) { table_->all_reduce(self_, tensor, op); }
  [[nodiscard]] std::vector<at::Tensor> all_gather(at::Tensor const& tensor) {
    return table_->all_gather(self_, tensor);
  }
  [[nodiscard]] std::vector<at::Tensor> gather(at::Tensor const& tensor, int root) {
    return table_->gather(self_, tensor, root);
  }
  void gather_into(at::Tensor const& tensor, int root, std::vector<at::Tensor>& outputs) {
    table_->gather_into(self_, tensor, root, outputs);
  }
  void exchange(at::Tensor const& sent, int to, at::Tensor& received, int from) {
    table_->exchange(self_, sent, to, received, from);
  }

private:
  struct table {
    c10::Device (*device)(void*);
    int (*rank)(void*);
    int (*size)(void*);
    void (*barrier)(void*);
    void (*broadcast)(void*, at::Tensor&, int);
    void (*all_reduce)(void*, at::Tensor&, reduce_op);
    std::vector<at::Tensor> (*all_gather)(void*, at::Tensor const&);
    std::vector<at::Tensor> (*gather)(void*, at::Tensor const&, int);
    void (*gather_into)(void*, at::Tensor const&, int, std::vector<at::Tensor>&);
    void (*exchange)(void*, at::Tensor const&, int, at::Tensor&, int);
  };

  template <class C> static C& self(void* p) noexcept { return *static_cast<C*>(p); }

  template <class C> static constexpr table table_for{
      [](void* p) { return self<C>(p).device(); },
      [](void* p) { return self<C>(p).rank(); },
      [](void* p) { return self<C>(p).size(); },
      [](void* p) { self<C>(p).barrier(); },
      [](void* p, at::Tensor& t, int root) { self<C>(p).broadcast(t, root); },
      [](void* p, at::Tensor& t, reduce_op op) { self<C>(p).all_reduce(t, op); },
      [](void* p, at::Tensor const& t) { return self<C>(p).all_gather(t); },
      [](void* p, at::Tensor const& t, int root) { return comm::gather(self<C>(p), t, root); },
      [](void* p, at::Tensor const& t, int root, std::vector<at::Tensor>& out) {
        comm::gather_into(self<C>(p), t, root, out);
      },
      [](void* p, at::Tensor const& sent, int to, at::Tensor& received, int from) {
        comm::exchange(self<C>(p), sent, to, received, from);
      },
  };

  void* self_;
  table const* table_;
};

static_assert(communicator<communicator_ref>);

} // namespace cairn::comm
