#pragma once
// cairn: requires libtorch

// The state_dict format: whole tensors named <parameter>/<state shard>, in files
// state_dict_<i>.safetensors of at most parameters_per_file elements each, listed by
// state_dict.safetensors.index.json, whose metadata holds the checkpoint metadata. Writing is
// spread over the ranks (file i by rank i mod world size), each tensor gathered to its writer
// alone, in bounded memory. Loads into any layout.

#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/checkpoint/plan.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/checkpoint/verify.hpp>
#include <cairn/comm/ref.hpp>
#include <cairn/detail/decl.hpp>

#include <boost/json/fwd.hpp>

namespace cairn::formats {

struct state_dict {
  static constexpr checkpoint_format format = checkpoint_format::state_dict;

  /// The plan of a save of `state`: files of whole tensors `<parameter>/<state shard>`, file i
  /// written by rank i mod world size, each tensor gathered to its writer from the ranks holding
  /// parts of it; the index closing it. Collective: the ranks' layouts and the save's identity
  /// are agreed.
  CAIRN_DECL static save_plan plan(model_state const& state, comm::communicator_ref comm,
                                   checkpoint_save_config const& config, boost::json::value const& program_config,
                                   boost::json::value const& user_metadata);

  /// Saves `state` (see cairn::save_checkpoint). Collective.
  CAIRN_DECL static void save(model_state const& state, comm::communicator_ref comm,
                              checkpoint_save_config const& config, boost::json::value const& program_config,
                              boost::json::value const& user_metadata);

  /// Loads into `state` (see cairn::load_checkpoint). Collective.
  CAIRN_DECL static checkpoint_metadata load(model_state& state, comm::communicator_ref comm,
                                             checkpoint_load_config const& config, verification verify);
};

} // namespace cairn::formats

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/state_dict.ipp>
#endif
