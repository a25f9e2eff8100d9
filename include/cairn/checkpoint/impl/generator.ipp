// Definitions of <cairn/checkpoint/generator.hpp>: inline in a header-only build, compiled once
// by <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/generator.hpp>
#include <cairn/error.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <mutex>
#include <string>

namespace cairn {

namespace detail {
inline std::string generator_state(at::Generator generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  auto state = generator.get_state().contiguous();
  return {static_cast<char const*>(state.data_ptr()), static_cast<std::size_t>(state.nbytes())};
}

inline void set_generator_state(at::Generator generator, std::string const& bytes, char const* which) {
  auto state = at::empty({static_cast<std::int64_t>(bytes.size())}, at::TensorOptions().dtype(at::kByte));
  if (!bytes.empty()) std::memcpy(state.data_ptr(), bytes.data(), bytes.size());
  std::lock_guard<std::mutex> lock(generator.mutex());
  try {
    generator.set_state(state);
  } catch (c10::Error const& e) {
    throw checkpoint_error(checkpoint_errc::invalid_state,
                           std::string("the ") + which + " generator's state (" + std::to_string(bytes.size()) +
                               " bytes) is not one this libtorch takes: " + e.what_without_backtrace());
  }
}

inline at::Generator cuda_generator(int device) {
  try {
    return at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device)));
  } catch (c10::Error const& e) {
    throw checkpoint_error(checkpoint_errc::invalid_state, "no generator of CUDA device " + std::to_string(device) +
                                                               " here: " + e.what_without_backtrace());
  }
}
} // namespace detail

CAIRN_DECL std::string cpu_generator_state() { return detail::generator_state(at::detail::getDefaultCPUGenerator()); }

CAIRN_DECL void set_cpu_generator_state(std::string const& bytes) {
  detail::set_generator_state(at::detail::getDefaultCPUGenerator(), bytes, "CPU");
}

CAIRN_DECL std::string cuda_generator_state(int device) {
  return detail::generator_state(detail::cuda_generator(device));
}

CAIRN_DECL void set_cuda_generator_state(int device, std::string const& bytes) {
  detail::set_generator_state(detail::cuda_generator(device), bytes, "CUDA");
}

} // namespace cairn
