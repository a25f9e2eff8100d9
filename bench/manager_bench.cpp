// The training stall of an async checkpoint against the synchronous save of the same state, in
// the same run: a state of weights and two Adam moments (CPU tensors), saved by the checkpoint
// manager both ways in interleaved rounds, one manager of each kind for the whole run.
//
//   sync save     manager.save() with async = false: write, fsync, commit
//   async stall   manager.save() with async = true: the time until it returns (the host copy)
//   async total   that plus finish() (waiting for the background write and committing)
//
// With `cuda`, the state lives on the GPU, and the baselines are the device-to-host copy of
// the state into pinned memory (what an async save must at least pay) and, for the resume,
// the host-to-device copy.
//
//     build/bin/cairn-bench-manager [GiB, default 1] [directory, default the temp directory] [rounds, default 3]
//     [cpu|cuda]
#include <cairn/comm/single_process.hpp>
#include <cairn/training/manager.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <unistd.h>
#include <vector>

#include "model_state.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

cairn::model_state make_state(std::size_t bytes, c10::Device device) {
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
    for (int s = 0; s < 3; ++s) p.shards.push_back(at::rand({numel}).to(device));
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
  bool cuda = argc > 4 && std::string(argv[4]) == "cuda";
  auto device = cuda ? c10::Device(c10::kCUDA) : c10::Device(c10::kCPU);
  auto bytes = static_cast<std::size_t>(gib * double(1u << 30));
  auto state = make_state(bytes, device);
  cairn::comm::single_process comm;
  cairn::set_diagnostic_sink([](cairn::severity, cairn::diagnostic const&) {}); // progress messages off

  auto config =
      cairn::from_string<cairn::training_config>(R"({"train_iters": 1000, "checkpoint": {"interval": 1, "keep": 1}})");
  std::vector<double> sync, stall, total, copy, resume, direct, unverified, upload;
  std::vector<at::Tensor> host; // the baseline's destination, allocated once like the manager's buffers
  for (auto const& p : state.parameters)
    for (auto const& t : p.shards)
      host.push_back(at::empty({t.numel()}, t.options().device(c10::kCPU).pinned_memory(cuda)));
  // The state a resume loads into exists already, as in a trainer: allocated and touched once.
  auto target = bench::zeros_like(state);
  for (auto& h : host) h.zero_();
  // One manager of each kind for the whole run, as in training: one save per round (and a
  // first one, untimed, that allocates the buffers), keep 1.
  cairn::manager_options sync_options, async_options;
  sync_options.async = false;
  cairn::checkpoint_manager<cairn::comm::single_process> sync_manager(config, root / "sync", comm, sync_options);
  cairn::checkpoint_manager<cairn::comm::single_process> async_manager(config, root / "async", comm, async_options);
  sync_manager.save(1, state);
  async_manager.save(1, state);
  async_manager.finish();
  std::filesystem::path checkpoints; // where the manager keeps them: learnt from the first resume
  for (int round = 0; round < rounds; ++round) {
    auto iteration = round + 2;
    {
      auto started = clock_type::now();
      std::size_t i = 0;
      for (auto const& p : state.parameters)
        for (auto const& t : p.shards) host[i++].copy_(t);
      copy.push_back(since(started));
    }
    {
      auto started = clock_type::now();
      sync_manager.save(iteration, state);
      sync.push_back(since(started));
    }
    {
      auto started = clock_type::now();
      async_manager.save(iteration, state);
      stall.push_back(since(started));
      async_manager.finish();
      total.push_back(since(started));
    }
    {
      // Resuming that checkpoint into a state of the same layout, against uploading the bytes:
      // through the manager that saved it (a second one would find the directory locked). And
      // the same load outside the manager, with checksums (what the manager's path adds) and
      // without (what verification adds). They take turns going first: the first read of a
      // checkpoint just written runs slower.
      auto resume_timed = [&] {
        auto loading = clock_type::now();
        auto resumed = async_manager.resume(target);
        resume.push_back(since(loading));
        checkpoints = resumed->path.parent_path();
      };
      auto load_timed = [&](cairn::verification verify, std::vector<double>& into) {
        cairn::checkpoint_load_config load;
        load.path = checkpoints / std::to_string(iteration);
        load.format = cairn::checkpoint_format::distributed;
        load.optimizer_state = true;
        auto loading = clock_type::now();
        cairn::load_checkpoint(target, comm, load, verify);
        into.push_back(since(loading));
      };
      std::vector<std::function<void()>> loads{resume_timed,
                                               [&] { load_timed(cairn::verification::checksums, direct); },
                                               [&] { load_timed(cairn::verification::none, unverified); }};
      std::rotate(loads.begin(), loads.begin() + round % 3, loads.end());
      for (auto& timed : loads) timed();
      auto uploading = clock_type::now();
      std::size_t i = 0;
      for (auto& p : target.parameters)
        for (auto& t : p.shards) t.copy_(host[i++]);
      upload.push_back(since(uploading));
    }
  }
  std::filesystem::remove_all(root);

  double s = median(sync), a = median(stall), t = median(total), c = median(copy), r = median(resume),
         d = median(direct), v = median(unverified), u = median(upload);
  double gb = double(bytes) / 1e9;
  std::printf("state: %.2f GiB on %s (weights + 2 Adam moments, float32), %d rounds, medians\n", gib,
              cuda ? "cuda" : "cpu", rounds);
  std::printf("sync save (write + fsync + commit)  %8.3f s  %6.2f GB/s\n", s, gb / s);
  std::printf("async save: training stall          %8.3f s  %6.2f GB/s  %.3fx the sync save (target <= 0.10)\n", a,
              gb / a, a / s);
  std::printf("  baseline: copy of the state to host %8.3f s  %6.2f GB/s  (stall / copy %.2fx)\n", c, gb / c, a / c);
  std::printf("async save: until committed         %8.3f s  %6.2f GB/s  %.3fx the sync save\n", t, gb / t, t / s);
  std::printf("resume (load, checksums verified)   %8.3f s  %6.2f GB/s\n", r, gb / r);
  std::printf("  baseline: copy of the bytes to the state %8.3f s  %6.2f GB/s  (resume / copy %.2fx)\n", u, gb / u,
              r / u);
  std::printf("  the same load, not through the manager %8.3f s  %6.2f GB/s  (resume / load %.2fx)\n", d, gb / d,
              r / d);
  std::printf("  the same load without checksums   %8.3f s  %6.2f GB/s  (resume / unverified %.2fx)\n", v, gb / v,
              r / v);
  return 0;
}
