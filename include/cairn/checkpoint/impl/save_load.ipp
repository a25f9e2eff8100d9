// Definitions of <cairn/checkpoint/save_load.hpp>: inline in a header-only build, compiled once
// by <cairn/checkpoint/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/formats/distributed.hpp>
#include <cairn/checkpoint/formats/state_dict.hpp>
#include <cairn/checkpoint/save_load.hpp>
#include <cairn/error.hpp>
#include <cairn/progress.hpp>

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

CAIRN_DECL void save_checkpoint(model_state const& state, comm::communicator_ref comm,
                                checkpoint_save_config const& config, boost::json::value const& program_config,
                                boost::json::value const& metadata) {
  progress_scope progress("saving", config.path.string(), state.bytes(config.optimizer_state));
  detail::with_format(config.format,
                      [&](auto policy) { decltype(policy)::save(state, comm, config, program_config, metadata); });
}

CAIRN_DECL checkpoint_metadata load_checkpoint(model_state& state, comm::communicator_ref comm,
                                               checkpoint_load_config const& config, verification verify) {
  progress_scope progress("loading", config.path.string(), state.bytes(config.optimizer_state));
  return detail::with_format(config.format,
                             [&](auto policy) { return decltype(policy)::load(state, comm, config, verify); });
}

} // namespace cairn
