#pragma once
// cairn: requires libtorch

// Saving and loading sharded model state in any format, chosen at run time by the config's
// `format` and compiled statically per format.

#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/formats/distributed.hpp>
#include <cairn/checkpoint/formats/state_dict.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/comm/communicator.hpp>
#include <cairn/progress.hpp>

#include <boost/json/value.hpp>

namespace cairn {

namespace detail {
template <class Function> decltype(auto) with_format(checkpoint_format format, Function&& f) {
  switch (format) {
  case checkpoint_format::distributed:
    return f(formats::distributed{});
  case checkpoint_format::state_dict:
    return f(formats::state_dict{});
  case checkpoint_format::external:
    throw error("the external format needs a converter: use the converter's save and load");
  }
  throw error("unknown checkpoint format");
}
} // namespace detail

/// Saves `state` as `config` says (path, format, which state, file size, element type).
/// `program_config` (the caller's whole config) and `metadata` (iteration, optimizer step…)
/// are stored with it. Collective: every rank calls it.
///
///     cairn::save_checkpoint(state, comm, cfg.training.checkpoint.save_config(dir), cairn::to_json(cfg), {});
template <comm::communicator Comm>
void save_checkpoint(model_state const& state, Comm& comm, checkpoint_save_config const& config,
                     boost::json::value const& program_config = {}, boost::json::value const& metadata = {}) {
  progress_scope progress("saving", config.path.string(), state.bytes(config.optimizer_state));
  detail::with_format(config.format,
                      [&](auto policy) { decltype(policy)::save(state, comm, config, program_config, metadata); });
}

/// Loads into `state` (any layout, any world size) what `config` asks for, and returns the
/// checkpoint's metadata. Every element of every requested shard is accounted for: anything
/// missing, unexpected, duplicated or mismatched is a checkpoint_error on every rank, listing
/// all problems. Optimizer state not loaded is zeroed. Collective.
/// Checksums are verified unless `verify` is verification::none.
template <comm::communicator Comm> checkpoint_metadata load_checkpoint(model_state& state, Comm& comm,
                                                                       checkpoint_load_config const& config,
                                                                       verification verify = verification::checksums) {
  progress_scope progress("loading", config.path.string(), state.bytes(config.optimizer_state));
  return detail::with_format(config.format,
                             [&](auto policy) { return decltype(policy)::load(state, comm, config, verify); });
}

} // namespace cairn
