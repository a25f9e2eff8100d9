#pragma once

// The configs of checkpoint saving and loading: small mixins composed into save and load
// configs. Pure configuration (no libtorch), so that the training-loop configs can use them.

#include <cairn/config/check.hpp>
#include <cairn/config/field.hpp>
#include <cairn/config/legacy.hpp>
#include <cairn/config/validation.hpp>
#include <cairn/detail/decl.hpp>

#include <boost/describe/class.hpp>
#include <boost/describe/enum.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace cairn {

/// How a checkpoint is stored.
BOOST_DEFINE_ENUM_CLASS(checkpoint_format,
                        distributed, ///< one file per rank, for fast resuming on the same layout
                        state_dict,  ///< whole tensors, cairn's long-term format, loadable on any layout
                        external)    ///< another framework's format (Hugging Face) through a converter

/// What of a checkpoint's stored config replaces the caller's when loading.
BOOST_DEFINE_ENUM_CLASS(model_config_type,
                        none,         ///< keep the caller's config; only compare architectures (warn on mismatch)
                        architecture, ///< take the architecture fields; loading weights into another is an error
                        model,        ///< take the whole model config
                        cairn) ///< take the model's whole config, its distributed layout included (never the run)

constexpr bool loads_architecture(model_config_type t) noexcept { return t != model_config_type::none; }
constexpr bool loads_base_model(model_config_type t) noexcept {
  return t == model_config_type::model || t == model_config_type::cairn;
}
constexpr bool loads_everything(model_config_type t) noexcept { return t == model_config_type::cairn; }

/// Element types a checkpoint can convert floating-point tensors to on save.
BOOST_DEFINE_ENUM_CLASS(data_type, float64, float32, float16, bfloat16)

/// Whether a format can hold optimizer state.
constexpr bool holds_optimizer_state(checkpoint_format f) noexcept { return f != checkpoint_format::external; }

// --- mixins -------------------------------------------------------------------------------------

struct checkpoint_path_mixin {
  std::filesystem::path path;
};
BOOST_DESCRIBE_STRUCT(checkpoint_path_mixin, (), (path))

constexpr auto cairn_fields(checkpoint_path_mixin const*) {
  return fields(field(&checkpoint_path_mixin::path, "Directory of the checkpoint.", hint::core));
}

struct checkpoint_format_mixin {
  checkpoint_format format = checkpoint_format::distributed;
  std::string model_type;
};
BOOST_DESCRIBE_STRUCT(checkpoint_format_mixin, (), (format, model_type))

constexpr auto cairn_fields(checkpoint_format_mixin const*) {
  return fields(field(&checkpoint_format_mixin::format, "Format of the checkpoint.", hint::core),
                field(&checkpoint_format_mixin::model_type,
                      "Model type of the external format, naming its converter. Optional: on load the "
                      "checkpoint's config.json names it, on save the program's converter does; when given, it "
                      "must match them. Unused by the other formats.",
                      hint::core));
}

inline std::vector<legacy_rule> cairn_legacy(checkpoint_format_mixin const*) {
  return {legacy::rename("imported_type", "model_type"), legacy::rename_value("format", "huggingface", "external")};
}

struct checkpoint_state_mixin {
  bool model_weights = true;
  bool optimizer_state = false;
};
BOOST_DESCRIBE_STRUCT(checkpoint_state_mixin, (), (model_weights, optimizer_state))

constexpr auto cairn_fields(checkpoint_state_mixin const*) {
  return fields(field(&checkpoint_state_mixin::model_weights, "Save or load the model weights.", hint::feature),
                field(&checkpoint_state_mixin::optimizer_state,
                      "Save or load the optimizer state. A load without it zeroes the optimizer state.",
                      hint::feature));
}

inline std::vector<legacy_rule> cairn_legacy(checkpoint_state_mixin const*) {
  return {legacy::rename("load_weights", "model_weights"), legacy::rename("load_optimizer", "optimizer_state")};
}

struct checkpoint_save_options_mixin {
  std::uint64_t parameters_per_file = std::uint64_t{1} << 32;
  std::optional<cairn::data_type> data_type;
};
BOOST_DESCRIBE_STRUCT(checkpoint_save_options_mixin, (), (parameters_per_file, data_type))

constexpr auto cairn_fields(checkpoint_save_options_mixin const*) {
  return fields(field(&checkpoint_save_options_mixin::parameters_per_file,
                      "Most parameters (elements) per file of the state_dict and external formats.", hint::feature,
                      check::at_least(std::uint64_t{1} << 20)),
                field(&checkpoint_save_options_mixin::data_type,
                      "Element type floating-point tensors are converted to. Unset keeps each tensor's.",
                      hint::feature));
}

namespace detail {
/// Optimizer state in a format that cannot hold it is refused before launch, not at the save.
CAIRN_DECL void check_state_fits_format(checkpoint_format format, bool optimizer_state, validation& v);
/// The same for a save: the external format also needs the model's weights (it holds nothing else).
CAIRN_DECL void check_save_fits_format(checkpoint_format format, bool model_weights, bool optimizer_state,
                                       validation& v);
} // namespace detail

// --- composed configs ---------------------------------------------------------------------------

/// Where and in which format a checkpoint's metadata is saved.
struct checkpoint_save_metadata_config : checkpoint_path_mixin, checkpoint_format_mixin {
  void validate(validation& v) {
    if (path.empty()) v.error("path", "required");
  }
};
BOOST_DESCRIBE_STRUCT(checkpoint_save_metadata_config, (checkpoint_path_mixin, checkpoint_format_mixin), ())

/// Everything a save needs.
struct checkpoint_save_config : checkpoint_save_metadata_config, checkpoint_state_mixin, checkpoint_save_options_mixin {
  void validate(validation& v) { detail::check_save_fits_format(format, model_weights, optimizer_state, v); }
};
BOOST_DESCRIBE_STRUCT(checkpoint_save_config,
                      (checkpoint_save_metadata_config, checkpoint_state_mixin, checkpoint_save_options_mixin), ())

/// Where a checkpoint is, and what of its stored config to take.
struct checkpoint_load_metadata_config : checkpoint_path_mixin, checkpoint_format_mixin {
  model_config_type load_config = model_config_type::architecture;
};
BOOST_DESCRIBE_STRUCT(checkpoint_load_metadata_config, (checkpoint_path_mixin, checkpoint_format_mixin), (load_config))

constexpr auto cairn_fields(checkpoint_load_metadata_config const*) {
  return fields(field(&checkpoint_load_metadata_config::load_config,
                      "What of the checkpoint's stored config replaces ours: none (compare architectures and warn), "
                      "architecture, model (the whole model config), or cairn (everything, layout included).",
                      hint::core));
}

namespace detail {
/// The seed's three booleans, merged into `load_config`:
///   load_full_fast_llm_config: true   -> cairn (everything)
///   load_full_base_model_config: true -> model
///   override_architecture: true       -> none (keep our architecture)
///   all false or absent               -> architecture (the default)
/// override_architecture together with either load_full_* is contradictory and refused.
CAIRN_DECL boost::json::value merge_load_flags(boost::json::object const& old);
} // namespace detail

CAIRN_DECL std::vector<legacy_rule> cairn_legacy(checkpoint_load_metadata_config const*);

/// Everything a load needs.
struct checkpoint_load_config : checkpoint_load_metadata_config, checkpoint_state_mixin {
  void validate(validation& v) { detail::check_state_fits_format(format, optimizer_state, v); }
};
BOOST_DESCRIBE_STRUCT(checkpoint_load_config, (checkpoint_load_metadata_config, checkpoint_state_mixin), ())

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/config.ipp>
#endif
