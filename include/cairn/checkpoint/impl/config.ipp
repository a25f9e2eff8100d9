// Definitions of <cairn/checkpoint/config.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/config.hpp>
#include <cairn/config/check.hpp>
#include <cairn/config/field.hpp>
#include <cairn/config/legacy.hpp>
#include <cairn/config/validation.hpp>

#include <boost/describe/class.hpp>
#include <boost/describe/enum.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace cairn::detail {

CAIRN_DECL void check_state_fits_format(checkpoint_format format, bool optimizer_state, validation& v) {
  if (optimizer_state && !holds_optimizer_state(format))
    v.error("optimizer_state", "the external format cannot hold optimizer state; use distributed or state_dict");
}

CAIRN_DECL void check_save_fits_format(checkpoint_format format, bool model_weights, bool optimizer_state,
                                       validation& v) {
  check_state_fits_format(format, optimizer_state, v);
  if (!model_weights && format == checkpoint_format::external)
    v.error("model_weights", "is false, but the external format holds the model's weights and nothing else");
}

CAIRN_DECL boost::json::value merge_load_flags(boost::json::object const& old) {
  auto flag = [&](char const* key) {
    auto const* value = old.if_contains(key);
    if (value && !value->is_bool())
      throw checkpoint_error(checkpoint_errc::invalid_request, std::string(key) + " must be a boolean");
    return value && value->get_bool();
  };
  bool everything = flag("load_full_fast_llm_config");
  bool model = flag("load_full_base_model_config");
  bool override_architecture = flag("override_architecture");
  if (override_architecture && (everything || model))
    throw checkpoint_error(checkpoint_errc::invalid_request,
                           "override_architecture cannot be combined with load_full_base_model_config or "
                           "load_full_fast_llm_config");
  if (everything) return "cairn";
  if (model) return "model";
  return override_architecture ? "none" : "architecture";
}

} // namespace cairn::detail

namespace cairn {

CAIRN_DECL std::vector<legacy_rule> cairn_legacy(checkpoint_load_metadata_config const*) {
  return {legacy::rename_value("load_config", "fast_llm", "cairn"),
          legacy::merge({"override_architecture", "load_full_base_model_config", "load_full_fast_llm_config"},
                        "load_config", detail::merge_load_flags)};
}

} // namespace cairn
