// libFuzzer target: what a checkpoint directory's JSON files say, on arbitrary bytes. The input
// is taken as metadata.json (parsed, migrated, its layouts checked for tiling) and as a
// completion marker (checked against a save holding one small file). Each must either accept the
// input or throw cairn::error; anything else (a crash, a sanitizer report, another exception) is
// a bug.
#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/metadata.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace {

/// A save directory with one complete save (iteration 1, one file), made once per process.
cairn::save_directory const& saves() {
  static cairn::save_directory const dir = [] {
    std::string pattern = (std::filesystem::temp_directory_path() / "cairn-fuzz-XXXXXX").string();
    cairn::save_directory d(std::filesystem::path(::mkdtemp(pattern.data())) / "checkpoints");
    std::filesystem::create_directories(d.path(1));
    std::ofstream(d.path(1) / "rank_0.safetensors") << "twelve bytes";
    return d;
  }();
  return dir;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  std::string_view text(reinterpret_cast<char const*>(data), size);
  try {
    auto metadata = cairn::parse_checkpoint_metadata(cairn::parse_json(text), "fuzz-input");
    (void)cairn::tiling_problems(metadata.ranks);
    if (metadata.world_size() > 0) (void)metadata.layout_of(metadata.world_size() - 1); // under rules: expanded
    (void)cairn::tiling_problems({cairn::rank_layout{metadata.parameters}});
  } catch (cairn::error const&) {
  }
  // problem() reports a broken marker as a message; it must never throw.
  std::ofstream(saves().path(1) / cairn::completion_marker, std::ios::binary | std::ios::trunc) << text;
  (void)saves().problem(1);
  return 0;
}
