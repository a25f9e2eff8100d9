#pragma once

// A parallel grid: the ranks of a job arranged as tensor parallel (TP) x pipeline parallel (PP)
// x data parallel (DP), each rank's coordinates and the groups it belongs to. Pure arithmetic,
// no libtorch: the layouts of a run and the dry run of a resume use it without communicators;
// the communicators of the groups come from <cairn/comm/gloo.hpp> (make_gloo_group).

#include <cairn/detail/decl.hpp>
#include <cairn/error.hpp>

#include <boost/describe/enum.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace cairn::comm {

/// The axes of a grid.
enum class axis { tensor, pipeline, data };
BOOST_DESCRIBE_ENUM(axis, tensor, pipeline, data)

/// How ranks are numbered, fastest-varying axis first. Megatron's and Fast-LLM's default is
/// `tensor_data_pipeline`: the ranks of a TP group are consecutive (one node holds a TP group,
/// where the bandwidth is), then DP, then PP.
enum class grid_order { tensor_data_pipeline, tensor_pipeline_data, data_tensor_pipeline };
BOOST_DESCRIBE_ENUM(grid_order, tensor_data_pipeline, tensor_pipeline_data, data_tensor_pipeline)

/// A rank's place in the grid: its index along each axis.
struct grid_coordinates {
  int tensor = 0;
  int pipeline = 0;
  int data = 0;
  [[nodiscard]] int at(axis a) const noexcept {
    return a == axis::tensor ? tensor : a == axis::pipeline ? pipeline : data;
  }
  friend bool operator==(grid_coordinates const&, grid_coordinates const&) = default;
};

class parallel_grid {
public:
  /// A grid of `tensor` x `pipeline` x `data` ranks numbered in `order`; a comm_error (kind
  /// environment) when a size is below 1 or their product is not `world_size`.
  CAIRN_DECL parallel_grid(int tensor, int pipeline, int data, int world_size,
                           grid_order order = grid_order::tensor_data_pipeline);

  [[nodiscard]] int size(axis a) const noexcept { return sizes_[static_cast<std::size_t>(a)]; }
  [[nodiscard]] int world_size() const noexcept { return size(axis::tensor) * size(axis::pipeline) * size(axis::data); }
  [[nodiscard]] grid_order order() const noexcept { return order_; }

  /// The coordinates of `rank`.
  [[nodiscard]] CAIRN_DECL grid_coordinates coordinates(int rank) const;
  /// The rank at `at`.
  [[nodiscard]] CAIRN_DECL int rank_of(grid_coordinates const& at) const;
  /// The ranks of `rank`'s group along `a` (the ranks that differ from it in that coordinate
  /// alone), in the order of that coordinate: a rank's index in its group is its coordinate.
  [[nodiscard]] CAIRN_DECL std::vector<int> group(axis a, int rank) const;
  /// Which group along `a` `rank` is in: groups numbered by their smallest rank's order.
  [[nodiscard]] CAIRN_DECL int group_index(axis a, int rank) const;
  /// Every group along `a`, in `group_index` order.
  [[nodiscard]] CAIRN_DECL std::vector<std::vector<int>> groups(axis a) const;

  /// "TP=2 x PP=1 x DP=4 (tensor_data_pipeline)", for messages.
  [[nodiscard]] CAIRN_DECL std::string text() const;

private:
  std::array<int, 3> sizes_{1, 1, 1}; // by axis
  std::array<axis, 3> order_axes_{};  // fastest first
  grid_order order_;
};

/// The pipeline stage that holds layer `layer` of `layers` when `stages` stages hold contiguous
/// blocks of layers as even as can be, the first `layers % stages` stages one more: stage
/// ownership of layers, as Megatron assigns it by default. A comm_error (kind environment) when
/// `layer` is not one of the layers or `stages` is below 1.
[[nodiscard]] inline int stage_of_layer(std::int64_t layer, std::int64_t layers, int stages) {
  if (stages < 1 || layer < 0 || layer >= layers)
    throw comm_error(comm_errc::environment, "stage_of_layer: layer " + std::to_string(layer) + " of " +
                                                 std::to_string(layers) + ", " + std::to_string(stages) + " stages");
  auto base = layers / stages, extra = layers % stages;
  if (layer < extra * (base + 1)) return static_cast<int>(layer / (base + 1));
  return static_cast<int>(extra + (layer - extra * (base + 1)) / base);
}

} // namespace cairn::comm

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/comm/impl/grid.ipp>
#endif
