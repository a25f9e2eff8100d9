// The single-process communicator, and Gloo in a world of one.
#include <cairn/comm.hpp>
#include <cairn/comm/gloo.hpp>

#include <ATen/ATen.h>
#include <doctest/doctest.h>

#include <cstdlib>

TEST_CASE("a world of one: every collective is the identity") {
  cairn::comm::single_process comm;
  CHECK(comm.rank() == 0);
  CHECK(comm.size() == 1);
  auto t = at::arange(6, at::kFloat).reshape({2, 3});
  comm.broadcast(t, 0);
  comm.all_reduce(t, cairn::comm::reduce_op::sum);
  CHECK(t.equal(at::arange(6, at::kFloat).reshape({2, 3})));
  auto gathered = comm.all_gather(t);
  REQUIRE(gathered.size() == 1);
  CHECK(gathered[0].equal(at::arange(6, at::kFloat)));
  CHECK(cairn::comm::all_gather_strings(comm, "x") == std::vector<std::string>{"x"});
}

TEST_CASE("Gloo with a world size of one needs no rendezvous") {
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "1", 1);
  ::unsetenv("MASTER_ADDR");
  ::unsetenv("MASTER_PORT");
  auto comm = cairn::comm::gloo_from_environment();
  CHECK(comm.size() == 1);
  auto t = at::ones({3});
  comm.all_reduce(t, cairn::comm::reduce_op::sum);
  CHECK(t.equal(at::ones({3})));
  CHECK(cairn::comm::broadcast_string(comm, "hello") == "hello");
}

TEST_CASE("a communicator_ref forwards every collective to the communicator it refers to") {
  struct counting { // a user's communicator: counts what reaches it
    int calls = 0;
    c10::Device device() const { return c10::Device(c10::kCPU); }
    int rank() const { return 0; }
    int size() const { return 1; }
    void barrier() { ++calls; }
    void broadcast(at::Tensor& t, int) { t.add_(1), ++calls; }
    void all_reduce(at::Tensor& t, cairn::comm::reduce_op op) {
      t.mul_(op == cairn::comm::reduce_op::sum ? 2 : 3), ++calls;
    }
    std::vector<at::Tensor> all_gather(at::Tensor const& t) {
      return ++calls, std::vector<at::Tensor>{t.reshape({-1}) * 10};
    }
  } backend;
  cairn::comm::communicator_ref ref(backend);
  auto copy = ref; // copies refer to the same communicator
  auto t = at::ones({2});
  copy.barrier();
  copy.broadcast(t, 0);
  CHECK(t.equal(at::full({2}, 2.0)));
  copy.all_reduce(t, cairn::comm::reduce_op::max);
  CHECK(t.equal(at::full({2}, 6.0)));
  // No gather of its own: gather and gather_into go through its all_gather.
  auto parts = cairn::comm::gather(copy, t, 0);
  REQUIRE(parts.size() == 1);
  CHECK(parts[0].equal(at::full({2}, 60.0)));
  std::vector<at::Tensor> into{at::zeros({2})};
  copy.gather_into(t, 0, into);
  CHECK(into[0].equal(at::full({2}, 60.0)));
  CHECK(backend.calls == 5);
  CHECK(ref.device().is_cpu());
}
