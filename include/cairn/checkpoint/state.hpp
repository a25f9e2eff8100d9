#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/tensor.hpp>
#include <cairn/error.hpp>

#include <ATen/core/Tensor.h>

#include <string>
#include <string_view>
#include <vector>

namespace cairn {

/// One parameter as this rank holds it: its layout, and one tensor per state shard name
/// (`weights`, then optimizer states), each holding exactly the rank's elements.
struct parameter_state {
  parameter_layout layout;
  std::vector<at::Tensor> shards;
};

/// What a trainer hands to a checkpoint. `shard_names` come in the order of each parameter's
/// `shards`; the first is the model weights, the others optimizer state.
struct model_state {
  std::vector<std::string> shard_names{"weights"};
  std::vector<parameter_state> parameters;

  [[nodiscard]] rank_layout layout() const {
    rank_layout out;
    for (auto const& p : parameters) out.parameters.push_back(p.layout);
    return out;
  }

  [[nodiscard]] parameter_state* find(std::string_view name) {
    for (auto& p : parameters)
      if (p.layout.name == name) return &p;
    return nullptr;
  }

  /// Checks that every parameter has a tensor per shard name, with its layout's element count
  /// and dtype; an error naming the parameter otherwise.
  void check() const {
    if (shard_names.empty() || shard_names.front() != "weights")
      throw error("model_state: the first state shard must be \"weights\"");
    for (auto const& p : parameters) {
      auto const& name = p.layout.name;
      if (auto problem = p.layout.shard.problem(p.layout.shape))
        throw error("model_state: parameter '" + name + "': " + *problem);
      if (p.shards.size() != shard_names.size())
        throw error("model_state: parameter '" + name + "' has " + std::to_string(p.shards.size()) + " tensors for " +
                    std::to_string(shard_names.size()) + " state shards");
      for (std::size_t i = 0; i < p.shards.size(); ++i) {
        auto const& t = p.shards[i];
        if (!t.defined() || static_cast<std::uint64_t>(t.numel()) != p.layout.shard.numel())
          throw error("model_state: parameter '" + name + "' shard '" + shard_names[i] + "' holds " +
                      (t.defined() ? std::to_string(t.numel()) : std::string("no")) + " elements, its layout " +
                      std::to_string(p.layout.shard.numel()));
        if (to_dtype(t.scalar_type()) != p.layout.dtype)
          throw error("model_state: parameter '" + name + "' shard '" + shard_names[i] + "' is " +
                      std::string(io::name(to_dtype(t.scalar_type()))) + ", its layout " +
                      std::string(io::name(p.layout.dtype)));
      }
    }
  }
};

} // namespace cairn
