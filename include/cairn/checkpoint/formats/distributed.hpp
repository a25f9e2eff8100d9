#pragma once
// cairn: requires libtorch

// The distributed format: every rank writes its own shards to rank_<r>.safetensors and rank 0
// writes metadata.json with every rank's layout. Loading with the saving layout reads each
// rank's own file; any other layout copies exactly the overlaps out of the saved files.

#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/checkpoint/plan.hpp>
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

  /// The plan of a save of `state`: one file per rank, `rank_<r>.safetensors` written by rank r
  /// from its own shards (a replicated parameter by rank 0 alone), and metadata.json (every
  /// rank's layout, the program's config, the caller's metadata) closing it. Each rank fills in
  /// the identity of the files it writes. Collective: the ranks' layouts and the save's identity
  /// are agreed. Its files need no communication to write (`detail::execute_alone`), so that an
  /// asynchronous save writes them on a thread of its own from a copy of the state.
  ///
  /// With `reuse` (what a run keeps from one save to the next), layouts unchanged since the
  /// last save are agreed without exchanging them again (`detail::agree_layouts`). `replicas`
  /// says which holders write a replicated parameter: one (balanced), or each its own
  /// (`replica_writer_rule::each`: every rank's file then holds its whole state, as a local
  /// save's must, to be recovered alone).
  CAIRN_DECL static save_plan plan(model_state const& state, comm::communicator_ref comm,
                                   checkpoint_save_config const& config, boost::json::value const& program_config,
                                   boost::json::value const& user_metadata,
                                   cairn::detail::layout_exchange* reuse = nullptr,
                                   replica_writer_rule replicas = replica_writer_rule::balanced);

  /// Loads into `state` (see cairn::load_checkpoint). Collective.
  CAIRN_DECL static checkpoint_metadata load(model_state& state, comm::communicator_ref comm,
                                             checkpoint_load_config const& config, verification verify);
};

} // namespace cairn::formats

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/distributed.ipp>
#endif
