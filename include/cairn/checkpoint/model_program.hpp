#pragma once
// cairn: requires libtorch

// Converting to and from the external format, which needs the model's code: the entry point a
// model program calls with its converter (the example trainer's `cairn-train convert`). cairn's
// own formats convert without the model (`cairn convert`, checkpoint/convert.hpp).

#include <cairn/checkpoint/convert.hpp>
#include <cairn/checkpoint/external.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/save_load.hpp>
#include <cairn/comm/single_process.hpp>

#include <boost/json/value.hpp>

#include <functional>
#include <string>

namespace cairn::external {

/// What the conversion needs to know of a model program.
template <class Model> struct model_program {
  /// The program's state for a model config in one process (every parameter whole).
  std::function<model_state(Model const&)> state;
  /// The program config stored with a checkpoint of that model (what `load_config` reads back).
  std::function<boost::json::value(Model const&)> stored_config;
  /// The model config in a program config a checkpoint stores.
  std::function<Model(boost::json::value const&)> model_of;
};

/// Converts `config.input` into `config.output`, in one process, model weights only, where
/// either side is in the external format of `conv`: the model config comes from the input (its
/// config.json, or the program config it stores), the weights go through the program's state.
/// Conversions between cairn's own formats go to `cairn::convert_checkpoint`. Returns a
/// one-line summary.
template <class Model>
std::string convert(convert_config const& config, converter<Model> const& conv, model_program<Model> const& program) {
  bool from_external = config.input.format == checkpoint_format::external;
  if (!from_external && config.output.format != checkpoint_format::external) return convert_checkpoint(config);
  cairn::detail::refuse_overlap(config.input.path, config.output.path);
  cairn::detail::refuse_incomplete_save(config.input.path);
  auto model = from_external ? external::load_config_to_load(conv, config.input.path, config.input.model_type)
                             : program.model_of(read_stored_metadata(config.input.path, config.input.format).config);
  auto state = program.state(model);
  comm::single_process comm;
  checkpoint_load_config load;
  static_cast<checkpoint_load_metadata_config&>(load) = config.input;
  load.model_weights = true;
  load.optimizer_state = false;
  if (from_external)
    external::load(state, comm, conv, model, load);
  else
    load_checkpoint(state, comm, load);
  staged_output staged(config.output.path, config.replace); // written aside, renamed into place when whole
  auto save = config.output;
  save.path = staged.path();
  save.model_weights = true;
  save.optimizer_state = false; // the external format holds none
  if (save.format == checkpoint_format::external)
    external::save(state, comm, conv, model, save);
  else
    save_checkpoint(state, comm, save, program.stored_config(model));
  staged.commit();
  return "converted " + std::to_string(state.parameters.size()) + " parameters from " +
         format_name(config.input.format) + " to " + format_name(save.format) + " in " + config.output.path.string();
}

} // namespace cairn::external
