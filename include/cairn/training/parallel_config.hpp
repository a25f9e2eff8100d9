#pragma once

// How a trainer's ranks share its model: the `parallel` section of a trainer config (the grid
// of tensor, pipeline and data parallelism and the ZeRO stage), and the grid it gives a job.
// No libtorch.

#include <cairn/comm/grid.hpp>
#include <cairn/config/check.hpp>
#include <cairn/config/field.hpp>
#include <cairn/config/hint.hpp>
#include <cairn/detail/decl.hpp>

#include <boost/describe/class.hpp>

#include <cstdint>
#include <optional>

namespace cairn {

struct parallel_config {
  std::int64_t tensor = 1;
  std::int64_t pipeline = 1;
  std::optional<std::int64_t> data; ///< unset: the world size over tensor x pipeline
  std::int64_t zero_stage = 1;

  /// The grid of a job of `world_size` ranks, in Megatron's order; a config_error naming the
  /// key when the sizes do not multiply to it (`parallel.data` when set, else
  /// `parallel.tensor`).
  [[nodiscard]] CAIRN_DECL comm::parallel_grid grid(int world_size) const;
};
BOOST_DESCRIBE_STRUCT(parallel_config, (), (tensor, pipeline, data, zero_stage))

constexpr auto cairn_fields(parallel_config const*) {
  using p = parallel_config;
  return fields(
      field(&p::tensor, "Ranks of a tensor-parallel group: the model's layers split over them.", hint::core,
            check::in_range(1, 4096)),
      field(&p::pipeline, "Pipeline stages: each holds a contiguous block of the layers.", hint::core,
            check::in_range(1, 4096)),
      field(&p::data, "Ranks of a data-parallel group. Unset: the world size over tensor x pipeline.", hint::core,
            check::in_range(1, 1 << 20)),
      field(&p::zero_stage,
            "How a data-parallel group holds the weights and the optimizer state: 0, each rank all of its "
            "tensor-parallel block (replicated; a checkpoint writes each once, spread over the ranks); 1 to 3, "
            "a flat slice each (ZeRO). Stages 1 to 3 checkpoint alike; each stage resumes from the others.",
            hint::core, check::in_range(0, 3)));
}

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/training/impl/parallel_config.ipp>
#endif
