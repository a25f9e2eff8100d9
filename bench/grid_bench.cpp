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
// Then planning from the rules alone, as a save and a load do when the state names its grid,
// against the rank count: TP=8 x PP=8 x DP=16, 64, 256, 1024 (1,024 to 65,536 ranks), the same
// 2,000 tensors, at ZeRO-1 (no replicas) and ZeRO-0 (each column block replicated over its DP
// group). One process plays one rank (the last; rank 0 for what only it does), with the library
// functions the save and the load call; memory is the peak of what the planning allocates
// beyond what was allocated before it (operator new counted). Printed per rank count:
//   - save, first of a run: bytes a rank receives (the agreement's collectives, as the
//     checkpoint_layout_exchange test counts them on 4 ranks), bytes a stage's first rank sends
//     (its stage's rules, to rank 0), bytes rank 0 receives; a rank's planning (its stage's
//     rules from its own layout, their hash, its stage's replica writers, its file's items) and
//     rank 0's (the stages' rules parsed and checked, metadata.json made), time and memory;
//   - save, after the first: bytes a rank receives;
//   - load: metadata.json parsed, the rank's layout computed and compared, its sources found
//     (with the saving layout; then into TP=4 x PP=8 x 2*DP, every holding of each of its
//     parameters computed, one parameter at a time), time and memory;
//   - `cairn plan` (plan_load of the whole job, every rank's reads), with the saving layout and
//     resharded, time and memory.
//
//     build/bin/cairn-bench-grid [TP PP DP TENSORS]   (default 8 8 64 2000: 4,096 ranks)
//     build/bin/cairn-bench-grid --scale [MAX_RANKS]   (the planning alone, up to 65,536 ranks)
#include <cairn/checkpoint/detail/save_files.hpp>
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/layout_rules.hpp>
#include <cairn/checkpoint/load_plan.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/comm/grid.hpp>
#include <cairn/config/json.hpp>
#include <cairn/io/checksum.hpp>

#include <boost/json/serialize.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <malloc.h>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// Every allocation counted: what is live now, and the most that was.
namespace {
std::atomic<std::size_t> live_bytes{0}, peak_bytes{0};

void* counted(std::size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (!p) throw std::bad_alloc();
  auto now = live_bytes += malloc_usable_size(p);
  for (auto peak = peak_bytes.load(); now > peak && !peak_bytes.compare_exchange_weak(peak, now);) {
  }
  return p;
}

void uncounted(void* p) noexcept {
  if (!p) return;
  live_bytes -= malloc_usable_size(p);
  std::free(p);
}
} // namespace

void* operator new(std::size_t n) { return counted(n); }
void* operator new[](std::size_t n) { return counted(n); }
void operator delete(void* p) noexcept { uncounted(p); }
void operator delete[](void* p) noexcept { uncounted(p); }
void operator delete(void* p, std::size_t) noexcept { uncounted(p); }
void operator delete[](void* p, std::size_t) noexcept { uncounted(p); }

namespace {

/// The most memory allocated at once while it lives, beyond what was allocated when it began.
struct peak_memory {
  std::size_t base = live_bytes.load();
  peak_memory() { peak_bytes = base; }
  [[nodiscard]] double megabytes() const { return double(peak_bytes.load() - base) / 1e6; }
};

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

/// The rules of `grid_layouts`' model: 2,000 column-split tensors, sliced over DP at `zero`.
cairn::layout_rules model_rules(int tp, int pp, int dp, int tensors, bool zero) {
  cairn::layout_rules rules{tp, pp, dp, {}};
  for (int t = 0; t < tensors; ++t)
    rules.parameters.push_back({"layers." + std::to_string(t) + ".weight",
                                {4096, 4096},
                                cairn::io::dtype::BF16,
                                cairn::tensor_split::columns,
                                zero,
                                cairn::comm::stage_of_layer(t, tensors, pp)});
  return rules;
}

/// The rules of one stage, as a rank derives and sends them.
cairn::layout_rules stage_of(cairn::layout_rules const& rules, std::int64_t stage) {
  auto out = rules;
  std::erase_if(out.parameters, [&](cairn::parameter_rule const& r) { return r.stage != stage; });
  return out;
}

/// Bytes a rank receives in a save's agreement on rules (detail::agree_layouts, the first save
/// of a run): the state check's all-reduce (8), the reuse check (40), the grid's (40), a hash
/// and a length a stage (40 a stage), the verdict broadcast (16), the save's identity (40).
/// checkpoint_layout_exchange counts them on 4 ranks (PP=2: 224).
std::uint64_t first_save_bytes(std::int64_t stages) { return 8 + 40 + 40 + 40 * std::uint64_t(stages) + 16 + 40; }
/// The same after the first save: the state check, the reuse check, the identity.
constexpr std::uint64_t later_save_bytes = 8 + 40 + 40;

struct timing {
  double seconds;
  double megabytes;
};

template <class F> timing measure(F&& f) {
  peak_memory memory;
  auto start = clock_type::now();
  f();
  return {seconds_since(start), memory.megabytes()};
}

void scale(int most_ranks, int tensors) {
  std::printf("\nplanning from the rules, TP=8 x PP=8 x DP, %d tensors of [4096, 4096] BF16 (one process plays one "
              "rank)\n",
              tensors);
  std::printf("%7s %4s | %9s %9s %9s | %12s %12s | %7s | %12s %12s | %12s %12s\n", "ranks", "ZeRO", "recv B", "send B",
              "rank0 B", "save s/MB", "rank0 s/MB", "later B", "load s/MB", "reshard s/MB", "plan s/MB",
              "reshard s/MB");
  struct answer {
    int world;
    bool zero;
    std::uint64_t entries;
    double megabytes;
  };
  std::vector<answer> plans;
  for (int dp : {16, 64, 256, 1024}) {
    int const tp = 8, pp = 8, world = tp * pp * dp;
    if (world > most_ranks) break;
    for (bool zero : {true, false}) {
      auto rules = model_rules(tp, pp, dp, tensors, zero);
      int const rank = world - 1;
      auto grid = cairn::detail::grid_of(rules);
      auto at = grid.coordinates(rank);
      auto mine = cairn::expand_rank(rules, rank); // the rank's own layout: what it starts from
      cairn::layout_rules sizes{tp, pp, dp, {}};

      // A save's planning on one rank: its stage's rules, their hash, its writers, its file.
      std::uint64_t sent = 0, items = 0;
      auto save = measure([&] {
        auto derived = cairn::detail::rules_of_rank(mine, sizes, at);
        if (!derived) std::abort();
        sizes.parameters = std::move(*derived);
        auto text = cairn::to_compact_json(cairn::to_json(sizes));
        sent = text.size();
        (void)cairn::io::checksum_of(std::as_bytes(std::span(text)));
        auto writers = cairn::detail::replica_writers_of(sizes, at.pipeline, cairn::replica_writer_rule::balanced);
        for (auto const& p : mine.parameters)
          if (!p.replicated || writers.of(p.name, p.shard) == rank) items += 3;
      });
      // Rank 0: every stage's rules parsed and checked, metadata.json made.
      std::vector<std::string> texts;
      std::uint64_t received0 = 0;
      for (int stage = 0; stage < pp; ++stage) {
        texts.push_back(cairn::to_compact_json(cairn::to_json(stage_of(rules, stage))));
        if (stage > 0) received0 += texts.back().size();
      }
      std::string metadata_text;
      auto rank0 = measure([&] {
        cairn::layout_rules all{tp, pp, dp, {}};
        for (auto const& text : texts) {
          auto part = cairn::parse<cairn::layout_rules>(cairn::parse_json(text));
          all.parameters.insert(all.parameters.end(), part.parameters.begin(), part.parameters.end());
        }
        cairn::check_rules(all);
        cairn::checkpoint_metadata metadata;
        metadata.save_id = "0123456789abcdef0123456789abcdef";
        metadata.shard_names = {"weights", "exp_avg", "exp_avg_sq"};
        metadata.rules = std::move(all);
        metadata_text = cairn::detail::distributed_metadata_text(metadata);
      });

      // A load's planning on one rank: the metadata, its layout, its sources.
      auto parsed = cairn::parse_checkpoint_metadata(cairn::parse_json(metadata_text), "metadata.json");
      auto load = measure([&] {
        auto metadata = cairn::parse_checkpoint_metadata(cairn::parse_json(metadata_text), "metadata.json");
        if (metadata.layout_of(rank) != mine) std::abort();
        cairn::detail::saved_writers writers(metadata);
        for (auto const& p : mine.parameters)
          if (p.replicated) (void)writers.of(p.name, p.shard);
      });
      auto resharded_rules = model_rules(tp / 2, pp, dp * 2, tensors, zero);
      auto live = cairn::expand_rank(resharded_rules, rank);
      std::uint64_t meeting = 0;
      auto reshard = measure([&] {
        cairn::detail::saved_writers writers(parsed);
        std::size_t k = 0;
        for (auto const& p : live.parameters) {
          while (parsed.rules->parameters[k].name != p.name) ++k;
          for (auto const& [r, held] : cairn::detail::holdings_of(*parsed.rules, parsed.rules->parameters[k])) {
            if (held.replicated && writers.of(held.name, held.shard) != r) continue;
            auto theirs = cairn::span_of(p.shape, held.shard), ours = cairn::span_of(p.shape, p.shard);
            if (theirs.end > ours.begin && ours.end > theirs.begin &&
                cairn::overlap_count(p.shape, held.shard, p.shard) > 0)
              ++meeting;
          }
        }
      });

      // `cairn plan`: every rank's reads, with the saving layout and resharded.
      cairn::run_layout run;
      run.shard_names = {"weights", "exp_avg", "exp_avg_sq"};
      run.rules = rules;
      cairn::load_plan planned;
      auto plan = measure([&] { planned = cairn::plan_load(parsed, {}, run); });
      std::uint64_t entries = 0, answer = 0; // what the plan answers: every rank's reads
      for (auto const& reads : planned.reads) {
        entries += reads.size();
        answer += sizeof(reads) + reads.capacity() * sizeof(cairn::planned_read);
        for (auto const& r : reads) answer += r.file.capacity() > 15 ? r.file.capacity() + 1 : 0;
      }
      plans.push_back({world, zero, entries, double(answer) / 1e6});
      if (!planned.problems.empty() || !planned.same_layout) {
        std::fprintf(stderr, "plan: %s\n",
                     planned.problems.empty() ? "not the saving layout" : planned.problems[0].c_str());
        std::abort();
      }
      planned = {};
      run.rules = resharded_rules;
      timing plan_reshard{0, 0};
      if (world <= 16384) {
        plan_reshard = measure([&] { planned = cairn::plan_load(parsed, {}, run); });
        if (!planned.problems.empty() || planned.same_layout) std::abort();
      }
      planned = {};
      std::printf("%7d %4d | %9llu %9llu %9llu | %5.3f %6.2f %5.3f %6.2f | %7llu | %5.3f %6.2f %5.3f %6.2f | %5.2f "
                  "%6.1f ",
                  world, zero ? 1 : 0, static_cast<unsigned long long>(first_save_bytes(pp)),
                  static_cast<unsigned long long>(sent), static_cast<unsigned long long>(received0), save.seconds,
                  save.megabytes, rank0.seconds, rank0.megabytes, static_cast<unsigned long long>(later_save_bytes),
                  load.seconds, load.megabytes, reshard.seconds, reshard.megabytes, plan.seconds, plan.megabytes);
      if (world <= 16384)
        std::printf("%5.2f %6.1f\n", plan_reshard.seconds, plan_reshard.megabytes);
      else
        std::printf("%12s\n", "(skipped)");
      if (meeting == 0) std::abort();
    }
  }
  for (auto const& a : plans)
    std::printf("cairn plan, %d ranks, ZeRO-%d, saving layout: its answer lists %llu reads (%.1f MB of the memory "
                "above)\n",
                a.world, a.zero ? 1 : 0, static_cast<unsigned long long>(a.entries), a.megabytes);
  std::printf("targets at 4,096 ranks: <= 64 KB a rank exchanged at the first save, <= 1 KB after; <= 16 MB and "
              "<= 1 s of planning a rank at load; the same for cairn plan\n");
}

} // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--scale") {
    scale(argc > 2 ? std::atoi(argv[2]) : 65536, 2000);
    return 0;
  }
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
  // After the first save of a run, the plan checks the state (8 bytes), agrees that no layout
  // changed in one all-reduce of five int64 and broadcasts the save's identity (its length, then
  // 32 characters); the checkpoint_layout_exchange test counts these bytes on 4 ranks.
  std::printf("  after the first save: each rank receives %llu bytes to plan a save whose layouts are unchanged\n",
              static_cast<unsigned long long>(later_save_bytes));
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
  // The rules the planning below starts from are those inferred here.
  if (cairn::to_json(*rules) != cairn::to_json(model_rules(tp, pp, dp, tensors, true))) {
    std::fprintf(stderr, "the model's rules are not those inferred\n");
    return 1;
  }
  scale(grid.world_size(), tensors);
  return writers.sets.empty() ? 0 : 1; // ZeRO-1 of column blocks: no replicas
}
