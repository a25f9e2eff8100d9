// The parallel grid: coordinates, groups and rank order of TP x PP x DP layouts.
#include <cairn/comm/grid.hpp>

#include <doctest/doctest.h>

#include <set>
#include <vector>

#include "../error_kind.hpp"

using cairn::comm::axis;
using cairn::comm::grid_order;
using cairn::comm::parallel_grid;
using ranks = std::vector<int>;

TEST_CASE("Megatron's order: tensor parallel ranks consecutive, then data, then pipeline") {
  parallel_grid grid(2, 2, 2, 8); // TP=2 x PP=2 x DP=2
  CHECK(grid.text() == "TP=2 x PP=2 x DP=2 (tensor_data_pipeline)");
  auto at = grid.coordinates(5); // 5 = tp 1 + 2 * (dp 0) + 4 * (pp 1)
  CHECK(at.tensor == 1);
  CHECK(at.data == 0);
  CHECK(at.pipeline == 1);
  CHECK(grid.group(axis::tensor, 5) == ranks{4, 5});
  CHECK(grid.group(axis::data, 5) == ranks{5, 7});
  CHECK(grid.group(axis::pipeline, 5) == ranks{1, 5});
  CHECK(grid.groups(axis::tensor) == std::vector<ranks>{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(grid.groups(axis::data) == std::vector<ranks>{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(grid.groups(axis::pipeline) == std::vector<ranks>{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(grid.group_index(axis::data, 7) == 3);
}

TEST_CASE("every order: coordinates and ranks are inverse, each axis's groups partition the ranks") {
  for (auto order :
       {grid_order::tensor_data_pipeline, grid_order::tensor_pipeline_data, grid_order::data_tensor_pipeline})
    for (auto [tp, pp, dp] : {std::array{1, 1, 6}, std::array{2, 3, 1}, std::array{3, 2, 2}, std::array{4, 1, 3}}) {
      parallel_grid grid(tp, pp, dp, tp * pp * dp, order);
      CAPTURE(grid.text());
      for (int r = 0; r < grid.world_size(); ++r) CHECK(grid.rank_of(grid.coordinates(r)) == r);
      for (auto a : {axis::tensor, axis::pipeline, axis::data}) {
        std::multiset<int> seen;
        for (auto const& g : grid.groups(a)) {
          CHECK(static_cast<int>(g.size()) == grid.size(a));
          for (std::size_t i = 0; i < g.size(); ++i) {
            seen.insert(g[i]);
            CHECK(grid.coordinates(g[i]).at(a) == static_cast<int>(i)); // index in the group = coordinate
            CHECK(grid.group(a, g[i]) == g);
          }
        }
        CHECK(seen.size() == static_cast<std::size_t>(grid.world_size()));
        CHECK(std::set<int>(seen.begin(), seen.end()).size() == seen.size()); // each rank once
      }
    }
  // tensor_pipeline_data: the pipeline stages of a TP group are next to each other.
  parallel_grid grid(2, 2, 2, 8, grid_order::tensor_pipeline_data);
  CHECK(grid.group(axis::pipeline, 0) == ranks{0, 2});
  CHECK(grid.group(axis::data, 0) == ranks{0, 4});
}

TEST_CASE("a grid that does not fill the world, or a rank outside it, is refused") {
  CHECK_KIND(parallel_grid(2, 1, 3, 8), cairn::comm_errc::environment);
  CHECK_THROWS_WITH(parallel_grid(0, 1, 8, 8), doctest::Contains("multiply to the world size, 8"));
  parallel_grid grid(2, 1, 2, 4);
  CHECK_KIND(grid.coordinates(4), cairn::comm_errc::environment);
  CHECK_KIND(grid.rank_of({2, 0, 0}), cairn::comm_errc::environment);
}

TEST_CASE("pipeline stages own contiguous blocks of layers, the first ones one more") {
  auto stages_of = [](std::int64_t layers, int stages) {
    ranks out;
    for (std::int64_t layer = 0; layer < layers; ++layer)
      out.push_back(cairn::comm::stage_of_layer(layer, layers, stages));
    return out;
  };
  CHECK(stages_of(7, 3) == ranks{0, 0, 0, 1, 1, 2, 2});
  CHECK(stages_of(4, 2) == ranks{0, 0, 1, 1});
  CHECK(stages_of(3, 3) == ranks{0, 1, 2});
  CHECK(stages_of(2, 4) == ranks{0, 1}); // more stages than layers: the last ones hold none
  CHECK(stages_of(5, 1) == ranks{0, 0, 0, 0, 0});
  CHECK_KIND(cairn::comm::stage_of_layer(5, 5, 2), cairn::comm_errc::environment);
  CHECK_KIND(cairn::comm::stage_of_layer(0, 5, 0), cairn::comm_errc::environment);
}
