// The layouts of a large grid, simulated in one process, no rank started: what a save of them
// costs in metadata, in collective bytes and in planning, in the enumerated form (every rank's
// holding of every parameter it holds) and in the rule form (the grid and one rule a parameter,
// what metadata.json stores for a grid's layouts).
//
// A tensor x pipeline x data parallel grid in Megatron's order, ZeRO stage 1: each of T tensors
// of [4096, 4096] belongs to one pipeline stage, is split in column blocks over the TP group
// and each block in flat slices over the DP group. Printed:
//   - metadata: every rank's layout as metadata.json holds it (indented JSON), in bytes;
//   - per save, per rank: the bytes a rank receives when the ranks exchange their layouts (each
//     rank's as compact JSON, all-gathered, as every save does before it plans);
//   - planning: the tiling check and the replica writers over every rank's layout, the work of
//     every rank before each save, in seconds;
//   - the rule form: inferring the rules from the layouts (once a save, on the rank that writes
//     metadata.json), their size as metadata.json holds them, and expanding them back: one
//     rank's layout, and every rank's (what a load does).
//
// Then, for a Llama-7B-shaped model on TP=2 x DP=2 at ZeRO-1 and ZeRO-0, how evenly the ranks
// share the bytes of a save (max/mean of the bytes each writes; target <= 1.25).
//
//     build/bin/cairn-bench-grid [TP PP DP TENSORS]   (default 8 8 64 2000: 4,096 ranks)
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/layout_rules.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/comm/grid.hpp>
#include <cairn/config/json.hpp>

#include <boost/json/serialize.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
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
      if (cairn::comm::stage_of_layer(t, tensors, grid.size(axis::pipeline)) != at.pipeline)
        continue; // another stage's
      auto place = cairn::place_on_grid(shape, cairn::tensor_split::columns, at.tensor, grid.size(axis::tensor),
                                        at.data, grid.size(axis::data), 1);
      ranks[static_cast<std::size_t>(r)].parameters.push_back(
          {"layers." + std::to_string(t) + ".weight", shape, cairn::io::dtype::BF16, place.replicated, place.shard});
    }
  }
  return ranks;
}

/// The layouts of a Llama-7B-shaped model (32 layers, grouped-query attention, BF16) on a
/// TP x DP grid at `zero_stage`: column-parallel q, k, v, gate and up, row-parallel o and down,
/// a vocab-parallel embedding and head, norms whole on every rank of a TP group.
std::vector<cairn::rank_layout> llama_layouts(int tp, int dp, int zero_stage) {
  using cairn::tensor_split;
  struct spec {
    std::string name;
    std::vector<std::uint64_t> shape;
    tensor_split split;
  };
  std::vector<spec> model{{"embed_tokens", {32000, 4096}, tensor_split::rows}};
  for (int l = 0; l < 32; ++l) {
    auto p = "layers." + std::to_string(l) + ".";
    for (auto [name, shape, split] :
         {spec{"q_proj", {4096, 4096}, tensor_split::rows}, spec{"k_proj", {1024, 4096}, tensor_split::rows},
          spec{"v_proj", {1024, 4096}, tensor_split::rows}, spec{"o_proj", {4096, 4096}, tensor_split::columns},
          spec{"gate_proj", {11008, 4096}, tensor_split::rows}, spec{"up_proj", {11008, 4096}, tensor_split::rows},
          spec{"down_proj", {4096, 11008}, tensor_split::columns}, spec{"input_layernorm", {4096}, tensor_split::none},
          spec{"post_attention_layernorm", {4096}, tensor_split::none}})
      model.push_back({p + name, shape, split});
  }
  model.push_back({"norm", {4096}, tensor_split::none});
  model.push_back({"lm_head", {32000, 4096}, tensor_split::rows});
  std::vector<cairn::rank_layout> ranks(static_cast<std::size_t>(tp * dp));
  for (int r = 0; r < tp * dp; ++r)
    for (auto const& p : model) {
      auto place = cairn::place_on_grid(p.shape, p.split, r % tp, tp, r / tp, dp, zero_stage);
      ranks[static_cast<std::size_t>(r)].parameters.push_back(
          {p.name, p.shape, cairn::io::dtype::BF16, place.replicated, place.shard});
    }
  return ranks;
}

/// The largest and the mean of the bytes each rank writes of `ranks`' layouts in a distributed
/// save whose replicas are written as `rule` says.
std::pair<double, double> bytes_written(std::vector<cairn::rank_layout> const& ranks, cairn::replica_writer_rule rule) {
  auto writers = cairn::detail::replica_writers_of(ranks, rule);
  std::vector<double> bytes(ranks.size(), 0);
  for (std::size_t r = 0; r < ranks.size(); ++r)
    for (auto const& p : ranks[r].parameters)
      if (!p.replicated || writers.of(p.name, p.shard) == static_cast<int>(r))
        bytes[r] += 2.0 * double(p.shard.numel());
  double most = 0, total = 0;
  for (auto b : bytes) {
    most = std::max(most, b);
    total += b;
  }
  return {most, total / double(bytes.size())};
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

  start = clock_type::now();
  auto rules = cairn::infer_rules(ranks);
  auto inferred = seconds_since(start);
  if (!rules) {
    std::fprintf(stderr, "the grid's layouts are not a grid's rules\n");
    return 1;
  }
  auto stored = cairn::to_pretty_json(cairn::to_json(*rules)).size();
  start = clock_type::now();
  auto mine = cairn::expand_rank(*rules, grid.world_size() - 1);
  auto one = seconds_since(start);
  start = clock_type::now();
  auto expanded = cairn::expand_rules(*rules);
  auto all = seconds_since(start);
  if (expanded != ranks || mine != ranks.back()) {
    std::fprintf(stderr, "the rules do not expand to the layouts\n");
    return 1;
  }
  std::printf("  rule form: metadata %.3f MB (%zu rules), inferred from the layouts in %.2f s\n", double(stored) / 1e6,
              rules->parameters.size(), inferred);
  std::printf("  rule form: expanded, one rank's layout in %.4f s, every rank's in %.2f s\n", one, all);
  // After the first save of a run, the plan agrees that no layout changed in one all-reduce of
  // five int64 and broadcasts the save's identity (its length, then 32 characters); the
  // checkpoint_layout_exchange test counts these bytes on 4 ranks.
  std::printf("  after the first save: each rank receives %d bytes to plan a save whose layouts are unchanged\n",
              5 * 8 + 8 + 32);
  std::printf("  targets of the rule form: metadata <= 1 MB, per-save collective <= 1 KB a rank after the first "
              "save, planning <= 1 s\n");

  // Who writes what: a Llama-7B-shaped model on TP=2 x DP=2, each rank's bytes in a save.
  for (int zero : {1, 0}) {
    auto layouts = llama_layouts(2, 2, zero);
    auto [most, mean] = bytes_written(layouts, cairn::replica_writer_rule::balanced);
    auto [old_most, old_mean] = bytes_written(layouts, cairn::replica_writer_rule::rank_0);
    std::printf("TP=2 x DP=2, ZeRO-%d, Llama-7B shapes: bytes written a rank, max/mean %.3f (%.2f GB the "
                "largest; %.3f with every replica written by its lowest rank)\n",
                zero, most / mean, most / 1e9, old_most / old_mean);
  }
  return writers.sets.empty() ? 0 : 1; // ZeRO-1 of column blocks: no replicas
}
