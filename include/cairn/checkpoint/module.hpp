#pragma once
// cairn: requires libtorch
// cairn: not in the umbrella: torch::nn and torch::optim cost ~5 s a translation unit; <cairn/cairn.hpp> includes it

// A `model_state` of a libtorch `torch::nn::Module` trained with `torch::optim::Adam`: every
// parameter whole (data parallel, or one process), its weights and Adam's moments as views of
// the live tensors, so a save reads what training wrote and a load writes into the module and
// the optimizer in place. Includes libtorch's module and optimizer headers: a translation unit
// that does not build its state this way includes <cairn/checkpoint/state.hpp> instead.

#include <cairn/checkpoint/state.hpp>
#include <cairn/detail/decl.hpp>

#include <ATen/ops/zeros_like.h>
#include <torch/nn/module.h>
#include <torch/optim/adam.h>

#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>

namespace cairn {

namespace detail {

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

/// Every parameter of the optimizer, with whether its group uses AMSGrad.
CAIRN_DECL std::vector<std::pair<at::Tensor, bool>> adam_parameters(torch::optim::Adam& optimizer);

CAIRN_DECL at::Tensor flat_view(at::Tensor const& t, std::string const& name, char const* what);

} // namespace detail

/// The state of `module` trained with `optimizer`, as checkpoints see it: each parameter
/// (named as `named_parameters` names it, `layers.0.weight`) whole, with the state shards
/// `weights`, `exp_avg`, `exp_avg_sq`, and `max_exp_avg_sq` when the optimizer uses AMSGrad.
/// The tensors are views: build it once, after the optimizer exists, and hand the same state to
/// every save and load. Adam's state is created (zero, step 0) where it does not exist yet,
/// which changes nothing in how Adam goes on. `replicated`: every rank holds the same values
/// (data parallel), so only rank 0's are written.
///
/// Adam's step count is not part of the state: after a resume, set it with `set_adam_step`
/// (with one optimizer step per iteration, the resumed iteration).
CAIRN_DECL model_state adam_state(torch::nn::Module const& module, torch::optim::Adam& optimizer,
                                  bool replicated = false);

/// Sets Adam's step count of every parameter (the bias correction depends on it).
inline void set_adam_step(torch::optim::Adam& optimizer, std::int64_t step) {
  for (auto const& [p, amsgrad] : detail::adam_parameters(optimizer)) detail::adam_state_of(optimizer, p).step(step);
}

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/module.ipp>
#endif
