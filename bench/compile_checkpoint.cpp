// The compile-time benchmark's checkpoint translation unit: <cairn/checkpoint.hpp>, and a program
// that builds a state, saves it, verifies it and loads it back (bench/compile_time.sh times it;
// the build compiles it so that it keeps compiling).
#include <cairn/checkpoint.hpp>
#include <cairn/comm/single_process.hpp>

#include <ATen/ops/ones.h>

#include <cstdio>
#include <filesystem>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  auto state = cairn::whole_state({{"w", at::ones({4, 4})}}, {"exp_avg"});
  cairn::comm::single_process comm;
  cairn::checkpoint_save_config save;
  save.path = std::filesystem::path(argv[1]) / "checkpoint";
  cairn::save_checkpoint(state, comm, save);
  auto report = cairn::verify_checkpoint(save.path);
  cairn::checkpoint_load_config load;
  load.path = save.path;
  auto metadata = cairn::load_checkpoint(state, comm, load);
  std::printf("%s, saved by %zu ranks\n", report.ok() ? "verified" : "corrupt", metadata.ranks.size());
  return report.ok() ? 0 : 1;
}
