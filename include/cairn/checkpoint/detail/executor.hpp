#pragma once
// cairn: requires libtorch

// The one executor of save plans (checkpoint/plan.hpp). Every format's save is a plan run here:
// the files of each rank written at the same time, tensors gathered or converted one at a time
// and written behind on a thread of the writer's own in bounded memory, checksums recorded by
// the writer, the closing files last, every failure agreed by every rank.
//
// The call sequence, on every rank with the same plan:
//   1. the writer of each file opens it with its header (the plan fixes every tensor's place),
//      and every rank agrees that all are open;
//   2. for each round k, for each file f in turn: the k-th tensor of f is produced on f's writer
//      (own shard: no communication; gathered: every rank sends its part; converted: the rule's
//      parameters gathered whole, the rule run) and queued to be written behind; a co_written
//      tensor is instead written by each of its holders, its own part where it lies in the file;
//   3. every rank waits for its writes and agrees that all are done;
//   4. the writers of files with co_written tensors checksum those from the file and commit it,
//      and every rank agrees that they did;
//   5. rank 0 writes the closing files, and every rank agrees that it did.

#include <cairn/checkpoint/plan.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/checkpoint/weight_rule.hpp>
#include <cairn/comm/ref.hpp>
#include <cairn/detail/decl.hpp>

#include <filesystem>
#include <span>

namespace cairn::detail {

/// Runs `plan` into `dir`, from `state` (and, for converted tensors, `rules`). Collective. A
/// failure anywhere fails it on every rank: the rank that failed throws its own error, the
/// others a comm::rank_error naming it.
CAIRN_DECL void execute(save_plan const& plan, std::filesystem::path const& dir, model_state const& state,
                        comm::communicator_ref comm, std::span<external::weight_rule const> rules = {});

/// Runs the part of `plan` that is `rank`'s, with no communication: the files it writes, of its
/// own shards only, then (on rank 0) the closing files. The background half of an asynchronous
/// save, from a copy of the state; committing it takes every rank.
CAIRN_DECL void execute_alone(save_plan const& plan, std::filesystem::path const& dir, model_state const& state,
                              int rank);

} // namespace cairn::detail

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/executor.ipp>
#endif
