// The compile-time benchmark's checkpoint translation unit: <cairn/checkpoint.hpp> and nothing
// else of libtorch's, in a program that saves a state, verifies the save and loads it back
// (bench/compile_time.sh times it against a TU of <ATen/core/Tensor.h>; the build compiles it
// so that it keeps compiling). The state has no parameters: the tensors are the model's, and
// their headers the model's code's; the calls are those of any state.
#include <cairn/checkpoint.hpp>
#include <cairn/comm/single_process.hpp>

#include <cstdio>
#include <filesystem>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  cairn::model_state state;
  state.shard_names.push_back("exp_avg");
  cairn::comm::single_process comm;
  cairn::checkpoint_save_config save;
  save.path = std::filesystem::path(argv[1]) / "checkpoint";
  cairn::save_checkpoint(state, comm, save);
  auto report = cairn::verify_checkpoint(save.path);
  cairn::checkpoint_load_config load;
  load.path = save.path;
  auto metadata = cairn::load_checkpoint(state, comm, load);
  std::printf("%s, saved by %lld ranks\n", report.ok() ? "verified" : "corrupt",
              static_cast<long long>(metadata.world_size()));
  return report.ok() ? 0 : 1;
}
