// The resume dry run: from a checkpoint's metadata and a run's layouts alone, what each rank of
// the run reads, file by file, and every problem that would stop the load.
#include <cairn/checkpoint/layout_rules.hpp>
#include <cairn/checkpoint/load_plan.hpp>
#include <cairn/comm/grid.hpp>
#include <cairn/config/json.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace {

using shape_t = std::vector<std::uint64_t>;

/// Two parameters, flat-sliced (ZeRO) over `size` ranks, and a replicated one (data parallel).
std::vector<cairn::rank_layout> flat_layouts(int size, shape_t const& w = {6, 4}) {
  std::vector<cairn::rank_layout> ranks(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    auto& held = ranks[static_cast<std::size_t>(r)].parameters;
    held.push_back({"w", w, cairn::io::dtype::F32, false, cairn::flat_slice(w, r, size)});
    held.push_back({"b", {10}, cairn::io::dtype::BF16, false, cairn::flat_slice({10}, r, size)});
    held.push_back({"norm", {4}, cairn::io::dtype::F32, true, cairn::shard_layout::whole({4})});
  }
  return ranks;
}

cairn::checkpoint_metadata distributed_save(int size) {
  cairn::checkpoint_metadata saved;
  saved.shard_names = {"weights", "exp_avg"};
  saved.ranks = flat_layouts(size);
  return saved;
}

cairn::run_layout run_of(int size, std::vector<std::string> shards = {"weights", "exp_avg"}) {
  cairn::run_layout run;
  run.shard_names = std::move(shards);
  run.ranks = flat_layouts(size);
  return run;
}

std::uint64_t total(std::vector<cairn::planned_read> const& reads) {
  std::uint64_t n = 0;
  for (auto const& r : reads) n += r.bytes;
  return n;
}

// Per state shard: w 24 floats (96 bytes), b 10 bfloat16 (20 bytes), norm 4 floats (16 bytes).

} // namespace

TEST_CASE("with the saving layout each rank reads its own file, and the replicated values from their writer") {
  auto plan = cairn::plan_load(distributed_save(2), {}, run_of(2));
  CHECK(plan.problems.empty());
  CHECK(plan.same_layout);
  CHECK(plan.resharded.empty());
  REQUIRE(plan.reads.size() == 2);
  // The replicated `norm` is in one file (its writer's); each rank reads it from there.
  auto writer = cairn::detail::replica_writers_of(distributed_save(2).ranks, cairn::replica_writer_rule::balanced);
  auto norm_file = "rank_" + std::to_string(writer.of("norm", cairn::shard_layout::whole({4}))) + ".safetensors";
  for (int r = 0; r < 2; ++r) {
    auto const& reads = plan.reads[static_cast<std::size_t>(r)];
    CHECK(total(reads) == 2 * (96 / 2 + 20 / 2 + 16)); // two shards: its halves and the whole norm
    bool own = std::any_of(reads.begin(), reads.end(),
                           [&](auto const& read) { return read.file == "rank_" + std::to_string(r) + ".safetensors"; });
    CHECK(own);
    CHECK(reads.size() == (norm_file == "rank_" + std::to_string(r) + ".safetensors" ? 1u : 2u));
  }
}

TEST_CASE("another world size reshards every parameter held otherwise, each element read once per rank needing it") {
  auto plan = cairn::plan_load(distributed_save(2), {}, run_of(3));
  CHECK(plan.problems.empty());
  CHECK_FALSE(plan.same_layout);
  // norm is whole on every rank, saved and run: a third replica of it is no reshard.
  CHECK(plan.resharded == std::vector<std::string>{"b", "w"});
  REQUIRE(plan.reads.size() == 3);
  std::uint64_t all = 0;
  for (auto const& reads : plan.reads) all += total(reads);
  CHECK(all == 2 * (96 + 20 + 3 * 16)); // the sliced parameters once, the replicated one by every rank
  // Rank 1 of 3 holds elements 8..16 of w: half from each saved rank's file.
  auto const& middle = plan.reads[1];
  CHECK(std::any_of(middle.begin(), middle.end(), [](auto const& r) { return r.file == "rank_0.safetensors"; }));
  CHECK(std::any_of(middle.begin(), middle.end(), [](auto const& r) { return r.file == "rank_1.safetensors"; }));
}

TEST_CASE("a run the checkpoint does not fit is refused with every problem named") {
  auto saved = distributed_save(2);
  auto run = run_of(2, {"weights", "momentum"});
  run.ranks = flat_layouts(2, {6, 8}); // another hidden size
  for (auto& r : run.ranks) {
    r.parameters.push_back({"extra", {2}, cairn::io::dtype::F32, true, cairn::shard_layout::whole({2})});
    std::erase_if(r.parameters, [](auto const& p) { return p.name == "b"; });
  }
  auto plan = cairn::plan_load(saved, {}, run);
  auto has = [&](std::string const& text) {
    return std::any_of(plan.problems.begin(), plan.problems.end(),
                       [&](std::string const& p) { return p.find(text) != std::string::npos; });
  };
  CHECK(has("momentum: state shard not in the checkpoint (it holds weights, exp_avg)"));
  CHECK(has("exp_avg: state shard of the checkpoint the run does not have: it would be lost"));
  CHECK(has("w: has shape [6, 4] in the checkpoint, [6, 8] in the run"));
  CHECK(has("extra: missing from the checkpoint"));
  CHECK(has("b: in the checkpoint but not in the run"));
  CHECK(plan.problems.size() == 5); // each once, however many ranks hold it
}

TEST_CASE("a load of the weights alone zeroes the run's optimizer state and loses nothing it asked for") {
  auto run = run_of(2, {"weights", "exp_avg", "exp_avg_sq"});
  run.optimizer_state = false;
  auto plan = cairn::plan_load(distributed_save(2), {}, run);
  CHECK(plan.problems.empty());
  CHECK(plan.zeroed == std::vector<std::string>{"exp_avg", "exp_avg_sq"});
  CHECK(total(plan.reads[0]) == 96 / 2 + 20 / 2 + 16); // the weights alone
}

TEST_CASE("a state_dict checkpoint is read through its index: whole tensors, each rank its parts") {
  cairn::checkpoint_metadata saved;
  saved.format = cairn::checkpoint_format::state_dict;
  saved.shard_names = {"weights", "exp_avg"};
  auto whole = flat_layouts(1);
  for (auto const& p : whole[0].parameters)
    saved.parameters.push_back({p.name, p.shape, p.dtype, false, cairn::shard_layout::whole(p.shape)});
  std::map<std::string, std::string> index{
      {"w/weights", "state_dict_0.safetensors"},    {"w/exp_avg", "state_dict_1.safetensors"},
      {"b/weights", "state_dict_0.safetensors"},    {"b/exp_avg", "state_dict_0.safetensors"},
      {"norm/weights", "state_dict_1.safetensors"}, {"norm/exp_avg", "state_dict_1.safetensors"}};
  auto plan = cairn::plan_load(saved, index, run_of(4));
  CHECK(plan.problems.empty());
  std::uint64_t all = 0;
  for (auto const& reads : plan.reads) all += total(reads);
  CHECK(all == 2 * (96 + 20 + 4 * 16));
  CHECK(plan.reads[0].size() == 2);
  index.erase("norm/exp_avg");
  auto missing = cairn::plan_load(saved, index, run_of(4));
  REQUIRE(missing.problems.size() == 1);
  CHECK(missing.problems[0] == "norm/exp_avg: not in the index's weight map");
}

TEST_CASE("a shape of more than 2^64 elements is a problem, not a wrapped count") {
  auto saved = distributed_save(2);
  for (auto& r : saved.ranks) r.parameters[0].shape = {std::uint64_t{1} << 32, std::uint64_t{1} << 32};
  saved.ranks[0].parameters[0].shard = cairn::split_rows(saved.ranks[0].parameters[0].shape, 0, 2);
  saved.ranks[1].parameters[0].shard = cairn::split_rows(saved.ranks[1].parameters[0].shape, 1, 2);
  auto plan = cairn::plan_load(saved, {}, run_of(2));
  CHECK(std::any_of(plan.problems.begin(), plan.problems.end(), [](std::string const& p) {
    return p == "the checkpoint: 'w': its shape has more than 2^64 elements";
  }));
}

TEST_CASE("a plan from rules is the plan from the layouts they expand to, saving layout or resharded") {
  // A small model on TP x PP x DP grids, planned twice: from enumerated layouts (every rank's
  // holding listed) and from the grid's rules (each parameter's holdings computed one at a time).
  struct spec {
    std::string name;
    shape_t shape;
    cairn::tensor_split split;
  };
  std::vector<spec> const model{{"embedding", {12, 4}, cairn::tensor_split::rows},
                                {"attention", {8, 6}, cairn::tensor_split::columns},
                                {"norm", {6}, cairn::tensor_split::none},
                                {"mlp", {8, 6}, cairn::tensor_split::rows},
                                {"head", {5, 6}, cairn::tensor_split::none}};
  auto rules_of = [&](int tp, int pp, int dp, bool zero) {
    cairn::layout_rules rules{tp, pp, dp, {}};
    for (std::size_t i = 0; i < model.size(); ++i)
      rules.parameters.push_back({model[i].name, model[i].shape, cairn::io::dtype::F32, model[i].split, zero,
                                  cairn::comm::stage_of_layer(std::int64_t(i), std::int64_t(model.size()), pp)});
    return rules;
  };
  struct grid {
    int tp, pp, dp;
    bool zero;
  };
  std::vector<grid> const grids{{1, 1, 1, false}, {2, 1, 2, true},  {2, 2, 2, false},
                                {1, 2, 4, true},  {4, 1, 1, false}, {2, 1, 3, true}};
  auto id = [](grid g) { return g.tp * 1000 + g.pp * 100 + g.dp * 10 + (g.zero ? 1 : 0); };
  auto enumerated = [](auto form) { // the same layouts, every rank's listed
    form.ranks = cairn::expand_rules(*form.rules);
    form.rules.reset();
    return form;
  };
  for (auto saved_grid : grids)
    for (auto run_grid : grids) {
      CAPTURE(id(saved_grid));
      CAPTURE(id(run_grid));
      cairn::checkpoint_metadata ruled;
      ruled.shard_names = {"weights", "exp_avg"};
      ruled.rules = rules_of(saved_grid.tp, saved_grid.pp, saved_grid.dp, saved_grid.zero);
      cairn::run_layout run;
      run.shard_names = ruled.shard_names;
      run.rules = rules_of(run_grid.tp, run_grid.pp, run_grid.dp, run_grid.zero);
      auto listed = enumerated(ruled);
      auto run_listed = enumerated(run);
      auto from_rules = cairn::plan_load(ruled, {}, run), from_layouts = cairn::plan_load(listed, {}, run_listed);
      CHECK(cairn::to_json(from_rules) == cairn::to_json(from_layouts));
      CHECK(from_rules.problems.empty());
      CHECK(from_rules.same_layout == (id(saved_grid) == id(run_grid)));
      // Mixed forms agree too.
      CHECK(cairn::to_json(cairn::plan_load(ruled, {}, run_listed)) == cairn::to_json(from_layouts));
      CHECK(cairn::to_json(cairn::plan_load(listed, {}, run)) == cairn::to_json(from_layouts));
    }
  // Rules of a run that are not valid are its problem, named.
  cairn::run_layout odd;
  odd.shard_names = {"weights", "exp_avg"};
  odd.rules = rules_of(2, 1, 1, false);
  odd.rules->parameters[2].split = cairn::tensor_split::columns; // a vector split by columns
  auto plan = cairn::plan_load(distributed_save(2), {}, odd);
  REQUIRE(plan.problems.size() == 1);
  CHECK(plan.problems[0].find("the run: layout rules: 'norm'") != std::string::npos);
}
