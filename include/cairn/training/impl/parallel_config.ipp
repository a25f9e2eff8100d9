// Definitions of <cairn/training/parallel_config.hpp>: inline in a header-only build, compiled
// once by <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/error.hpp>
#include <cairn/training/parallel_config.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace cairn {

CAIRN_DECL comm::parallel_grid parallel_config::grid(int world_size) const {
  auto rest = std::max<std::int64_t>(1, world_size / (tensor * pipeline));
  auto d = data.value_or(rest);
  if (tensor * pipeline * d != world_size)
    throw config_error(std::vector<diagnostic>{
        {data ? "parallel.data" : "parallel.tensor", "tensor x pipeline x data is " + std::to_string(tensor) + " x " +
                                                         std::to_string(pipeline) + " x " + std::to_string(d) + " = " +
                                                         std::to_string(tensor * pipeline * d) +
                                                         " ranks; the job has " + std::to_string(world_size)}});
  return {static_cast<int>(tensor), static_cast<int>(pipeline), static_cast<int>(d), world_size};
}

} // namespace cairn
