// Definitions of <cairn/checkpoint/generator.hpp>: inline in a header-only build, compiled once
// by <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/generator.hpp>
#include <cairn/error.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <mutex>
#include <string>

namespace cairn {

CAIRN_DECL std::string cpu_generator_state() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  auto state = generator.get_state().contiguous();
  return {static_cast<char const*>(state.data_ptr()), static_cast<std::size_t>(state.nbytes())};
}

CAIRN_DECL void set_cpu_generator_state(std::string const& bytes) {
  auto state = at::empty({static_cast<std::int64_t>(bytes.size())}, at::TensorOptions().dtype(at::kByte));
  if (!bytes.empty()) std::memcpy(state.data_ptr(), bytes.data(), bytes.size());
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  try {
    generator.set_state(state);
  } catch (c10::Error const& e) {
    throw checkpoint_error(checkpoint_errc::invalid_state,
                           "the CPU generator's state (" + std::to_string(bytes.size()) +
                               " bytes) is not one this libtorch takes: " + e.what_without_backtrace());
  }
}

} // namespace cairn
