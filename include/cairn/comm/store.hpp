#pragma once
// cairn: requires libtorch

// The rendezvous of a distributed run: a c10d key-value store that rank 0 serves at
// MASTER_ADDR:MASTER_PORT, and what the ranks share through it before they have a communicator
// (NCCL's unique id).

#include <cairn/comm/environment.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/error.hpp>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cairn::comm {

/// The store of the run `env` describes: served by rank 0 and reached by the others over TCP,
/// or in memory for one process. Waits for every rank to connect, up to `timeout`; a rank whose
/// rank 0 serves no store within it gets an error naming MASTER_ADDR:MASTER_PORT.
CAIRN_DECL c10::intrusive_ptr<c10d::Store> make_store(distributed_environment const& env,
                                                      std::chrono::milliseconds timeout = std::chrono::minutes(5));

/// Rank 0 publishes what `make` gives under `key`; every rank returns it. The others wait for it
/// at most `timeout` (an error naming the key otherwise: rank 0 died, or never got there), and
/// rank 0 returns only once every rank has read it, so that its store can go away after.
CAIRN_DECL std::vector<std::uint8_t> share_from_rank0(c10d::Store& store, distributed_environment const& env,
                                                      std::string const& key,
                                                      std::function<std::vector<std::uint8_t>()> const& make,
                                                      std::chrono::milliseconds timeout = std::chrono::minutes(5));

} // namespace cairn::comm

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/comm/impl/store.ipp>
#endif
