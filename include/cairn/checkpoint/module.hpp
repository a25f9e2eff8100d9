#pragma once
// cairn: requires libtorch
// cairn: not in the umbrella: in a header-only build its definitions bring torch::nn and torch::optim (~5 s a
// translation unit); <cairn/cairn.hpp> includes it

// A `model_state` of a libtorch `torch::nn::Module` trained with `torch::optim::Adam`: every
// parameter whole (data parallel, or one process), its weights and Adam's moments as views of
// the live tensors, so a save reads what training wrote and a load writes into the module and
// the optimizer in place. The declarations need no libtorch module or optimizer header (the types
// are declared here); the definitions do, so a header-only build pays for torch::nn and
// torch::optim where this is included, and a build linking cairn::compiled does not.

#include <cairn/checkpoint/state.hpp>
#include <cairn/detail/decl.hpp>

#include <cstdint>

namespace torch::nn {
class Module;
} // namespace torch::nn
namespace torch::optim {
class Adam;
} // namespace torch::optim

namespace cairn {

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
CAIRN_DECL void set_adam_step(torch::optim::Adam& optimizer, std::int64_t step);

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/module.ipp>
#endif
