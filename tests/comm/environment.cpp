// The torchrun variables: read, and every missing or malformed one named.
#include <cairn/comm/environment.hpp>
#include <cairn/config.hpp>

#include <boost/describe/class.hpp>
#include <boost/json.hpp>
#include <doctest/doctest.h>

#include <cstdlib>

#include "../error_kind.hpp"

namespace {
void set(char const* name, char const* value) {
  if (value)
    ::setenv(name, value, 1);
  else
    ::unsetenv(name);
}
void set_all(char const* rank, char const* world, char const* addr, char const* port) {
  set("RANK", rank);
  set("WORLD_SIZE", world);
  set("MASTER_ADDR", addr);
  set("MASTER_PORT", port);
  set("LOCAL_RANK", nullptr);
}
} // namespace

TEST_CASE("the variables of a multi-process run") {
  set_all("1", "4", "10.0.0.1", "29500");
  set("LOCAL_RANK", "1");
  auto env = cairn::comm::read_environment();
  CHECK(env.rank == 1);
  CHECK(env.world_size == 4);
  CHECK(env.local_rank == 1);
  CHECK(env.master_addr == "10.0.0.1");
  CHECK(env.master_port == 29500);
}

TEST_CASE("a single process needs no rendezvous address") {
  set_all("0", "1", nullptr, nullptr);
  auto env = cairn::comm::read_environment();
  CHECK(env.world_size == 1);
}

TEST_CASE("a missing or malformed variable is named") {
  set_all(nullptr, "2", "h", "1");
  CHECK_THROWS_WITH_AS(cairn::comm::read_environment(),
                       "environment variable RANK is not set (launch with `cairn launch` or torchrun)", cairn::error);
  set_all("0", "2", nullptr, "1");
  CHECK_THROWS_WITH_AS(cairn::comm::read_environment(), doctest::Contains("MASTER_ADDR is not set"), cairn::error);
  set_all("2", "2", "h", "1");
  CHECK_THROWS_WITH_AS(cairn::comm::read_environment(), "environment variable RANK=2 must be an integer in [0, 1]",
                       cairn::error);
  set_all("0", "two", "h", "1");
  CHECK_THROWS_WITH_AS(cairn::comm::read_environment(), doctest::Contains("WORLD_SIZE=two must be an integer"),
                       cairn::error);
  set_all("0", "2", "h", "70000");
  CHECK_THROWS_WITH_AS(cairn::comm::read_environment(),
                       "environment variable MASTER_PORT=70000 must be an integer in [1, 65535]", cairn::error);
  CHECK_KIND(cairn::comm::read_environment(), cairn::comm_errc::environment);
}

TEST_CASE("without a launcher, a program is one process alone") {
  set_all(nullptr, nullptr, nullptr, nullptr);
  auto env = cairn::comm::environment_or_single();
  CHECK(env.rank == 0);
  CHECK(env.world_size == 1);
  set_all("0", "2", nullptr, nullptr); // a launcher that forgot the address is still an error
  CHECK_THROWS_WITH_AS(cairn::comm::environment_or_single(), doctest::Contains("MASTER_ADDR"), cairn::error);
}

TEST_CASE("each rank of a node takes the GPU of its LOCAL_RANK; none, or too few, is an error saying so") {
  cairn::comm::distributed_environment env;
  env.rank = 5;
  env.local_rank = 1;
  CHECK(cairn::comm::cuda_device_for(env, 8) == 1);
  set("CUDA_VISIBLE_DEVICES", "3");
  CHECK_THROWS_WITH_AS(cairn::comm::cuda_device_for(env, 1),
                       "rank 5: LOCAL_RANK=1, but 1 GPU is visible (CUDA_VISIBLE_DEVICES=3); NCCL needs a GPU of its "
                       "own for each rank of a node",
                       cairn::error);
  set("CUDA_VISIBLE_DEVICES", nullptr);
  CHECK_THROWS_WITH_AS(cairn::comm::cuda_device_for(env, 0), "rank 5: no GPU is visible", cairn::error);
  CHECK_KIND(cairn::comm::cuda_device_for(env, 0), cairn::comm_errc::environment);
}

TEST_CASE(
    "comm=auto is NCCL for CUDA tensors when built with it, else Gloo; NCCL asked for and impossible is an error") {
  using cairn::comm::backend;
  using cairn::comm::resolve_backend;
  CHECK(resolve_backend(backend::auto_, true, true) == backend::nccl);
  CHECK(resolve_backend(backend::auto_, true, false) == backend::gloo);
  CHECK(resolve_backend(backend::auto_, false, true) == backend::gloo);
  CHECK(resolve_backend(backend::gloo, true, true) == backend::gloo);
  CHECK(resolve_backend(backend::nccl, true, true) == backend::nccl);
  CHECK_KIND(resolve_backend(backend::nccl, true, false), cairn::comm_errc::environment);
  CHECK_KIND(resolve_backend(backend::nccl, false, true), cairn::comm_errc::environment);
}

namespace {
struct comm_choice {
  cairn::comm::backend comm = cairn::comm::backend::auto_;
};
BOOST_DESCRIBE_STRUCT(comm_choice, (), (comm))
} // namespace

TEST_CASE("an enumerator named after a keyword (auto_) is spelt without its underscore in a config") {
  CHECK(cairn::to_json(comm_choice{}).at("comm") == "auto");
  CHECK(cairn::from_json<comm_choice>(boost::json::object{}, {"comm=nccl"}).comm == cairn::comm::backend::nccl);
  CHECK(cairn::from_json<comm_choice>(boost::json::object{{"comm", "auto"}}).comm == cairn::comm::backend::auto_);
  CHECK_THROWS_AS(cairn::from_json<comm_choice>(boost::json::object{{"comm", "auto_"}}), cairn::config_error);
}
