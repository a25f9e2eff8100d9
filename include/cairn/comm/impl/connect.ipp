// Definitions of <cairn/comm/connect.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/comm/any.hpp>
#include <cairn/comm/connect.hpp>
#include <cairn/comm/environment.hpp>
#include <cairn/comm/gloo.hpp>
#include <cairn/comm/single_process.hpp>
#ifdef CAIRN_WITH_NCCL
#include <cairn/comm/nccl.hpp>
#endif

#include <chrono>
#include <vector>

namespace cairn::comm {

CAIRN_DECL any_communicator connect(backend requested, bool cuda, std::chrono::milliseconds timeout) {
  [[maybe_unused]] auto chosen = backend::gloo;
  try {
    chosen = resolve_backend(requested, cuda, built_with_nccl);
  } catch (error const& e) {
    throw config_error(std::vector<diagnostic>{{"comm", e.what()}});
  }
  auto env = environment_or_single();
#ifdef CAIRN_WITH_NCCL
  if (chosen == backend::nccl) return any_communicator(make_nccl(env, timeout));
#endif
  if (env.world_size > 1) return any_communicator(make_gloo(env, timeout));
  return any_communicator(single_process());
}

} // namespace cairn::comm
