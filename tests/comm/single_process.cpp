// The single-process communicator, and Gloo in a world of one.
#include <cairn/comm.hpp>

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
