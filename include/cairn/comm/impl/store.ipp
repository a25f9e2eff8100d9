// Definitions of <cairn/comm/store.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/comm/environment.hpp>
#include <cairn/comm/store.hpp>
#include <cairn/error.hpp>

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace cairn::comm {

CAIRN_DECL c10::intrusive_ptr<c10d::Store> make_store(distributed_environment const& env,
                                                      std::chrono::milliseconds timeout) {
  if (env.world_size == 1) return c10::make_intrusive<c10d::HashStore>();
  c10d::TCPStoreOptions options;
  options.port = env.master_port;
  options.isServer = env.rank == 0;
  options.numWorkers = env.world_size;
  options.waitWorkers = true;
  options.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
}

CAIRN_DECL std::vector<std::uint8_t> share_from_rank0(c10d::Store& store, distributed_environment const& env,
                                                      std::string const& key,
                                                      std::function<std::vector<std::uint8_t>()> const& make,
                                                      std::chrono::milliseconds timeout) {
  auto failed = [&](std::string const& what) {
    return error("rank " + std::to_string(env.rank) + ": " + what + " '" + key + "' within " +
                 std::to_string(timeout.count()) + " ms (is rank 0 alive?)");
  };
  std::vector<std::uint8_t> value;
  if (env.rank == 0) {
    value = make();
    store.set(key, value);
  } else {
    try {
      store.wait({key}, timeout);
    } catch (std::exception const&) {
      throw failed("nothing was published under");
    }
    value = store.get(key);
  }
  auto read = key + "/read";
  store.add(read, 1);
  if (env.rank == 0) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (store.add(read, 0) < env.world_size) {
      if (std::chrono::steady_clock::now() > deadline) throw failed("not every rank read");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return value;
}

} // namespace cairn::comm
