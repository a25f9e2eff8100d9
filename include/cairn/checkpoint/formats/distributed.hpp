#pragma once
// cairn: requires libtorch

// The distributed format: every rank writes its own shards to rank_<r>.safetensors and rank 0
// writes metadata.json with every rank's layout. Loading with the saving layout reads each
// rank's own file; any other layout copies exactly the overlaps out of the saved files.

#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/checkpoint/verify.hpp>
#include <cairn/comm/ref.hpp>
#include <cairn/detail/decl.hpp>

#include <boost/json/fwd.hpp>

namespace cairn::formats {

struct distributed {
  static constexpr checkpoint_format format = checkpoint_format::distributed;

  /// Saves `state` (see cairn::save_checkpoint). Collective.
  CAIRN_DECL static void save(model_state const& state, comm::communicator_ref comm,
                              checkpoint_save_config const& config, boost::json::value const& program_config,
                              boost::json::value const& user_metadata);

  /// The metadata of a save of `state` (every rank's layout): the collective half of a save.
  CAIRN_DECL static checkpoint_metadata describe(model_state const& state, comm::communicator_ref comm,
                                                 checkpoint_save_config const& config,
                                                 boost::json::value const& program_config,
                                                 boost::json::value const& user_metadata);

  /// Writes `rank`'s file (and, on rank 0, metadata.json): the local half of a save, with no
  /// communication, so that it can run on a background thread from a copy of the state.
  CAIRN_DECL static void write_files(model_state const& state, int rank, checkpoint_save_config const& config,
                                     checkpoint_metadata const& metadata);

  /// Loads into `state` (see cairn::load_checkpoint). Collective.
  CAIRN_DECL static checkpoint_metadata load(model_state& state, comm::communicator_ref comm,
                                             checkpoint_load_config const& config, verification verify);
};

} // namespace cairn::formats

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/distributed.ipp>
#endif
