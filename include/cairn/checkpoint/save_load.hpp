#pragma once
// cairn: requires libtorch

// Saving and loading sharded model state in any format, chosen at run time by the config's
// `format` and compiled once per format.

#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/checkpoint/verify.hpp>
#include <cairn/comm/ref.hpp>
#include <cairn/detail/decl.hpp>

#include <boost/json/value.hpp>

namespace cairn {

/// Saves `state` as `config` says (path, format, which state, file size, element type).
/// `program_config` (the caller's whole config) and `metadata` (iteration, optimizer step…)
/// are stored with it. Collective: every rank calls it, with its communicator (any: Gloo,
/// NCCL, one process…).
///
///     cairn::save_checkpoint(state, comm, cfg.training.checkpoint.save_config(dir), cairn::to_json(cfg), {});
CAIRN_DECL void save_checkpoint(model_state const& state, comm::communicator_ref comm,
                                checkpoint_save_config const& config, boost::json::value const& program_config = {},
                                boost::json::value const& metadata = {});

/// Loads into `state` (any layout, any world size) what `config` asks for, and returns the
/// checkpoint's metadata. Every element of every requested shard is accounted for: anything
/// missing, unexpected, duplicated or mismatched is a checkpoint_error on every rank, listing
/// all problems. Optimizer state not loaded is zeroed. Collective.
/// Checksums are verified unless `verify` is verification::none.
CAIRN_DECL checkpoint_metadata load_checkpoint(model_state& state, comm::communicator_ref comm,
                                               checkpoint_load_config const& config,
                                               verification verify = verification::checksums);

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/save_load.ipp>
#endif
