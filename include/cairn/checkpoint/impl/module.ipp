// Definitions of <cairn/checkpoint/module.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/module.hpp>
#include <cairn/checkpoint/state.hpp>

#include <ATen/ops/zeros_like.h>
#include <torch/nn/module.h>
#include <torch/optim/adam.h>

#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>

namespace cairn::detail {

/// The key libtorch's optimizers file a parameter's state under: the address of its TensorImpl,
/// as text in libtorch 1.x and as a pointer in 2.x.
template <class Optimizer> auto optimizer_state_key(Optimizer const& optimizer, at::Tensor const& parameter) {
  using key = typename std::decay_t<decltype(optimizer.state())>::key_type;
  if constexpr (std::is_same_v<key, std::string>) {
    std::ostringstream text;
    text << static_cast<void const*>(parameter.unsafeGetTensorImpl());
    return text.str();
  } else {
    return static_cast<key>(parameter.unsafeGetTensorImpl());
  }
}

template <class Optimizer> torch::optim::AdamParamState& adam_state_of(Optimizer& optimizer, at::Tensor const& p) {
  auto& states = optimizer.state();
  auto key = optimizer_state_key(optimizer, p);
  auto found = states.find(key);
  if (found == states.end()) {
    // What Adam creates at its first step, created now so that there is something to save and
    // to load into; Adam then carries on from it exactly as from its own.
    auto state = std::make_unique<torch::optim::AdamParamState>();
    state->step(0);
    state->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
    state->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
    found = states.emplace(std::move(key), std::move(state)).first;
  }
  auto* adam = dynamic_cast<torch::optim::AdamParamState*>(found->second.get());
  if (!adam)
    throw checkpoint_error(checkpoint_errc::invalid_state,
                           "adam_state: the optimizer's state of a parameter is not Adam's");
  return *adam;
}

CAIRN_DECL std::vector<std::pair<at::Tensor, bool>> adam_parameters(torch::optim::Adam& optimizer) {
  std::vector<std::pair<at::Tensor, bool>> out;
  for (auto& group : optimizer.param_groups()) {
    bool amsgrad = static_cast<torch::optim::AdamOptions const&>(group.options()).amsgrad();
    for (auto const& p : group.params()) out.emplace_back(p, amsgrad);
  }
  return out;
}

CAIRN_DECL at::Tensor flat_view(at::Tensor const& t, std::string const& name, char const* what) {
  if (!t.is_contiguous())
    throw checkpoint_error(checkpoint_errc::invalid_state,
                           "adam_state: " + std::string(what) + " of '" + name + "' is not contiguous");
  return t.detach().view({-1});
}

} // namespace cairn::detail

namespace cairn {

CAIRN_DECL model_state adam_state(torch::nn::Module const& module, torch::optim::Adam& optimizer, bool replicated) {
  auto parameters = detail::adam_parameters(optimizer);
  bool amsgrad = !parameters.empty() && parameters.front().second;
  for (auto const& [p, uses] : parameters)
    if (uses != amsgrad)
      throw checkpoint_error(checkpoint_errc::invalid_state,
                             "adam_state: some parameter groups use AMSGrad and others do not");
  model_state state;
  state.shard_names = {"weights", "exp_avg", "exp_avg_sq"};
  if (amsgrad) state.shard_names.push_back("max_exp_avg_sq");
  for (auto const& item : module.named_parameters(/*recurse=*/true)) {
    auto const& name = item.key();
    auto const& p = item.value();
    bool optimized = false;
    for (auto const& entry : parameters) optimized = optimized || entry.first.is_same(p);
    if (!optimized)
      throw checkpoint_error(checkpoint_errc::invalid_state,
                             "adam_state: parameter '" + name + "' of the module is not in the optimizer");
    auto& adam = detail::adam_state_of(optimizer, p);
    if (amsgrad && !adam.max_exp_avg_sq().defined()) adam.max_exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
    std::vector<std::uint64_t> shape(p.sizes().begin(), p.sizes().end());
    parameter_state entry{{name, shape, to_dtype(p.scalar_type()), replicated, shard_layout::whole(shape)}, {}};
    entry.shards = {detail::flat_view(p, name, "the weights"), detail::flat_view(adam.exp_avg(), name, "exp_avg"),
                    detail::flat_view(adam.exp_avg_sq(), name, "exp_avg_sq")};
    if (amsgrad) entry.shards.push_back(detail::flat_view(adam.max_exp_avg_sq(), name, "max_exp_avg_sq"));
    state.parameters.push_back(std::move(entry));
  }
  state.check();
  return state;
}

CAIRN_DECL void set_adam_step(torch::optim::Adam& optimizer, std::int64_t step) {
  for (auto const& [p, amsgrad] : detail::adam_parameters(optimizer)) detail::adam_state_of(optimizer, p).step(step);
}

} // namespace cairn
