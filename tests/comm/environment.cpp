// The torchrun variables: read, and every missing or malformed one named.
#include <cairn/comm/environment.hpp>

#include <doctest/doctest.h>

#include <cstdlib>

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
}
