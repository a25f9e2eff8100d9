// The layouts of a large grid in the form checkpoints enumerate them today (every rank's holding
// of every parameter it holds), simulated in one process, no rank started: what a save of them
// costs in metadata, in collective bytes and in planning. The baseline of the rule form (#31).
//
// A tensor x pipeline x data parallel grid in Megatron's order, ZeRO stage 1: each of T tensors
// of [4096, 4096] belongs to one pipeline stage, is split in column blocks over the TP group
// and each block in flat slices over the DP group. Printed:
//   - metadata: every rank's layout as metadata.json holds it (indented JSON), in bytes;
//   - per save, per rank: the bytes a rank receives when the ranks exchange their layouts (each
//     rank's as compact JSON, all-gathered, as every save does before it plans);
//   - planning: the tiling check and the replica writers over every rank's layout, the work of
//     every rank before each save, in seconds.
//
//     build/bin/cairn-bench-grid [TP PP DP TENSORS]   (default 8 8 64 2000: 4,096 ranks)
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/comm/grid.hpp>
#include <cairn/config/json.hpp>

#include <boost/json/serialize.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

std::vector<cairn::rank_layout> grid_layouts(cairn::comm::parallel_grid const& grid, int tensors) {
  using cairn::comm::axis;
  std::vector<cairn::rank_layout> ranks(static_cast<std::size_t>(grid.world_size()));
  std::vector<std::uint64_t> const shape{4096, 4096};
  for (int r = 0; r < grid.world_size(); ++r) {
    auto at = grid.coordinates(r);
    for (int t = 0; t < tensors; ++t) {
      if (t * grid.size(axis::pipeline) / tensors != at.pipeline) continue; // another stage's
      auto box = cairn::split_columns(shape, at.tensor, grid.size(axis::tensor));
      auto numel = box.box_numel(), d = static_cast<std::uint64_t>(at.data),
           n = static_cast<std::uint64_t>(grid.size(axis::data));
      box.flat = cairn::flat_range{numel * d / n, numel * (d + 1) / n};
      ranks[static_cast<std::size_t>(r)].parameters.push_back(
          {"layers." + std::to_string(t) + ".weight", shape, cairn::io::dtype::BF16, false, box});
    }
  }
  return ranks;
}

} // namespace

int main(int argc, char** argv) {
  int tp = argc > 4 ? std::atoi(argv[1]) : 8, pp = argc > 4 ? std::atoi(argv[2]) : 8,
      dp = argc > 4 ? std::atoi(argv[3]) : 64, tensors = argc > 4 ? std::atoi(argv[4]) : 2000;
  cairn::comm::parallel_grid grid(tp, pp, dp, tp * pp * dp);
  auto start = clock_type::now();
  auto ranks = grid_layouts(grid, tensors);
  auto built = seconds_since(start);

  std::uint64_t metadata = 0, exchanged = 0, holdings = 0;
  for (auto const& r : ranks) {
    auto json = cairn::to_json(r);
    metadata += cairn::to_pretty_json(json).size();
    exchanged += boost::json::serialize(json).size();
    holdings += r.parameters.size();
  }
  start = clock_type::now();
  auto problems = cairn::tiling_problems(ranks);
  auto tiling = seconds_since(start);
  start = clock_type::now();
  auto writers = cairn::detail::replica_writers_of(ranks, cairn::replica_writer_rule::balanced);
  auto replicas = seconds_since(start);
  if (!problems.empty()) {
    std::fprintf(stderr, "the grid's layouts do not tile: %s\n", problems.front().c_str());
    return 1;
  }
  std::printf("%s, ZeRO-1, %d tensors of [4096, 4096] BF16: %llu holdings (layouts built in %.2f s)\n",
              grid.text().c_str(), tensors, static_cast<unsigned long long>(holdings), built);
  std::printf("  enumerated form: metadata %.1f MB (%.0f bytes a holding)\n", double(metadata) / 1e6,
              double(metadata) / double(holdings));
  std::printf("  enumerated form: per save, each rank receives %.1f MB of layouts\n", double(exchanged) / 1e6);
  std::printf("  enumerated form: planning on every rank %.2f s (tiling %.2f s, replica writers %.2f s)\n",
              tiling + replicas, tiling, replicas);
  std::printf("  targets of the rule form: metadata <= 1 MB, per-save collective <= 1 KB a rank after the first "
              "save, planning <= 1 s\n");
  return writers.sets.empty() ? 0 : 1;
}
