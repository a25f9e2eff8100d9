// The local tier against the persistent one, in the same run, on every rank of a launch whose
// nodes are its launcher's ranks (LOCAL_WORLD_SIZE of them; one launcher of 4 ranks as 2 nodes
// of 2 with `--nodes 2`): the same state (weights and two Adam moments, flat-sharded over the
// ranks), saved by one checkpoint manager both ways in interleaved rounds, then recovered.
//
//   persistent save   manager.save(): pause (until it returns: the host copy) and total (until
//                     committed), into the experiment directory
//   local save        manager.save_local(): the same, into each node's local directory, each
//                     rank's part copied to its peer on the other node
//   recovery          a new manager's resume() after node 1 is replaced (its local directory
//                     deleted): node 0's ranks read their own disk, node 1's parts come from node 0;
//                     against a resume from the persistent tier alone (local directories deleted),
//                     its files first dropped from the page cache (posix_fadvise), as a replaced
//                     node finds them: not in its memory
//
//     cairn launch -n 4 -- build/bin/cairn-bench-tiers [MiB per rank, default 128] [directory, default
//     the temp directory; s3://bucket/prefix for an object store] [local directory, default /dev/shm]
//     [rounds, default 3] [--nodes N]
#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/comm/collectives.hpp>
#include <cairn/comm/connect.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/training/manager.hpp>

#include <ATen/ATen.h>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "model_state.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Parameters of 4 Mi elements, each flat-sharded over the `size` ranks (ZeRO's layout), three
/// state shards each: about `bytes` on this rank.
cairn::model_state make_state(std::size_t bytes, int rank, int size) {
  cairn::model_state state;
  state.shard_names = {"weights", "exp_avg", "exp_avg_sq"};
  std::uint64_t const numel = std::uint64_t{4} << 20;
  auto parameters = std::max<std::size_t>(1, bytes * static_cast<std::size_t>(size) / (numel * 12));
  for (std::size_t i = 0; i < parameters; ++i) {
    std::vector<std::uint64_t> shape{numel / 1024, 1024};
    auto shard = cairn::shard_layout::whole(shape);
    auto r = static_cast<std::uint64_t>(rank), n = static_cast<std::uint64_t>(size);
    shard.flat = cairn::flat_range{numel * r / n, numel * (r + 1) / n};
    cairn::parameter_state p;
    p.layout = {"layer" + std::to_string(i) + ".weight", shape, cairn::io::dtype::F32, false, shard};
    for (int s = 0; s < 3; ++s) p.shards.push_back(at::rand({static_cast<std::int64_t>(shard.numel())}));
    state.parameters.push_back(std::move(p));
  }
  return state;
}

bool equal(cairn::model_state const& a, cairn::model_state const& b) {
  for (std::size_t i = 0; i < a.parameters.size(); ++i)
    for (std::size_t k = 0; k < a.parameters[i].shards.size(); ++k)
      if (!at::equal(a.parameters[i].shards[k], b.parameters[i].shards[k])) return false;
  return true;
}

/// Removes everything under `path`, a directory or an object store's prefix.
void remove_stored(std::filesystem::path const& path) {
  auto where = cairn::io::open_location(path.string());
  where.backend->remove_tree(where.key);
}

/// Drops `file` from the page cache (its pages are clean: written and fsynced); nothing for an
/// object, which no cache of this host holds.
void drop_cached(std::filesystem::path const& file) {
  if (cairn::io::is_object_store_path(file.string())) return;
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  int nodes_asked = 0;
  for (std::size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--nodes") {
      nodes_asked = std::atoi(args[i + 1].c_str());
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i), args.begin() + static_cast<std::ptrdiff_t>(i) + 2);
      break;
    }
  double mib = !args.empty() ? std::atof(args[0].c_str()) : 128.0;
  auto env = cairn::comm::environment_or_single();
  auto root = std::filesystem::path(args.size() > 1 ? args[1] : std::filesystem::temp_directory_path().string()) /
              "cairn-bench-tiers";
  auto local_root = std::filesystem::path(args.size() > 2 ? args[2] : "/dev/shm") / "cairn-bench-tiers";
  int rounds = args.size() > 3 ? std::atoi(args[3].c_str()) : 3;
  int per_node = nodes_asked > 0 ? env.world_size / nodes_asked : env.local_world_size;
  auto comms = cairn::comm::connect(cairn::comm::backend::gloo, false,
                                    cairn::comm::parallel_grid(1, 1, env.world_size, env.world_size),
                                    std::chrono::minutes(10), true);
  auto& world = comms.world;
  int rank = world.rank(), node = rank / per_node;
  bool leader = rank % per_node == 0;
  if (rank == 0) {
    remove_stored(root);
    std::filesystem::remove_all(local_root);
  }
  world.barrier();
  cairn::set_diagnostic_sink([](cairn::severity, cairn::diagnostic const&) {}); // progress messages off
  auto state = make_state(static_cast<std::size_t>(mib * double(1u << 20)), rank, world.size());
  auto config = cairn::from_string<cairn::training_config>(
      R"({"train_iters": 1000, "checkpoint": {"interval": 1000, "keep": 2, "local": {"interval": 1000, "keep": 2, "replicas": 1, "directory": )" +
      boost::json::serialize(boost::json::value((local_root / ("node" + std::to_string(node))).string())) + "}}}");
  auto experiment = root / "experiment";
  std::vector<double> persistent_pause, persistent_total, local_pause, local_total;
  {
    cairn::checkpoint_manager manager(config, experiment, world);
    manager.set_transfer_communicator(*comms.transfers);
    manager.save(1, state); // untimed: the buffers of the host copy allocated, the nodes found
    manager.save_local(1, state);
    manager.finish();
    for (int round = 0; round < rounds; ++round) {
      auto iteration = round + 2;
      world.barrier();
      auto started = clock_type::now();
      manager.save(iteration, state);
      persistent_pause.push_back(since(started));
      manager.finish();
      persistent_total.push_back(since(started));
      world.barrier();
      started = clock_type::now();
      manager.save_local(iteration, state);
      local_pause.push_back(since(started));
      manager.finish();
      local_total.push_back(since(started));
    }
  }
  auto last = rounds + 1;
  auto slowest = [&](double seconds) {
    auto t = at::full({1}, seconds, at::kDouble);
    world.all_reduce(t, cairn::comm::reduce_op::max);
    return t.item<double>();
  };
  auto own_file = cairn::formats::rank_file(experiment / "checkpoints" / std::to_string(last), rank);
  auto part = static_cast<std::int64_t>(cairn::detail::stored_size(own_file).value_or(0));
  auto moved = cairn::comm::sum(world, node == 1 ? part : 0); // node 1's parts, sent by node 0
  auto all = cairn::comm::sum(world, part);

  // Node 1 replaced: its local directory gone; a new manager resumes.
  world.barrier();
  if (node == 1 && leader) std::filesystem::remove_all(local_root / "node1");
  world.barrier();
  auto target = bench::zeros_like(state);
  double from_peers = 0;
  bool peers_ok = false, peers_local = false;
  {
    auto started = clock_type::now();
    cairn::checkpoint_manager manager(config, experiment, world);
    auto resumed = manager.resume(target);
    from_peers = slowest(since(started));
    peers_local = resumed && resumed->local && resumed->iteration == last;
    peers_ok = cairn::comm::all_of(world, peers_local && equal(state, target));
  }
  // The persistent tier alone, its files not in memory.
  world.barrier();
  if (leader) std::filesystem::remove_all(local_root / ("node" + std::to_string(node)));
  drop_cached(own_file);
  if (rank == 0) drop_cached(cairn::formats::metadata_file(own_file.parent_path()));
  world.barrier();
  target = bench::zeros_like(state);
  double from_persistent = 0;
  bool persistent_ok = false;
  {
    auto started = clock_type::now();
    cairn::checkpoint_manager manager(config, experiment, world);
    auto resumed = manager.resume(target);
    from_persistent = slowest(since(started));
    persistent_ok =
        cairn::comm::all_of(world, resumed && !resumed->local && resumed->iteration == last && equal(state, target));
  }
  auto pp = slowest(median(persistent_pause)), pt = slowest(median(persistent_total));
  auto lp = slowest(median(local_pause)), lt = slowest(median(local_total));
  if (rank == 0) {
    std::printf("%d ranks on %d nodes, %.0f MiB a rank (%.2f GiB in all), %d rounds, medians, slowest rank\n",
                world.size(), world.size() / per_node, double(part) / double(1u << 20), double(all) / double(1u << 30),
                rounds);
    std::printf("  persistent save   pause %.3f s   total %.3f s   (%s)\n", pp, pt, experiment.c_str());
    std::printf("  local save        pause %.3f s   total %.3f s   (%s, + a copy of each part to a peer)\n", lp, lt,
                local_root.c_str());
    std::printf("  pause ratio persistent/local %.2f, total ratio %.2f\n", pp / lp, pt / lt);
    std::printf("  recovery of node 1: from peers %.3f s (%.1f MiB sent from node 0, %s); from the persistent tier "
                "%.3f s (%.1f MiB read, not cached, %s); ratio %.1f\n",
                from_peers, double(moved) / double(1u << 20), peers_ok ? "state equal" : "WRONG STATE", from_persistent,
                double(all) / double(1u << 20), persistent_ok ? "state equal" : "WRONG STATE",
                from_persistent / from_peers);
  }
  world.barrier();
  if (rank == 0) {
    remove_stored(root);
    std::filesystem::remove_all(local_root);
  }
  return peers_ok && persistent_ok ? 0 : 1;
}
