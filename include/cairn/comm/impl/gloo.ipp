// Definitions of <cairn/comm/gloo.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/comm/c10d.hpp>
#include <cairn/comm/environment.hpp>
#include <cairn/comm/gloo.hpp>
#include <cairn/comm/store.hpp>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

namespace cairn::comm {

namespace detail {

inline c10::intrusive_ptr<c10d::ProcessGroupGloo::Options> gloo_options(distributed_environment const& env,
                                                                        std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->timeout = timeout;
  if (char const* interface = std::getenv("GLOO_SOCKET_IFNAME"))
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
  else if (env.master_addr == "127.0.0.1" || env.master_addr == "localhost")
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  else
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  return options;
}

} // namespace detail

CAIRN_DECL gloo_communicator make_gloo(distributed_environment const& env, std::chrono::milliseconds timeout) {
  auto store = make_store(env, timeout, {{"backend", "gloo"}});
  return gloo_communicator(
      c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, detail::gloo_options(env, timeout)));
}

CAIRN_DECL gloo_communicator make_gloo_group(c10::intrusive_ptr<c10d::Store> const& store,
                                             distributed_environment const& env, std::string const& name,
                                             std::vector<int> const& members, std::chrono::milliseconds timeout) {
  auto me = std::find(members.begin(), members.end(), env.rank);
  if (me == members.end())
    throw comm_error(comm_errc::environment,
                     "rank " + std::to_string(env.rank) + " is not a member of the group '" + name + "'");
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("cairn.group/" + name, store);
  return gloo_communicator(c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, static_cast<int>(me - members.begin()),
                                                                       static_cast<int>(members.size()),
                                                                       detail::gloo_options(env, timeout)));
}

} // namespace cairn::comm
