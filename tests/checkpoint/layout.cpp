// Shard layouts and their overlaps: random layouts of random shapes over 1-8 ranks cover every
// element exactly once, and resharding between any two moves every element to its place.
#include <cairn/checkpoint/detail/save_files.hpp>
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/layout_rules.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/config.hpp>

#include <doctest/doctest.h>

#include <numeric>
#include <random>
#include <vector>

#include "../error_kind.hpp"

using cairn::shard_layout;

namespace {

using shape_t = std::vector<std::uint64_t>;

/// `count` nearly equal parts of [0, total): some may be empty.
std::vector<std::pair<std::uint64_t, std::uint64_t>> split(std::uint64_t total, std::uint64_t count) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> parts;
  for (std::uint64_t i = 0; i < count; ++i) parts.emplace_back(total * i / count, total * (i + 1) / count);
  return parts;
}

/// A random sharding of `shape` over 1-8 ranks: along a dimension, flat over the whole tensor,
/// or both (flat halves of boxes along a dimension).
std::vector<shard_layout> random_layout(shape_t const& shape, std::mt19937_64& random) {
  auto ranks = 1 + random() % 8;
  auto scheme = random() % 3;
  std::vector<shard_layout> shards;
  if (scheme == 1 || shape.empty()) {
    auto whole = shard_layout::whole(shape);
    for (auto [b, e] : split(whole.box_numel(), ranks)) {
      auto s = whole;
      s.flat = cairn::flat_range{b, e};
      shards.push_back(s);
    }
    return shards;
  }
  auto dim = random() % shape.size();
  auto boxes = scheme == 0 ? ranks : (ranks + 1) / 2;
  for (auto [b, e] : split(shape[dim], boxes)) {
    auto s = shard_layout::whole(shape);
    s.offsets[dim] = b;
    s.lengths[dim] = e - b;
    if (scheme == 0) {
      shards.push_back(s);
      continue;
    }
    for (auto [fb, fe] : split(s.box_numel(), 2)) {
      auto half = s;
      half.flat = cairn::flat_range{fb, fe};
      shards.push_back(half);
    }
  }
  return shards;
}

shape_t random_shape(std::mt19937_64& random) {
  shape_t shape(random() % 4);
  for (auto& d : shape) d = 1 + random() % 7;
  return shape;
}

std::uint64_t numel(shape_t const& shape) {
  return std::accumulate(shape.begin(), shape.end(), std::uint64_t{1}, std::multiplies<>());
}

void copy(std::vector<std::int64_t> const& from, std::vector<std::int64_t>& to,
          std::vector<cairn::copy_run> const& runs) {
  for (auto const& r : runs)
    for (std::uint64_t k = 0; k < r.length; ++k) to[r.target + k] = from[r.source + k];
}

} // namespace

TEST_CASE("random layouts cover every element exactly once") {
  std::mt19937_64 random(1);
  for (int trial = 0; trial < 400; ++trial) {
    auto shape = random_shape(random);
    auto whole = shard_layout::whole(shape);
    std::vector<int> count(numel(shape), 0);
    std::uint64_t held = 0;
    for (auto const& shard : random_layout(shape, random)) {
      REQUIRE_FALSE(shard.problem(shape).has_value());
      held += shard.numel();
      for (auto const& run : cairn::overlap(shape, shard, whole))
        for (std::uint64_t k = 0; k < run.length; ++k) ++count[run.target + k];
    }
    CHECK(held == numel(shape));
    for (auto c : count) REQUIRE(c == 1);
  }
}

TEST_CASE("resharding between two random layouts puts every element in its place") {
  std::mt19937_64 random(2);
  for (int trial = 0; trial < 400; ++trial) {
    auto shape = random_shape(random);
    auto whole = shard_layout::whole(shape);
    std::vector<std::int64_t> global(numel(shape));
    std::iota(global.begin(), global.end(), 100);
    auto from = random_layout(shape, random), to = random_layout(shape, random);
    std::vector<std::vector<std::int64_t>> saved;
    for (auto const& s : from) {
      saved.emplace_back(s.numel(), -1);
      copy(global, saved.back(), cairn::overlap(shape, whole, s));
    }
    std::vector<std::int64_t> rebuilt(global.size(), -1);
    for (auto const& t : to) {
      std::vector<std::int64_t> live(t.numel(), -1);
      for (std::size_t i = 0; i < from.size(); ++i) copy(saved[i], live, cairn::overlap(shape, from[i], t));
      REQUIRE(std::find(live.begin(), live.end(), -1) == live.end()); // every element loaded
      copy(live, rebuilt, cairn::overlap(shape, t, whole));
    }
    REQUIRE(rebuilt == global);
  }
}

TEST_CASE("overlap of two boxes, in runs over their buffers") {
  shape_t shape{4, 6};
  shard_layout left{{0, 0}, {4, 3}, {}}, right{{0, 2}, {4, 4}, {}};
  // Column 2 is shared: one element per row.
  CHECK(cairn::overlap(shape, left, right) ==
        std::vector<cairn::copy_run>{{2, 0, 1}, {5, 4, 1}, {8, 8, 1}, {11, 12, 1}});
  // Rows 1-2 of a row split against the whole: one merged run.
  shard_layout rows{{1, 0}, {2, 6}, {}};
  CHECK(cairn::overlap(shape, rows, shard_layout::whole(shape)) == std::vector<cairn::copy_run>{{0, 6, 12}});
  // Dimensions covered whole join the row: two runs of 2 x 6 elements, not four of 6.
  shard_layout middle{{0, 1, 0}, {2, 2, 6}, {}};
  CHECK(cairn::overlap({2, 4, 6}, middle, shard_layout::whole({2, 4, 6})) ==
        std::vector<cairn::copy_run>{{0, 6, 12}, {12, 30, 12}});
  shard_layout elsewhere{{0, 4}, {4, 2}, {}};
  CHECK(cairn::overlap(shape, left, elsewhere).empty());
}

TEST_CASE("the elements two shards of a matrix share are counted as their runs give, flat slices or not") {
  // overlap_count of matrices counts rows arithmetically (a flat slice holds whole rows of its
  // box but for its first and last): the same as the runs the copies go by, on random shards.
  std::mt19937 random(7);
  auto below = [&](std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(random); };
  auto shard_of = [&](shape_t const& shape) {
    shard_layout s{{below(shape[0]), below(shape[1])}, {0, 0}, {}};
    s.lengths = {1 + below(shape[0] - s.offsets[0]), 1 + below(shape[1] - s.offsets[1])};
    if (below(3) != 0) {
      auto n = s.box_numel(), begin = below(n + 1);
      s.flat = cairn::flat_range{begin, begin + below(n - begin + 1)};
    }
    return s;
  };
  for (int i = 0; i < 20000; ++i) {
    shape_t shape{1 + below(9), 1 + below(9)};
    auto a = shard_of(shape), b = shard_of(shape);
    std::uint64_t runs = 0;
    for (auto const& run : cairn::overlap(shape, a, b)) runs += run.length;
    CAPTURE(cairn::to_compact_json(cairn::to_json(a)));
    CAPTURE(cairn::to_compact_json(cairn::to_json(b)));
    REQUIRE(cairn::overlap_count(shape, a, b) == runs);
  }
}

TEST_CASE("invalid shards say why") {
  shape_t shape{4, 6};
  CHECK(shard_layout{{0}, {4}, {}}.problem(shape) == "a shard of rank 1 for a tensor of rank 2");
  // Offsets and lengths that differ in count are that, whatever the tensor's rank.
  CHECK(shard_layout{{0, 0}, {4}, {}}.problem(shape) == "a shard of 2 offsets and 1 length: one of each per dimension");
  CHECK(shard_layout{{0}, {4, 6}, {}}.problem(shape) == "a shard of 1 offset and 2 lengths: one of each per dimension");
  CHECK(shard_layout{{2, 0}, {3, 6}, {}}.problem(shape) == "the shard exceeds the tensor in dimension 0");
  CHECK(shard_layout{{0, 0}, {4, 6}, cairn::flat_range{10, 30}}.problem(shape) ==
        "the flat range [10, 30) exceeds the box of 24 elements");
}

TEST_CASE("layouts serialise to JSON through the config core") {
  cairn::rank_layout layout{{{"embedding", {100, 8}, cairn::io::dtype::BF16, false, {{50, 0}, {50, 8}, {}}},
                             {"norm", {8}, cairn::io::dtype::F32, true, {{0}, {8}, cairn::flat_range{0, 4}}}}};
  auto json = cairn::to_json(layout);
  CHECK(json.at("parameters").at(0).at("dtype") == "BF16");
  CHECK(json.at("parameters").at(1).at("shard").at("flat") == boost::json::object{{"begin", 0}, {"end", 4}});
  CHECK(cairn::parse<cairn::rank_layout>(json) == layout);
  CHECK_THROWS_WITH_AS(cairn::parse<cairn::rank_layout>(cairn::parse_json(R"({"parameters": [{"dtype": "F33"}]})")),
                       doctest::Contains("parameters[0].dtype: expected a dtype such as \"F32\" or \"BF16\""),
                       cairn::config_error);
}

namespace {

/// The layouts of `size` ranks, each holding parameter "p" of `shape` as `shard` gives it.
std::vector<cairn::rank_layout> ranks_of(std::vector<std::uint64_t> const& shape, int size,
                                         cairn::shard_layout (*shard)(std::vector<std::uint64_t> const&, int, int)) {
  std::vector<cairn::rank_layout> ranks(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r)
    ranks[static_cast<std::size_t>(r)].parameters.push_back(
        {"p", shape, cairn::io::dtype::F32, false, shard(shape, r, size)});
  return ranks;
}

} // namespace

TEST_CASE("rows, columns and flat slices of any size tile the tensor exactly") {
  for (auto shape :
       {std::vector<std::uint64_t>{7, 5}, std::vector<std::uint64_t>{1, 9}, std::vector<std::uint64_t>{4, 4}})
    for (int size = 1; size <= 6; ++size) {
      CAPTURE(size);
      CHECK(cairn::tiling_problems(ranks_of(shape, size, cairn::split_rows)).empty());
      CHECK(cairn::tiling_problems(ranks_of(shape, size, cairn::split_columns)).empty());
      CHECK(cairn::tiling_problems(ranks_of(shape, size, cairn::flat_slice)).empty());
    }
  // Seven rows over three ranks: 3, 2, 2.
  CHECK(cairn::split_rows({7, 5}, 0, 3).lengths == std::vector<std::uint64_t>{3, 5});
  CHECK(cairn::split_rows({7, 5}, 2, 3).offsets == std::vector<std::uint64_t>{5, 0});
  CHECK(cairn::flat_slice({7, 5}, 1, 3).flat == cairn::flat_range{11, 23});
  CHECK_KIND(cairn::split_dimension({7}, 1, 0, 2), cairn::checkpoint_errc::invalid_state);
  CHECK_KIND(cairn::flat_slice({7}, 2, 2), cairn::checkpoint_errc::invalid_state);
}

TEST_CASE("places on a TP x DP grid at ZeRO stages 0 to 3 tile each parameter, replicas counted once") {
  using cairn::tensor_split;
  std::vector<std::uint64_t> const shape{6, 5};
  for (auto split : {tensor_split::none, tensor_split::rows, tensor_split::columns})
    for (int tp : {1, 2, 3})
      for (int dp : {1, 2, 4})
        for (int zero : {0, 1, 3}) {
          CAPTURE(split);
          CAPTURE(tp);
          CAPTURE(dp);
          CAPTURE(zero);
          std::vector<cairn::rank_layout> ranks;
          for (int d = 0; d < dp; ++d)
            for (int t = 0; t < tp; ++t) {
              auto [shard, replicated] = cairn::place_on_grid(shape, split, t, tp, d, dp, zero);
              ranks.push_back({{{"p", shape, cairn::io::dtype::F32, replicated, shard}}});
            }
          CHECK(cairn::tiling_problems(ranks).empty());
          // Each rank writes its share: the replica sets hold the tensor once between them.
          auto writers = cairn::detail::replica_writers_of(ranks, cairn::replica_writer_rule::balanced);
          std::uint64_t written = 0;
          for (std::size_t r = 0; r < ranks.size(); ++r) {
            auto const& held = ranks[r].parameters[0];
            if (!held.replicated || writers.of("p", held.shard) == static_cast<int>(r)) written += held.shard.numel();
          }
          CHECK(written == 30);
        }
  // TP=2 x DP=2 at ZeRO-1: rows 0-2 of a column-parallel weight, its second flat half.
  auto place = cairn::place_on_grid(shape, tensor_split::rows, 0, 2, 1, 2, 1);
  CHECK(place.shard.offsets == std::vector<std::uint64_t>{0, 0});
  CHECK(place.shard.lengths == std::vector<std::uint64_t>{3, 5});
  CHECK(place.shard.flat == cairn::flat_range{7, 15});
  CHECK_FALSE(place.replicated);
  CHECK(cairn::place_on_grid(shape, tensor_split::none, 1, 2, 1, 2, 1).replicated); // the same slice on both TP ranks
  CHECK(cairn::place_on_grid(shape, tensor_split::columns, 1, 2, 0, 2, 0).replicated); // the block over DP
  CHECK_FALSE(cairn::place_on_grid(shape, tensor_split::columns, 1, 2, 0, 1, 0).replicated);
  CHECK_KIND(cairn::place_on_grid(shape, tensor_split::rows, 2, 2, 0, 1, 1), cairn::checkpoint_errc::invalid_state);
  CHECK_KIND(cairn::place_on_grid(shape, tensor_split::rows, 0, 2, 0, 1, 4), cairn::checkpoint_errc::invalid_state);
  CHECK_KIND(cairn::flat_slice(cairn::flat_slice(shape, 0, 2), 0, 2), cairn::checkpoint_errc::invalid_state);
}

TEST_CASE("the layouts of a grid are inferred as its rules and expand back exactly; others are not rules") {
  using cairn::tensor_split;
  struct spec {
    std::string name;
    std::vector<std::uint64_t> shape;
    tensor_split split;
  };
  std::vector<spec> const model{{"embedding", {12, 4}, tensor_split::rows},
                                {"attention", {8, 6}, tensor_split::columns},
                                {"norm", {6}, tensor_split::none},
                                {"mlp", {8, 6}, tensor_split::rows},
                                {"head", {5, 6}, tensor_split::none}};
  struct grid {
    int tensor, pipeline, data, zero;
  };
  for (auto g : {grid{1, 1, 1, 0}, grid{2, 1, 2, 1}, grid{2, 2, 2, 0}, grid{4, 2, 1, 1}, grid{1, 4, 2, 1},
                 grid{1, 1, 8, 0}, grid{2, 1, 3, 1}}) {
    CAPTURE(g.tensor);
    CAPTURE(g.pipeline);
    CAPTURE(g.data);
    cairn::comm::parallel_grid layout(g.tensor, g.pipeline, g.data, g.tensor * g.pipeline * g.data);
    std::vector<cairn::rank_layout> ranks(static_cast<std::size_t>(layout.world_size()));
    for (int r = 0; r < layout.world_size(); ++r) {
      auto at = layout.coordinates(r);
      for (std::size_t i = 0; i < model.size(); ++i) {
        if (cairn::comm::stage_of_layer(std::int64_t(i), std::int64_t(model.size()), g.pipeline) != at.pipeline)
          continue;
        auto place = cairn::place_on_grid(model[i].shape, model[i].split, at.tensor, g.tensor, at.data, g.data, g.zero);
        ranks[std::size_t(r)].parameters.push_back(
            {model[i].name, model[i].shape, cairn::io::dtype::BF16, place.replicated, place.shard});
      }
    }
    auto rules = cairn::infer_rules(ranks);
    REQUIRE(rules);
    CHECK(cairn::expand_rules(*rules) == ranks);
    CHECK(rules->parameters.size() == model.size());
    CHECK(rules->tensor * rules->pipeline * rules->data == layout.world_size());
    // What each rank derives alone from its own layout is its stage's rules; what a reader
    // computes from the rules alone (who holds a parameter, who writes each replica set) is what
    // the expanded layouts give.
    auto writers = cairn::detail::replica_writers_of(ranks, cairn::replica_writer_rule::balanced);
    for (int r = 0; r < layout.world_size(); ++r) {
      auto at = layout.coordinates(r);
      auto mine = cairn::detail::rules_of_rank(ranks[std::size_t(r)], *rules, at);
      REQUIRE(mine);
      boost::json::array derived, expected;
      for (auto const& rule : *mine) derived.push_back(cairn::to_json(rule));
      for (auto const& rule : rules->parameters)
        if (rule.stage == at.pipeline) expected.push_back(cairn::to_json(rule));
      CHECK(derived == expected);
    }
    for (int stage = 0; stage < g.pipeline; ++stage) {
      auto computed = cairn::detail::replica_writers_of(*rules, stage, cairn::replica_writer_rule::balanced);
      for (auto const& rule : rules->parameters) {
        if (rule.stage != stage) continue;
        CAPTURE(rule.name);
        auto expanded = writers.sets.find(rule.name);
        std::vector<std::pair<cairn::shard_layout, int>> none;
        CHECK(computed.sets[rule.name] == (expanded == writers.sets.end() ? none : expanded->second));
        std::vector<std::pair<int, cairn::parameter_layout>> held;
        for (int r = 0; r < layout.world_size(); ++r)
          for (auto const& p : ranks[std::size_t(r)].parameters)
            if (p.name == rule.name) held.emplace_back(r, p);
        CHECK(cairn::detail::holdings_of(*rules, rule) == held);
      }
    }
    // Another rank's coordinates do not give this rank's layout.
    if (g.tensor > 1) CHECK_FALSE(cairn::detail::rules_of_rank(ranks.front(), *rules, layout.coordinates(1)));
    // One holding otherwise than the grid places it: the layouts are enumerated instead.
    auto odd = ranks;
    odd.back().parameters.back().replicated = !odd.back().parameters.back().replicated;
    CHECK_FALSE(cairn::infer_rules(odd));
    if (g.tensor * g.data > 1) { // a parameter the first rank lacks and the others of its stage hold
      odd = ranks;
      odd.front().parameters.pop_back();
      CHECK_FALSE(cairn::infer_rules(odd));
    }
  }
  // Flat halves of row blocks (two ranks to a block): no grid's rule.
  std::vector<cairn::rank_layout> mixed(4);
  for (int r = 0; r < 4; ++r) {
    auto shard = cairn::flat_slice(cairn::split_rows({8, 6}, r / 2, 2), r % 2, 2);
    mixed[std::size_t(r)].parameters.push_back({"w", {8, 6}, cairn::io::dtype::F32, false, shard});
  }
  CHECK(cairn::tiling_problems(mixed).empty());
  CHECK_FALSE(cairn::infer_rules(mixed));
  // Hostile rules: named, before anything is expanded.
  cairn::layout_rules rules{1, 1, 1, {{"w", {4}, cairn::io::dtype::F32, tensor_split::columns, false, 0}}};
  CHECK_THROWS_WITH(cairn::expand_rules(rules), doctest::Contains("'w': a tensor of 1 dimensions split by columns"));
  rules.parameters[0].split = tensor_split::none;
  rules.data = 1 << 21;
  CHECK_THROWS_WITH(cairn::expand_rules(rules), doctest::Contains("data is 2097152"));
  rules.data = 0;
  CHECK_KIND(cairn::expand_rules(rules), cairn::checkpoint_errc::invalid_state);
  CHECK_KIND(cairn::check_rules(rules), cairn::checkpoint_errc::invalid_state);
  rules.data = 1;
  rules.parameters.push_back(rules.parameters.front());
  CHECK_THROWS_WITH(cairn::check_rules(rules), doctest::Contains("'w': listed twice"));
}

TEST_CASE("layouts that do not tile a parameter are named, each problem once") {
  auto ranks = ranks_of({8, 2}, 2, cairn::split_rows);
  ranks[1].parameters[0].shard.offsets[0] = 3; // rows 3..6: overlaps rank 0's row 3, leaves row 7
  auto problems = cairn::tiling_problems(ranks);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "'p': the ranks' shards overlap in 2 elements");
  ranks = ranks_of({8, 2}, 2, cairn::split_rows);
  ranks[1].parameters[0].shard.lengths[0] = 3;
  CHECK(cairn::tiling_problems(ranks) == std::vector<std::string>{"'p': the ranks' shards hold 14 of its 16 elements"});
  ranks = ranks_of({8, 2}, 2, cairn::split_rows);
  ranks[1].parameters[0].shape = {8, 3};
  CHECK(cairn::tiling_problems(ranks).front().find("rank 1 disagrees with rank 0") != std::string::npos);
  ranks = ranks_of({8, 2}, 1, cairn::split_rows);
  ranks[0].parameters.push_back(ranks[0].parameters[0]);
  CHECK(cairn::tiling_problems(ranks) == std::vector<std::string>{"'p' is listed twice by rank 0"});
  // A replicated parameter is written once: every rank holding it whole is fine.
  ranks =
      ranks_of({8, 2}, 3, [](std::vector<std::uint64_t> const& s, int, int) { return cairn::shard_layout::whole(s); });
  for (auto& r : ranks) r.parameters[0].replicated = true;
  CHECK(cairn::tiling_problems(ranks).empty());
}

TEST_CASE("replicated parameters are written once each, spread over the ranks by bytes; older saves keep rank 0") {
  // Data parallel over 4 ranks: every parameter replicated, twelve of assorted sizes.
  std::vector<std::uint64_t> sizes{4096, 1024, 1024, 512, 4096, 64, 2048, 2048, 256, 1024, 4096, 128};
  std::vector<std::string> names{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"};
  std::vector<cairn::rank_layout> ranks(4);
  for (auto& r : ranks)
    for (std::size_t i = 0; i < sizes.size(); ++i)
      r.parameters.push_back({names[i], {sizes[i]}, cairn::io::dtype::F32, true, shard_layout::whole({sizes[i]})});
  auto writers = cairn::detail::replica_writers_of(ranks, cairn::replica_writer_rule::balanced);
  REQUIRE(writers.sets.size() == sizes.size()); // each written once
  std::vector<double> bytes(4, 0);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    REQUIRE(writers.sets.at(names[i]).size() == 1);
    bytes.at(static_cast<std::size_t>(writers.of(names[i], shard_layout::whole({sizes[i]})))) += 4.0 * double(sizes[i]);
  }
  auto mean = std::accumulate(bytes.begin(), bytes.end(), 0.0) / 4;
  for (auto b : bytes) CHECK(b <= 1.25 * mean); // every rank writes a share; rank 0 wrote all before
  CHECK(*std::min_element(bytes.begin(), bytes.end()) > 0);
  // The same on every rank and at load: a function of the layouts alone.
  CHECK(cairn::detail::replica_writers_of(ranks, cairn::replica_writer_rule::balanced).sets == writers.sets);
  // A rank's own shards count first: the rank holding a large sharded parameter writes fewer replicas.
  auto skewed = ranks;
  skewed[0].parameters.push_back({"sharded", {100000}, cairn::io::dtype::F32, false, shard_layout::whole({100000})});
  for (auto const& [name, sets] : cairn::detail::replica_writers_of(skewed, cairn::replica_writer_rule::balanced).sets)
    CHECK(sets.at(0).second != 0);
  // Saves of metadata version 2 and before: rank 0 wrote every replicated parameter.
  for (auto const& [name, sets] : cairn::detail::replica_writers_of(ranks, cairn::replica_writer_rule::rank_0).sets)
    CHECK(sets.at(0).second == 0);
}

TEST_CASE(
    "replica sets: a tensor-parallel shard replicated over its data-parallel group is written once, by a member") {
  // TP=2 x DP=2, Megatron's order (rank = tp + 2 dp), no optimizer sharding: the column block tp
  // of every weight is held by ranks tp and tp + 2. And HSDP: flat halves within a "node" of 2,
  // replicated across the 2 nodes.
  std::vector<std::uint64_t> sizes{4096, 1024, 2048, 512, 4096, 2048, 1024, 256};
  std::vector<std::string> const names{"w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7"};
  std::vector<cairn::rank_layout> tp_dp(4), hsdp(4);
  for (int r = 0; r < 4; ++r)
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      shape_t shape{8, sizes[i] / 8};
      auto const& name = names[i];
      tp_dp[static_cast<std::size_t>(r)].parameters.push_back(
          {name, shape, cairn::io::dtype::F32, true, cairn::split_columns(shape, r % 2, 2)});
      hsdp[static_cast<std::size_t>(r)].parameters.push_back(
          {name, shape, cairn::io::dtype::F32, true, cairn::flat_slice(shape, r % 2, 2)});
    }
  for (auto const* ranks : {&tp_dp, &hsdp}) {
    CHECK(cairn::tiling_problems(*ranks).empty()); // each element once per replica set
    auto writers = cairn::detail::replica_writers_of(*ranks, cairn::replica_writer_rule::balanced);
    std::vector<double> bytes(4, 0);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      auto const& sets = writers.sets.at(names[i]);
      REQUIRE(sets.size() == 2); // two distinct shards, each written once
      for (auto const& [shard, rank] : sets) {
        CHECK(rank % 2 == (shard == (*ranks)[0].parameters[i].shard ? 0 : 1)); // by a member of its set
        bytes.at(static_cast<std::size_t>(rank)) += 4.0 * double(shard.numel());
      }
    }
    auto mean = std::accumulate(bytes.begin(), bytes.end(), 0.0) / 4;
    for (auto b : bytes) CHECK(b <= 1.25 * mean); // every rank writes a share
  }
  // Replicas that hold other boxes of one parameter overlap: refused, as any overlap.
  auto skewed = tp_dp;
  skewed[2].parameters[0].shard = cairn::split_columns(skewed[2].parameters[0].shape, 1, 4);
  CHECK(cairn::tiling_problems(skewed).front().find("'w0': the ranks' shards overlap") != std::string::npos);
  // One data-parallel group lacking a rank is fine; a column block nobody holds is not.
  auto lacking = tp_dp;
  lacking[3].parameters.erase(lacking[3].parameters.begin());
  CHECK(cairn::tiling_problems(lacking).empty());
  lacking[1].parameters.erase(lacking[1].parameters.begin());
  CHECK(cairn::tiling_problems(lacking).front().find("'w0': the ranks' shards hold") != std::string::npos);
}

TEST_CASE("a whole-tensor save lets each holder write its part in place when every part is one run of the whole") {
  shape_t const shape{6, 4};
  auto layouts = [&](auto shard_of, int size) {
    std::vector<cairn::rank_layout> ranks(static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r)
      ranks[static_cast<std::size_t>(r)].parameters.push_back(
          {"w", shape, cairn::io::dtype::F32, false, shard_of(r, size)});
    return ranks;
  };
  auto whole = cairn::parameter_layout{"w", shape, cairn::io::dtype::F32, false, shard_layout::whole(shape)};
  // Flat slices (ZeRO) and row blocks are runs: each rank's, in rank order.
  auto flat = cairn::detail::part_runs(layouts([&](int r, int n) { return cairn::flat_slice(shape, r, n); }, 3), whole);
  REQUIRE(flat);
  CHECK(*flat == std::vector<cairn::flat_range>{{0, 8}, {8, 16}, {16, 24}});
  auto rows = cairn::detail::part_runs(layouts([&](int r, int n) { return cairn::split_rows(shape, r, n); }, 4), whole);
  REQUIRE(rows);
  CHECK(*rows == std::vector<cairn::flat_range>{{0, 8}, {8, 16}, {16, 20}, {20, 24}}); // 2, 2, 1 and 1 rows
  // Column blocks are a run per row: gathered instead. So is a part held by one rank alone, and
  // layouts that leave a gap or overlap (the gather reports those).
  CHECK_FALSE(
      cairn::detail::part_runs(layouts([&](int r, int n) { return cairn::split_columns(shape, r, n); }, 2), whole));
  CHECK_FALSE(cairn::detail::part_runs(layouts([&](int, int) { return shard_layout::whole(shape); }, 1), whole));
  auto replicated = layouts([&](int, int) { return shard_layout::whole(shape); }, 3);
  for (auto& r : replicated) r.parameters[0].replicated = true;
  CHECK_FALSE(cairn::detail::part_runs(replicated, whole)); // rank 0 alone sends replicated values
  auto gap = layouts([&](int r, int n) { return cairn::flat_slice(shape, r, n); }, 3);
  gap[1].parameters[0].shard.flat = cairn::flat_range{8, 15};
  CHECK_FALSE(cairn::detail::part_runs(gap, whole));
  auto overlapping = layouts([&](int r, int n) { return cairn::flat_slice(shape, r, n); }, 2);
  overlapping[1].parameters[0].shard.flat = cairn::flat_range{11, 24};
  CHECK_FALSE(cairn::detail::part_runs(overlapping, whole));
}
