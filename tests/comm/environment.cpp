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

namespace {
/// An environment of exactly these variables.
cairn::comm::variable_lookup only(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](char const* name) -> std::optional<std::string> {
    auto found = variables.find(name);
    return found == variables.end() ? std::nullopt : std::optional<std::string>(found->second);
  };
}
} // namespace

TEST_CASE("a task of srun: SLURM's variables alone give the rank, the node and the rendezvous") {
  // Task 5 of 8 on the second of two nodes of four tasks each, as `srun -N2 --ntasks-per-node=4` starts it.
  std::map<std::string, std::string> slurm{{"SLURM_PROCID", "5"},
                                           {"SLURM_NTASKS", "8"},
                                           {"SLURM_LOCALID", "1"},
                                           {"SLURM_NODEID", "1"},
                                           {"SLURM_TASKS_PER_NODE", "4(x2)"},
                                           {"SLURM_JOB_NODELIST", "gpu[07-08]"},
                                           {"SLURM_JOB_ID", "123456"},
                                           {"SLURM_STEP_ID", "0"}};
  auto env = cairn::comm::read_environment(only(slurm));
  CHECK(env.source == "SLURM");
  CHECK(env.rank == 5);
  CHECK(env.world_size == 8);
  CHECK(env.local_rank == 1);
  CHECK(env.local_world_size == 4);
  CHECK(env.node_rank == 1);
  CHECK(env.master_addr == "gpu07");                // the first host of the job, node 0
  CHECK(env.master_port == 20000 + 123456 % 10000); // the same on every task of the job
  CHECK(cairn::comm::launched_as_rank(only(slurm)));

  // MASTER_ADDR and MASTER_PORT, where set, win over what SLURM gives.
  auto with_master = slurm;
  with_master["MASTER_ADDR"] = "10.1.2.3";
  with_master["MASTER_PORT"] = "29400";
  auto chosen = cairn::comm::read_environment(only(with_master));
  CHECK(chosen.master_addr == "10.1.2.3");
  CHECK(chosen.master_port == 29400);

  // The torchrun variables win over SLURM's: `cairn launch` (or torchrun) inside an allocation.
  auto launched = slurm;
  for (auto [k, v] : {std::pair{"RANK", "2"},
                      {"WORLD_SIZE", "3"},
                      {"MASTER_ADDR", "127.0.0.1"},
                      {"MASTER_PORT", "1234"},
                      {"LOCAL_RANK", "2"},
                      {"LOCAL_WORLD_SIZE", "3"},
                      {"GROUP_RANK", "0"}})
    launched[k] = v;
  auto inner = cairn::comm::read_environment(only(launched));
  CHECK(inner.source == "torchrun variables");
  CHECK(inner.rank == 2);
  CHECK(inner.world_size == 3);
  CHECK(inner.local_world_size == 3);
  CHECK(inner.master_port == 1234);
}

TEST_CASE("SLURM node lists and task counts in their compressed forms") {
  using cairn::comm::detail::first_slurm_host;
  using cairn::comm::detail::slurm_tasks_on_node;
  CHECK(first_slurm_host("node[01-04,07],gpu2") == "node01"); // zero padding kept
  CHECK(first_slurm_host("gnode[10,20,25,37]") == "gnode10");
  CHECK(first_slurm_host("a17,b3") == "a17");
  CHECK(first_slurm_host("rack[2-3]-node[5-6]") == "rack2-node5");
  CHECK(first_slurm_host("single") == "single");
  for (auto bad : {"", "node[", "node[]", "node]1", "node[a-b]", ",x", "[1-3]", "a[1--3]", "a[3-1]", "a[1-]", "a[-1]",
                   "a[1,,2]", "a[1", "a,", "a,[1-2]", "a[[1]]", "a b", "a[1-2]x]", "a;b"})
    CHECK_KIND(first_slurm_host(bad), cairn::comm_errc::environment);
  CHECK_THROWS_WITH(first_slurm_host("a[3-1]"), doctest::Contains("the range 3-1 runs backwards"));
  CHECK_THROWS_WITH(first_slurm_host("[1-3]"), doctest::Contains("SLURM_JOB_NODELIST=[1-3] is not a SLURM node list"));
  using cairn::comm::detail::read_slurm_hosts;
  CHECK(read_slurm_hosts("X", "node[01-04,07],gpu2").count == 6);
  CHECK(read_slurm_hosts("X", "rack[2-3]-node[5-6]").count == 4);
  CHECK(read_slurm_hosts("X", "a[0-999999999999],b[0-999999999999]").count == 1LL << 40); // saturates, no overflow
  CHECK(slurm_tasks_on_node("4", 0) == 4);
  CHECK(slurm_tasks_on_node("4(x2),3", 0) == 4);
  CHECK(slurm_tasks_on_node("4(x2),3", 1) == 4);
  CHECK(slurm_tasks_on_node("4(x2),3", 2) == 3);
  CHECK(slurm_tasks_on_node("2,1(x3)", 3) == 1);
  CHECK_THROWS_WITH(slurm_tasks_on_node("4(x2),3", 3), doctest::Contains("no node 3 (it lists 3)"));
  for (auto bad : {"", "4(x2", "x", "4(x0)", "0"})
    CHECK_KIND(slurm_tasks_on_node(bad, 0), cairn::comm_errc::environment);
}

TEST_CASE("SLURM without what the rendezvous needs, or outside an srun step, says so") {
  std::map<std::string, std::string> slurm{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}};
  CHECK_THROWS_WITH_AS(cairn::comm::read_environment(only(slurm)), doctest::Contains("SLURM_JOB_NODELIST"),
                       cairn::comm_error);
  slurm["SLURM_JOB_NODELIST"] = "n[1-2]";
  CHECK_THROWS_WITH_AS(cairn::comm::read_environment(only(slurm)), doctest::Contains("MASTER_PORT"), cairn::comm_error);
  slurm["SLURM_PROCID"] = "2"; // not a task of a 2-task job
  slurm["MASTER_PORT"] = "29500";
  CHECK_THROWS_WITH(cairn::comm::read_environment(only(slurm)), doctest::Contains("SLURM_PROCID=2"));

  // The batch script itself has SLURM_PROCID and SLURM_NTASKS too: one process, warned.
  slurm["SLURM_PROCID"] = "0";
  slurm.erase("SLURM_STEP_ID");
  std::vector<std::string> warnings;
  cairn::scoped_diagnostic_sink sink([&](cairn::severity s, cairn::diagnostic const& d) {
    if (s == cairn::severity::warning) warnings.push_back(d.to_string());
  });
  auto env = cairn::comm::read_environment(only(slurm));
  CHECK(env.world_size == 1); // it runs alone, and does not wait for ranks that never start
  CHECK(env.rank == 0);
  CHECK(env.source == "SLURM batch script (one process)");
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("outside an srun step") != std::string::npos);
  CHECK(warnings[0].find("runs as one process") != std::string::npos);
  // A program reads its own environment more than once (its grid, its communicators): warned once.
  warnings.clear();
  for (auto const& [k, v] : slurm) ::setenv(k.c_str(), v.c_str(), 1);
  for (auto k : {"WORLD_SIZE", "RANK", "MASTER_ADDR", "LOCAL_RANK"}) ::unsetenv(k);
  CHECK(cairn::comm::environment_or_single().world_size == 1);
  CHECK(cairn::comm::read_environment().world_size == 1);
  CHECK(warnings.size() == 1);
  for (auto const& [k, v] : slurm) ::unsetenv(k.c_str());

  // A task the node does not run, a node the job does not have: named.
  slurm["SLURM_STEP_ID"] = "0";
  slurm["SLURM_LOCALID"] = "2";
  slurm["SLURM_TASKS_PER_NODE"] = "2";
  CHECK_THROWS_WITH_AS(
      cairn::comm::read_environment(only(slurm)),
      doctest::Contains("SLURM_LOCALID=2 names no task of node 0, which runs 2 tasks (SLURM_TASKS_PER_NODE)"),
      cairn::comm_error);
  slurm["SLURM_LOCALID"] = "1";
  slurm["SLURM_NODEID"] = "2"; // n[1-2] has two nodes
  CHECK_THROWS_WITH(cairn::comm::read_environment(only(slurm)),
                    doctest::Contains("SLURM_NODEID=2 must be an integer in [0, 1]"));
  slurm["SLURM_NODEID"] = "1";
  slurm["SLURM_TASKS_PER_NODE"] = "1(x2)";
  CHECK_THROWS_WITH(cairn::comm::read_environment(only(slurm)),
                    doctest::Contains("SLURM_LOCALID=1 names no task of node 1"));
  slurm["SLURM_LOCALID"] = "0";
  CHECK(cairn::comm::read_environment(only(slurm)).node_rank == 1);
  // A malformed node list is named, not read as some host.
  slurm["SLURM_JOB_NODELIST"] = "[1-3]";
  CHECK_THROWS_WITH(cairn::comm::read_environment(only(slurm)), doctest::Contains("SLURM_JOB_NODELIST=[1-3]"));
  // A step's own node list comes first: a step on part of the allocation meets on its own first node.
  slurm["SLURM_STEP_NODELIST"] = "n[5-6]";
  CHECK(cairn::comm::read_environment(only(slurm)).master_addr == "n5");

  // A single task needs no rendezvous at all.
  auto alone = cairn::comm::read_environment(only({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}));
  CHECK(alone.world_size == 1);
  CHECK_FALSE(cairn::comm::launched_as_rank(only({{"SLURM_PROCID", "0"}})));
}
