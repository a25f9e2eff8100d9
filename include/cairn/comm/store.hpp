#pragma once
// cairn: requires libtorch

// The rendezvous of a distributed run: a c10d key-value store that rank 0 serves at
// MASTER_ADDR:MASTER_PORT, and what the ranks share through it before they have a communicator
// (NCCL's unique id).

#include <cairn/comm/environment.hpp>
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

/// The store of the run `env` describes: served by rank 0 and reached by the others over TCP,
/// or in memory for one process. Waits for every rank to connect, up to `timeout`.
inline c10::intrusive_ptr<c10d::Store> make_store(distributed_environment const& env,
                                                  std::chrono::milliseconds timeout = std::chrono::minutes(5)) {
  if (env.world_size == 1) return c10::make_intrusive<c10d::HashStore>();
  c10d::TCPStoreOptions options;
  options.port = env.master_port;
  options.isServer = env.rank == 0;
  options.numWorkers = env.world_size;
  options.waitWorkers = true;
  options.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
}

/// Rank 0 publishes what `make` gives under `key`; every rank returns it. The others wait for it
/// at most `timeout` (an error naming the key otherwise: rank 0 died, or never got there), and
/// rank 0 returns only once every rank has read it, so that its store can go away after.
inline std::vector<std::uint8_t> share_from_rank0(c10d::Store& store, distributed_environment const& env,
                                                  std::string const& key,
                                                  std::function<std::vector<std::uint8_t>()> const& make,
                                                  std::chrono::milliseconds timeout = std::chrono::minutes(5)) {
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
