#pragma once
// cairn: requires libtorch

// Random generators' state as bytes, for `model_state::items`: a run that saves its generator
// with each checkpoint draws, once resumed, the numbers (dropout masks, sampled data) that the
// uninterrupted run draws.

#include <cairn/detail/decl.hpp>

#include <string>

namespace cairn {

/// The state of libtorch's default CPU generator (the one dropout and `at::rand` use without a
/// generator of their own), as bytes.
[[nodiscard]] CAIRN_DECL std::string cpu_generator_state();

/// Sets libtorch's default CPU generator to `bytes`, a `cpu_generator_state` of the same
/// libtorch. A checkpoint_error (invalid_state) when libtorch refuses them (another size, say),
/// the generator unchanged.
CAIRN_DECL void set_cpu_generator_state(std::string const& bytes);

/// The state of libtorch's default generator of CUDA device `device` (dropout on that GPU), as
/// bytes. A checkpoint_error (invalid_state) where libtorch has no such device.
[[nodiscard]] CAIRN_DECL std::string cuda_generator_state(int device);

/// Sets the default generator of CUDA device `device` to `bytes`, a `cuda_generator_state` of
/// the same libtorch; a checkpoint_error (invalid_state) when libtorch refuses them.
CAIRN_DECL void set_cuda_generator_state(int device, std::string const& bytes);

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/generator.ipp>
#endif
