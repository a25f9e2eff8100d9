// Definitions of <cairn/comm/grid.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/comm/grid.hpp>
#include <cairn/error.hpp>

#include <boost/describe/enum_to_string.hpp>

#include <array>
#include <string>
#include <vector>

namespace cairn::comm {

CAIRN_DECL parallel_grid::parallel_grid(int tensor, int pipeline, int data, int world_size, grid_order order)
    : sizes_{tensor, pipeline, data}, order_(order) {
  switch (order) {
  case grid_order::tensor_data_pipeline:
    order_axes_ = {axis::tensor, axis::data, axis::pipeline};
    break;
  case grid_order::tensor_pipeline_data:
    order_axes_ = {axis::tensor, axis::pipeline, axis::data};
    break;
  case grid_order::data_tensor_pipeline:
    order_axes_ = {axis::data, axis::tensor, axis::pipeline};
    break;
  }
  if (tensor < 1 || pipeline < 1 || data < 1 || static_cast<long long>(tensor) * pipeline * data != world_size)
    throw comm_error(comm_errc::environment, "parallel grid " + text() +
                                                 ": the sizes must be at least 1 and "
                                                 "multiply to the world size, " +
                                                 std::to_string(world_size));
}

CAIRN_DECL grid_coordinates parallel_grid::coordinates(int rank) const {
  if (rank < 0 || rank >= world_size())
    throw comm_error(comm_errc::environment, "rank " + std::to_string(rank) + " is not in the grid " + text());
  std::array<int, 3> at{};
  for (auto a : order_axes_) {
    auto i = static_cast<std::size_t>(a);
    at[i] = rank % sizes_[i];
    rank /= sizes_[i];
  }
  return {at[0], at[1], at[2]};
}

CAIRN_DECL int parallel_grid::rank_of(grid_coordinates const& at) const {
  int rank = 0;
  for (auto it = order_axes_.rbegin(); it != order_axes_.rend(); ++it) {
    auto i = static_cast<std::size_t>(*it);
    int c = at.at(*it);
    if (c < 0 || c >= sizes_[i])
      throw comm_error(comm_errc::environment, std::string(boost::describe::enum_to_string(*it, "?")) + " coordinate " +
                                                   std::to_string(c) + " is not in the grid " + text());
    rank = rank * sizes_[i] + c;
  }
  return rank;
}

CAIRN_DECL std::vector<int> parallel_grid::group(axis a, int rank) const {
  auto at = coordinates(rank);
  std::vector<int> members;
  for (int c = 0; c < size(a); ++c) {
    auto other = at;
    (a == axis::tensor ? other.tensor : a == axis::pipeline ? other.pipeline : other.data) = c;
    members.push_back(rank_of(other));
  }
  return members;
}

CAIRN_DECL int parallel_grid::group_index(axis a, int rank) const {
  auto all = groups(a);
  for (std::size_t g = 0; g < all.size(); ++g)
    for (int member : all[g])
      if (member == rank) return static_cast<int>(g);
  throw comm_error(comm_errc::environment, "rank " + std::to_string(rank) + " is not in the grid " + text());
}

CAIRN_DECL std::vector<std::vector<int>> parallel_grid::groups(axis a) const {
  std::vector<std::vector<int>> out;
  std::vector<bool> seen(static_cast<std::size_t>(world_size()), false);
  for (int r = 0; r < world_size(); ++r) {
    if (seen[static_cast<std::size_t>(r)]) continue;
    out.push_back(group(a, r));
    for (int member : out.back()) seen[static_cast<std::size_t>(member)] = true;
  }
  return out;
}

CAIRN_DECL std::string parallel_grid::text() const {
  return "TP=" + std::to_string(sizes_[0]) + " x PP=" + std::to_string(sizes_[1]) +
         " x DP=" + std::to_string(sizes_[2]) + " (" + boost::describe::enum_to_string(order_, "?") + ")";
}

} // namespace cairn::comm
