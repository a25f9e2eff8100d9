// The training stall of an async checkpoint against the synchronous save of the same state, in
// the same run: a state of weights and two Adam moments (CPU tensors), saved by the checkpoint
// manager both ways in interleaved rounds, each into a fresh experiment directory.
//
//   sync save     manager.save() with async = false: write, fsync, commit
//   async stall   manager.save() with async = true: the time until it returns (the host copy)
//   async total   that plus finish() (waiting for the background write and committing)
//
//     build/bin/cairn-bench-manager [GiB, default 1] [directory, default the temp directory] [rounds, default 3]
#include <cairn/checkpoint/manager.hpp>
#include <cairn/comm/single_process.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

cairn::model_state make_state(std::size_t bytes) {
  cairn::model_state state;
  state.shard_names = {"weights", "exp_avg", "exp_avg_sq"};
  std::int64_t const sizes[] = {16 << 20, 4 << 20, 1 << 20, 256 << 10}; // elements per parameter
  std::size_t total = 0;
  for (int i = 0; total < bytes; ++i) {
    auto numel = std::min<std::int64_t>(sizes[i % 4], static_cast<std::int64_t>((bytes - total) / 12));
    numel = std::max<std::int64_t>(numel / 256, 1) * 256;
    std::vector<std::uint64_t> shape{static_cast<std::uint64_t>(numel / 256), 256};
    cairn::parameter_state p;
    p.layout = {"layer" + std::to_string(i) + ".weight", shape, cairn::io::dtype::F32, false,
                cairn::shard_layout::whole(shape)};
    for (int s = 0; s < 3; ++s) p.shards.push_back(at::rand({numel}));
    total += static_cast<std::size_t>(numel) * 12;
    state.parameters.push_back(std::move(p));
  }
  return state;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
  double gib = argc > 1 ? std::atof(argv[1]) : 1.0;
  auto root = std::filesystem::path(argc > 2 ? argv[2] : std::filesystem::temp_directory_path().string()) /
              ("cairn-bench-manager-" + std::to_string(::getpid()));
  int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  auto state = make_state(static_cast<std::size_t>(gib * double(1u << 30)));
  cairn::comm::single_process comm;
  cairn::set_diagnostic_sink([](cairn::severity, cairn::diagnostic const&) {}); // progress messages off

  auto config = cairn::from_string<cairn::training_config>(R"({"train_iters": 1000, "checkpoint": {"interval": 1}})");
  std::vector<double> sync, stall, total;
  int run = 0;
  for (int round = 0; round < rounds; ++round) {
    for (bool async : {false, true}) {
      auto dir = root / std::to_string(run++);
      cairn::manager_options options;
      options.async = async;
      cairn::checkpoint_manager<cairn::comm::single_process> manager(config, dir, comm, options);
      // A first save outside the timing: buffers allocated, files of the directory created.
      manager.save(1, state);
      manager.finish();
      auto started = clock_type::now();
      manager.save(2, state);
      auto returned = since(started);
      manager.finish();
      auto finished = since(started);
      (async ? stall : sync).push_back(returned);
      if (async) total.push_back(finished);
      std::filesystem::remove_all(dir);
    }
  }
  std::filesystem::remove_all(root);

  double s = median(sync), a = median(stall), t = median(total);
  std::printf("state: %.2f GiB (weights + 2 Adam moments, float32), %d rounds, medians\n", gib, rounds);
  std::printf("sync save (write + fsync + commit)  %8.3f s\n", s);
  std::printf("async save: training stall          %8.3f s   %.3fx the sync save (target <= 0.10)\n", a, a / s);
  std::printf("async save: until committed         %8.3f s   %.3fx the sync save\n", t, t / s);
  return 0;
}
