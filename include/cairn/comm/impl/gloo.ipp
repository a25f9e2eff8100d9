// Definitions of <cairn/comm/gloo.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/comm/c10d.hpp>
#include <cairn/comm/environment.hpp>
#include <cairn/comm/gloo.hpp>
#include <cairn/comm/store.hpp>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <chrono>
#include <cstdlib>
#include <string>

namespace cairn::comm {

CAIRN_DECL gloo_communicator make_gloo(distributed_environment const& env, std::chrono::milliseconds timeout) {
  auto store = make_store(env, timeout);
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->timeout = timeout;
  if (char const* interface = std::getenv("GLOO_SOCKET_IFNAME"))
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
  else if (env.master_addr == "127.0.0.1" || env.master_addr == "localhost")
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  else
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  return gloo_communicator(c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, options));
}

} // namespace cairn::comm
