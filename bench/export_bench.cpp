// Exports of a sharded state (the state_dict and external formats, whole tensors) against the
// distributed save of the same state in the same run, on every rank of a launch:
//   throughput of each export / throughput of the distributed save,
//   peak extra resident memory of each rank during each save / the rank's state size.
//
//     cairn launch -n 2 -- build/bin/cairn-bench-export [GiB in all, default 1] [directory]
#include <cairn/checkpoint.hpp>
#include <cairn/comm/gloo.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

std::uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

/// The most resident memory above what it was when it started, sampled every millisecond.
class peak_memory {
public:
  peak_memory()
      : base_(resident_bytes()), thread_([this] {
          while (!stop_.load()) {
            auto now = resident_bytes();
            if (now > peak_.load()) peak_.store(now);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        }) {}
  std::uint64_t stop() {
    stop_.store(true);
    thread_.join();
    return std::max(peak_.load(), base_) - base_;
  }

private:
  std::uint64_t base_;
  std::atomic<std::uint64_t> peak_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// Parameters of 64 MiB down to 1 MiB, each split in flat ranges over the ranks.
cairn::model_state make_state(std::uint64_t bytes, int rank, int size) {
  cairn::model_state state;
  std::uint64_t const sizes[] = {16 << 20, 4 << 20, 1 << 20, 256 << 10};
  std::uint64_t total = 0;
  for (int i = 0; total < bytes; ++i) {
    auto numel = std::min<std::uint64_t>(sizes[i % 4], (bytes - total) / 4) / 256 * 256;
    if (numel == 0) break;
    cairn::parameter_state p;
    std::vector<std::uint64_t> shape{numel / 256, 256};
    p.layout = {"layer" + std::to_string(i) + ".weight", shape, cairn::io::dtype::F32, false,
                cairn::shard_layout::whole(shape)};
    auto begin = numel * std::uint64_t(rank) / std::uint64_t(size),
         end = numel * std::uint64_t(rank + 1) / std::uint64_t(size);
    p.layout.shard.flat = cairn::flat_range{begin, end};
    p.shards.push_back(at::rand({static_cast<std::int64_t>(end - begin)}));
    total += numel * 4;
    state.parameters.push_back(std::move(p));
  }
  return state;
}

struct plain_model {
  int layers = 0;
};
BOOST_DESCRIBE_STRUCT(plain_model, (), (layers))

} // namespace

int main(int argc, char** argv) {
  cairn::set_progress_timing({std::chrono::hours(1), std::chrono::hours(1)}); // figures, not progress lines
  auto comm = cairn::comm::gloo_from_environment();
  double gib = argc > 1 ? std::atof(argv[1]) : 1.0;
  auto dir = std::filesystem::path(argc > 2 ? argv[2] : std::filesystem::temp_directory_path().string()) /
             "cairn-bench-export";
  auto bytes = static_cast<std::uint64_t>(gib * double(1u << 30));
  auto state = make_state(bytes, comm.rank(), comm.size());
  auto mine = state.bytes(false);
  std::uint64_t elements = 0;
  for (auto const& p : state.parameters) elements += p.layout.shard.box_numel();

  cairn::external::converter<plain_model> conv;
  conv.model_type = "plain";
  conv.config.renamed("layers", "num_hidden_layers");
  conv.weights = [&](plain_model const&) {
    std::vector<cairn::external::weight_rule> rules;
    for (auto const& p : state.parameters)
      rules.push_back(cairn::external::renamed(p.layout.name, "model." + p.layout.name));
    return rules;
  };

  auto config = [&](cairn::checkpoint_format format, char const* name) {
    cairn::checkpoint_save_config c;
    c.path = dir / name;
    c.format = format;
    c.parameters_per_file = elements / 8; // several files, so that every rank writes
    return c;
  };
  struct result {
    double seconds = 1e30;
    std::uint64_t extra = 0;
  };
  result distributed, state_dict, external;
  auto run = [&](result& r, auto&& save) {
    ::sync(); // no contender pays for the write-back of the one before
    comm.barrier();
    peak_memory memory;
    auto t = clock_type::now();
    save();
    comm.barrier();
    r.seconds = std::min(r.seconds, since(t));
    r.extra = std::max(r.extra, memory.stop());
  };
  int const rounds = 3;
  for (int round = 0; round < rounds; ++round) {
    if (comm.rank() == 0) std::filesystem::remove_all(dir);
    comm.barrier();
    std::function<void()> contenders[] = {
        [&] {
          run(distributed, [&] {
            cairn::save_checkpoint(state, comm, config(cairn::checkpoint_format::distributed, "distributed"));
          });
        },
        [&] {
          run(state_dict,
              [&] { cairn::save_checkpoint(state, comm, config(cairn::checkpoint_format::state_dict, "state_dict")); });
        },
        [&] {
          run(external, [&] {
            cairn::external::save(state, comm, conv, plain_model{int(state.parameters.size())},
                                  config(cairn::checkpoint_format::external, "external"));
          });
        }};
    for (int i = 0; i < 3; ++i) contenders[(round + i) % 3](); // each goes first once
  }
  double gb = double(bytes) / 1e9;
  std::printf("rank %d of %d: %.2f GiB of F32 in %zu parameters, %.0f MiB on this rank, best of %d, in %s\n",
              comm.rank(), comm.size(), gib, state.parameters.size(), double(mine) / double(1 << 20), rounds,
              dir.c_str());
  auto line = [&](char const* what, result const& r) {
    std::printf("rank %d:   %-22s %6.2f GB/s  (%.2fx the distributed save)  peak extra memory %7.1f MiB (%.2fx "
                "this rank's state)\n",
                comm.rank(), what, gb / r.seconds, distributed.seconds / r.seconds, double(r.extra) / double(1 << 20),
                double(r.extra) / double(mine));
  };
  line("distributed save", distributed);
  line("state_dict export", state_dict);
  line("external export", external);
  comm.barrier();
  if (comm.rank() == 0) std::filesystem::remove_all(dir);
  return 0;
}
