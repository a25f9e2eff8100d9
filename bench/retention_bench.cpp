// The training pause of saves on s3:// against the saves the store keeps: a run saving a small
// state every iteration (async), on an experiment holding no save, then on one holding N saves
// that retention keeps (each a complete save, made first), in turns. A step's time is its pause:
// the step trains nothing. Retention (a listing and a marker read a save) runs beside training,
// so the pause should not grow with N.
//
//     build/bin/cairn-bench-retention s3://bucket/prefix [saves kept, default 400] [rounds, default 3]
//
// Against the tests' server: tests/io/s3_server.sh build/bin/cairn-bench-retention s3://cairn-test/bench
#include <cairn/checkpoint/directory.hpp>
#include <cairn/comm/single_process.hpp>
#include <cairn/config/json.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/training/manager.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "model_state.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

/// `count` complete saves at iterations 1 … count under `dir`/checkpoints, each one small file.
void make_saves(std::string const& dir, int count) {
  cairn::save_directory saves(dir + "/checkpoints");
  std::string bytes(1024, 'x');
  for (int i = 1; i <= count; ++i) {
    auto staged = saves.begin(i);
    cairn::io::write_stored((staged / "rank_0.safetensors").string(), std::as_bytes(std::span(bytes)));
    saves.commit(i);
  }
}

/// The median and the largest pause of `steps` saves on `dir`, whose saves from `first` on are
/// the run's; `keep` saves are kept.
std::pair<double, double> pauses(std::string const& dir, std::int64_t first, int steps, int keep) {
  cairn::comm::single_process comm;
  auto config = cairn::from_string<cairn::training_config>(R"({"train_iters": )" + std::to_string(first + steps) +
                                                           R"(, "checkpoint": {"interval": 1, "keep": )" +
                                                           std::to_string(keep) + "}}");
  cairn::checkpoint_manager manager(config, dir, comm);
  auto state = bench::make_state(std::size_t{10} << 10);
  std::vector<double> times;
  for (auto it = first + 1; it <= first + steps; ++it) {
    auto started = clock_type::now();
    manager.step(it, state);
    times.push_back(std::chrono::duration<double>(clock_type::now() - started).count());
  }
  manager.finish();
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times.back()};
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cairn-bench-retention s3://bucket/prefix [saves kept] [rounds]\n");
    return 2;
  }
  std::string root = argv[1];
  int const kept = argc > 2 ? std::atoi(argv[2]) : 400;
  int const rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  int const steps = 10;
  cairn::scoped_diagnostic_sink quiet([](cairn::severity, cairn::diagnostic const&) {});
  auto full = root + "/full";
  make_saves(full, kept);
  std::printf("a 10 KiB save every iteration, async; the step's time is its pause (median / largest of %d)\n", steps);
  for (int round = 0; round < rounds; ++round) {
    auto empty = pauses(root + "/empty-" + std::to_string(round), 0, steps, 1);
    auto many = pauses(full, kept + round * steps, steps, kept + 2 * steps * rounds);
    std::printf("round %d: 1 save kept %.3f / %.3f s; %d saves kept %.3f / %.3f s; ratio of medians %.2f\n", round,
                empty.first, empty.second, kept, many.first, many.second, many.first / empty.first);
  }
  return 0;
}
