#pragma once

// What `load_config` does with the config a checkpoint stores. No libtorch.

#include <cairn/checkpoint/config.hpp>
#include <cairn/config/compare.hpp>
#include <cairn/config/json.hpp>

#include <boost/json/value.hpp>

#include <string>

namespace cairn {

/// Applies the program config stored in a checkpoint to `mine`, as `how` says:
///   none          keep `mine`; a different architecture is a warning
///   architecture  take the stored model's architecture fields
///   model         take the whole stored model config
///   cairn         take the whole stored model config and the other parts of the model's
///                 config the program names in `also` (its distributed layout, say); never the
///                 run directory, the schedules or the pretrained section (the seed's
///                 `fast_llm`)
/// `model` names the program's model config. Then validates `mine` again. A stored config
/// that does not parse is a config_error naming `source`.
///
///     cairn::apply_stored_config(cfg, metadata.config, &my_config::model, cfg.pretrained.load_config,
///                                path.string(), &my_config::distributed);
template <described_config Program, described_config Model, class... Also>
void apply_stored_config(Program& mine, boost::json::value const& stored, Model Program::*model, model_config_type how,
                         std::string const& source, Also Program::*... also) {
  Program theirs;
  try {
    theirs = parse_lenient<Program>(stored).config; // keys this program no longer has are ignored
  } catch (config_error const& e) {
    std::vector<diagnostic> errors;
    for (auto const& d : e.errors()) errors.push_back({source + ": config." + d.path, d.message});
    throw config_error(std::move(errors));
  }
  switch (how) {
  case model_config_type::none:
    check_architecture(theirs.*model, mine.*model, on_mismatch::warning, "checkpoint architecture (" + source + ")");
    break;
  case model_config_type::architecture:
    copy_fields(mine.*model, theirs.*model, field_selection::architecture);
    break;
  case model_config_type::model:
    mine.*model = theirs.*model;
    break;
  case model_config_type::cairn:
    mine.*model = theirs.*model;
    ((mine.*also = theirs.*also), ...);
    break;
  }
  validate(mine);
}

} // namespace cairn
