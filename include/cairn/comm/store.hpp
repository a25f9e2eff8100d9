#pragma once
// cairn: requires libtorch

// The rendezvous of a distributed run: a c10d key-value store at MASTER_ADDR:MASTER_PORT (served
// by rank 0, or by torchrun's agent), where the ranks agree on what the job is before they make
// a communicator, and what they share through it then (NCCL's unique id).

#include <cairn/comm/environment.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/error.hpp>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace cairn::comm {

/// What every rank of a job must agree on at its rendezvous besides the world size, as name and
/// value: `{{"backend", "nccl"}, {"grid", "TP=2 x PP=1 x DP=4"}}`.
using rendezvous_terms = std::vector<std::pair<std::string, std::string>>;

/// The store of the run `env` describes, reached over TCP at MASTER_ADDR:MASTER_PORT, or in
/// memory for one process. Rank 0 serves it, or, under torchrun's agent (`env.agent_store`),
/// the agent does and every rank is its client, under the prefix of the agent's attempt (as
/// torch's own ranks do), so that a restarted attempt meets afresh.
///
/// Then the ranks meet: each says its world size and `terms`, and every rank returns only once
/// all of them agree with rank 0. A comm_error, at once and on every rank that can be told,
/// names what differs (`world size: rank 0 has 4, rank 5 has 8`, launchers given different
/// `-n`), a rank started twice, or, after `timeout`, the ranks that never arrived; a rank whose
/// store does not answer within `timeout` gets an error naming MASTER_ADDR:MASTER_PORT.
CAIRN_DECL c10::intrusive_ptr<c10d::Store> make_store(distributed_environment const& env,
                                                      std::chrono::milliseconds timeout = std::chrono::minutes(5),
                                                      rendezvous_terms const& terms = {});

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
