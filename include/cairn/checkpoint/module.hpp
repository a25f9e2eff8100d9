#pragma once
// cairn: requires libtorch
// cairn: not in the umbrella: in a header-only build its definitions bring torch::nn and torch::optim (~5 s a
// translation unit); <cairn/cairn.hpp> includes it

// A `model_state` of a libtorch `torch::nn::Module` and the libtorch optimizer that trains it:
// every parameter whole (data parallel, or one process), its weights and the optimizer's state
// as views of the live tensors, so a save reads what training wrote and a load writes into the
// module and the optimizer in place; the optimizer's step counts saved and restored with them.
// The declarations need no libtorch module or optimizer header (the types are declared here);
// the definitions do, so a header-only build pays for torch::nn and torch::optim where this is
// included, and a build linking cairn::compiled does not.

#include <cairn/checkpoint/state.hpp>
#include <cairn/detail/decl.hpp>

#include <cstdint>

namespace torch::nn {
class Module;
} // namespace torch::nn
namespace torch::optim {
class Optimizer;
class Adam;
} // namespace torch::optim

namespace cairn {

/// The state of `module` trained by `optimizer`, as checkpoints see it: each parameter (named as
/// `named_parameters` names it, `layers.0.weight`) whole, with the state shards `weights` and
/// the optimizer's own, named as libtorch names them:
///
/// | optimizer                          | state shards after `weights`                                  |
/// |------------------------------------|---------------------------------------------------------------|
/// | `SGD`                              | `momentum_buffer` with momentum, none without                 |
/// | `Adam`, `AdamW`                    | `exp_avg`, `exp_avg_sq`; `max_exp_avg_sq` with AMSGrad         |
/// | `RMSprop`                          | `square_avg`; `momentum_buffer` with momentum; `grad_avg` centered |
/// | `Adagrad`                          | `sum`                                                         |
///
/// The tensors are views of the module's parameters and of the optimizer's buffers: build it
/// once, after the optimizer exists, and hand the same state to every save and load. A buffer
/// the optimizer creates at its first step is created as it would create it (zero moments), or,
/// where creating it early would change the first step (SGD's momentum, a copy of the first
/// gradient), left to the optimizer and taken into the state at the next save. The step counts
/// of Adam, AdamW, RMSprop and Adagrad are stored with each save (its metadata's
/// `optimizer_state`, the same on every rank) and restored by each load, at any world size; a
/// load of the weights alone (a pretrained model) starts the optimizer afresh. Which trained
/// parameters hold a gradient is stored too (libtorch 1.x's `zero_grad` keeps a zero gradient,
/// with which an optimizer goes on updating a parameter that a step left unused), and a resume
/// gives each the same. A parameter of the module the optimizer does not train (frozen), and
/// each of the module's buffers (BatchNorm's running statistics), is saved with zero optimizer
/// state. A checkpoint of another optimizer (Adam into AdamW) is refused, naming the fix; so is
/// a save or load after the optimizer's parameters changed (a group added): build the state
/// again.
///
/// Refused, naming what is wrong: LBFGS (its state is a history of the whole model, not a
/// state per parameter), an optimizer cairn does not know (build the state with `whole_state`
/// and keep the optimizer's state in the state's tensors), parameter groups whose options give
/// different buffers (AMSGrad in one group only), a parameter of the optimizer the module does
/// not have. `replicated`: every rank holds the same values (data parallel), so only one
/// rank's are written.
CAIRN_DECL model_state optimizer_state(torch::nn::Module const& module, torch::optim::Optimizer& optimizer,
                                       bool replicated = false);

/// `optimizer_state` of an Adam optimizer (what cairn offered first, kept for its callers).
CAIRN_DECL model_state adam_state(torch::nn::Module const& module, torch::optim::Adam& optimizer,
                                  bool replicated = false);

/// Sets Adam's step count of every parameter (the bias correction depends on it). A load into
/// an `optimizer_state` restores it; this serves checkpoints saved before cairn stored it.
CAIRN_DECL void set_adam_step(torch::optim::Adam& optimizer, std::int64_t step);

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/module.ipp>
#endif
