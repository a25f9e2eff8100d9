// Definitions of <cairn/checkpoint/save_load.hpp>: inline in a header-only build, compiled once
// by <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/external.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/formats/distributed.hpp>
#include <cairn/checkpoint/formats/state_dict.hpp>
#include <cairn/checkpoint/save_load.hpp>
#include <cairn/config/json.hpp>
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
    throw config_error(std::vector<diagnostic>{
        {"format", "external: a save or load in the external format takes the model's converter "
                   "(cairn::external::bind(converter, model))"}});
  }
  throw checkpoint_error(checkpoint_errc::invalid_request, "unknown checkpoint format");
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
                                               checkpoint_load_config const& given, verification verify) {
  auto config = given;
  config.path = resolve_save(given.path); // a save on a store: its newest complete generation
  progress_scope progress("loading", config.path.string(), state.bytes(config.optimizer_state));
  return detail::with_format(config.format,
                             [&](auto policy) { return decltype(policy)::load(state, comm, config, verify); });
}

CAIRN_DECL external::model_converter const& checkpointer::converter_for(std::string const& model_type) const {
  if (!converter_)
    throw config_error(std::vector<diagnostic>{
        {"format", "external: a save or load in the external format takes the model's converter "
                   "(cairn::external::bind(converter, model))"}});
  if (!model_type.empty() && model_type != converter_->model_type)
    throw config_error(std::vector<diagnostic>{
        {"model_type",
         "\"" + model_type + "\" has no converter in this program (it converts \"" + converter_->model_type + "\")"}});
  return *converter_;
}

CAIRN_DECL void checkpointer::save(model_state const& state, checkpoint_save_config const& config,
                                   boost::json::value const& metadata) const {
  if (config.format != checkpoint_format::external)
    return save_checkpoint(state, comm_, config, program_config_, metadata);
  auto const& conv = converter_for(config.model_type);
  external::detail::save(state, comm_, conv.model_type, conv.weights, conv.config, config);
}

CAIRN_DECL checkpoint_metadata checkpointer::load(model_state& state, checkpoint_load_config const& given,
                                                  verification verify) const {
  if (given.format != checkpoint_format::external) return load_checkpoint(state, comm_, given, verify);
  auto config = given;
  config.path = resolve_save(given.path); // an export on a store: its newest complete generation
  auto const& conv = converter_for(config.model_type);
  external::detail::load(state, comm_, conv.model_type, conv.weights, config, verify, conv.skipped);
  checkpoint_metadata out;
  out.format = checkpoint_format::external;
  out.config = cairn::detail::read_json(formats::external_config(config.path), max_config_file_size);
  return out;
}

CAIRN_DECL save_plan checkpointer::plan(model_state const& state, checkpoint_save_config const& config,
                                        boost::json::value const& metadata) const {
  switch (config.format) {
  case checkpoint_format::distributed:
    return formats::distributed::plan(state, comm_, config, program_config_, metadata);
  case checkpoint_format::state_dict:
    return formats::state_dict::plan(state, comm_, config, program_config_, metadata);
  case checkpoint_format::external: {
    auto const& conv = converter_for(config.model_type);
    return external::detail::plan(state, comm_, conv.model_type, conv.weights, conv.config, config);
  }
  }
  throw checkpoint_error(checkpoint_errc::invalid_request, "unknown checkpoint format");
}

} // namespace cairn
