#pragma once

#include <cairn/config/detail/decl.hpp>
#include <cairn/config/detail/pretty.hpp>
#include <cairn/config/override.hpp>
#include <cairn/config/reflect.hpp>
#include <cairn/config/validate.hpp>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace cairn {

/// Which fields `to_json` writes.
enum class output {
  all,     ///< every field
  changed, ///< only the fields whose value differs from the default (`T{}`)
};

namespace detail {

CAIRN_DECL boost::json::object write_changes(config_ops const& ops, void const* config, void const* defaults);

/// The whole pipeline: legacy rules, overrides, strict parse, validation; all errors at once.
template <described_config T> T build(boost::json::value document, std::span<std::string const> overrides) {
  read_context ctx;
  apply_legacy_value(type_ops_of<T>, document, ctx);
  apply_overrides<T>(document, overrides, ctx);
  T config{};
  auto const& ops = config_of<T>();
  read_config(ops, document, &config, ctx);
  finish_validation(ops, &config, std::move(ctx.errors()));
  return config;
}

CAIRN_DECL std::string line_and_column(std::string_view text, std::size_t offset);

} // namespace detail

/// Parses JSON text; a syntax error is a config_error naming `source` and the line and column.
CAIRN_DECL boost::json::value parse_json(std::string_view text, std::string_view source = "<string>");

/// Reads a JSON file; an unreadable file or a syntax error is a config_error naming the file.
CAIRN_DECL boost::json::value read_json_file(std::filesystem::path const& file);

/// Reads a config from JSON without validating it. Unknown keys are errors.
template <described_config T> T parse(boost::json::value const& document) {
  read_context ctx;
  T config{};
  value_traits<T>::read(document, config, ctx);
  if (!ctx.errors().empty()) throw config_error(ctx.errors());
  return config;
}

template <described_config T> struct lenient_parse_result {
  T config;
  std::vector<std::string> unknown_keys; ///< full paths of keys no field matched
};

/// Like `parse`, but keys no field matches are collected instead of rejected.
template <described_config T> lenient_parse_result<T> parse_lenient(boost::json::value const& document) {
  read_context ctx(unknown_keys::collect);
  lenient_parse_result<T> result{};
  value_traits<T>::read(document, result.config, ctx);
  if (!ctx.errors().empty()) throw config_error(ctx.errors());
  result.unknown_keys = ctx.unknown();
  return result;
}

/// Reads and validates a config from a JSON document with `key.path=value` overrides on top.
template <described_config T> T from_json(boost::json::value document, std::vector<std::string> const& overrides = {}) {
  return detail::build<T>(std::move(document), overrides);
}

/// Reads and validates a config from JSON text with overrides on top.
template <described_config T> T from_string(std::string_view text, std::vector<std::string> const& overrides = {}) {
  return detail::build<T>(parse_json(text), overrides);
}

/// Reads and validates a config from a JSON file with overrides on top:
///
///     auto cfg = cairn::load<trainer_config>("run.json", {"training.checkpoint.interval=1000"});
template <described_config T>
T load(std::filesystem::path const& file, std::vector<std::string> const& overrides = {}) {
  return detail::build<T>(read_json_file(file), overrides);
}

/// A copy of `config` with overrides applied, validated again.
template <described_config T> T with(T const& config, std::vector<std::string> const& overrides) {
  return detail::build<T>(value_traits<T>::write(config), overrides);
}

/// The config as JSON: every field, or only those that differ from `T{}`.
template <described_config T> boost::json::value to_json(T const& config, output which = output::all) {
  auto const& ops = detail::config_of<T>();
  if (which == output::changed) return detail::write_changes(ops, &config, ops.defaults());
  return value_traits<T>::write(config);
}

/// The config as indented JSON text.
template <described_config T> std::string to_string(T const& config, output which = output::all) {
  return detail::pretty(to_json(config, which));
}

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/config/impl/json.ipp>
#endif
