#pragma once

#include <cairn/config/detail/pretty.hpp>
#include <cairn/config/override.hpp>
#include <cairn/config/reflect.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/diagnostics.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cairn {

namespace detail {
/// Validates on top of earlier errors (from parsing), emits warnings, throws on errors.
CAIRN_DECL void finish_validation(config_ops const& ops, void* config, std::vector<diagnostic> earlier);
} // namespace detail

/// Checks every field, then each config's own `validate` (which may derive values), nested
/// configs first. Throws config_error with every error found; warnings go to the diagnostic sink.
template <described_config T> void validate(T& config) {
  detail::finish_validation(detail::config_of<T>(), &config, {});
}

/// JSON text for people, ending with a newline: two spaces per level, numbers in their shortest
/// form (`0.1`, not `1E-1`).
inline std::string to_pretty_json(boost::json::value const& v) { return detail::pretty(v); }

/// JSON text on one line, numbers in their shortest form.
inline std::string to_compact_json(boost::json::value const& v) { return detail::compact(v); }

/// Which fields `to_json` writes.
enum class output {
  all,     ///< every field
  changed, ///< only the fields whose value differs from the default (`T{}`)
};

namespace detail {

CAIRN_DECL boost::json::object write_changes(config_ops const& ops, void const* config, void const* defaults);

/// The whole pipeline into `config` (a `T{}`): legacy rules, overrides, strict parse,
/// validation; all errors at once.
CAIRN_DECL void build_config(config_ops const& ops, boost::json::value& document,
                             std::span<std::string const> overrides, void* config);
CAIRN_DECL void build_from_text(config_ops const& ops, std::string_view text, std::span<std::string const> overrides,
                                void* config);
CAIRN_DECL void build_from_file(config_ops const& ops, std::string const& file, std::span<std::string const> overrides,
                                void* config);
/// `from` written out and read back into `config` with the overrides on top.
CAIRN_DECL void build_from_config(config_ops const& ops, void const* from, std::span<std::string const> overrides,
                                  void* config);

/// Reads `document` into `config` without validating it; errors are thrown together.
CAIRN_DECL void parse_config(config_ops const& ops, boost::json::value const& document, void* config,
                             read_context& ctx);

CAIRN_DECL boost::json::value config_to_json(config_ops const& ops, void const* config, output which);
CAIRN_DECL std::string config_to_string(config_ops const& ops, void const* config, output which);

CAIRN_DECL std::string line_and_column(std::string_view text, std::size_t offset);

/// The text of a file of at most `limit` bytes; errors are config_errors naming the file.
CAIRN_DECL std::string read_config_text(std::string const& file, std::size_t limit);

struct json_feed; // <cairn/detail/json_feed.hpp>
/// The document `feed` parsed once its text was fed whole, or a config_error naming `source`:
/// invalid JSON (line and column), text after the value, a key given twice, a string or a
/// document past the feed's limits.
CAIRN_DECL boost::json::value finish_json(json_feed& feed, std::string_view source);

} // namespace detail

/// Parses JSON text; a syntax error (line and column) or a key given twice in one object (its
/// path, after unescaping) is a config_error naming `source`.
CAIRN_DECL boost::json::value parse_json(std::string_view text, std::string_view source = "<string>");

/// The largest config file `load` reads (64 MiB): a path that names something else (a device, a
/// data file) is an error before it fills memory.
inline constexpr std::size_t max_config_file_size = std::size_t{64} << 20;

/// The largest JSON file cairn reads when not told otherwise (1 GiB): checkpoint metadata
/// that enumerates every rank's layout grows with ranks × parameters; a sparse file or a device
/// named in its place is refused before it is read. Whatever its size, a document is parsed as
/// it is read, within bounds: a key or a string of more than 1 MiB, or a document needing more
/// than 128 MiB of memory parsed, is refused as soon as it is seen (`detail::json_limits`).
inline constexpr std::size_t max_json_file_size = std::size_t{1} << 30;

/// Reads a JSON file (a `std::filesystem::path` converts) of at most `limit` bytes; an
/// unreadable or larger file, something other than a regular file (a FIFO, a device: refused
/// without blocking), a syntax error or a key given twice in one object is a config_error
/// naming the file.
CAIRN_DECL boost::json::value read_json_file(std::string const& file, std::size_t limit = max_json_file_size);

/// A config file format besides JSON, chosen by file name extension. `cairn::enable_yaml()`
/// (<cairn/config/yaml.hpp>) registers YAML (".yaml", ".yml").
struct config_file_format {
  std::string name;                                                       ///< "yaml"
  std::vector<std::string> extensions;                                    ///< ".yaml", ".yml"
  boost::json::value (*read)(std::string const& file, std::size_t limit); ///< errors are config_errors
  std::string (*write)(boost::json::value const& value);                  ///< text for people
};

/// Adds a format (a later one of the same name replaces it). Thread-safe.
CAIRN_DECL bool register_config_file_format(config_file_format format);

/// The registered format of that name, or of that file's extension; null if none.
CAIRN_DECL std::optional<config_file_format> find_config_file_format(std::string_view name);
CAIRN_DECL std::optional<config_file_format> config_file_format_of(std::string const& file);

/// Reads a config file into a JSON document: a registered format by its extension, else JSON
/// (`read_json_file`). A YAML file in a program without YAML support is an error saying so.
CAIRN_DECL boost::json::value read_config_file(std::string const& file, std::size_t limit = max_config_file_size);

/// Reads a config from JSON without validating it. Unknown keys are errors.
template <described_config T> T parse(boost::json::value const& document) {
  read_context ctx;
  T config{};
  detail::parse_config(detail::config_of<T>(), document, &config, ctx);
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
  detail::parse_config(detail::config_of<T>(), document, &result.config, ctx);
  result.unknown_keys = ctx.unknown();
  return result;
}

/// Reads and validates a config from a JSON document with `key.path=value` overrides on top.
template <described_config T>
T from_json(detail::json_value<T> document, std::vector<std::string> const& overrides = {}) {
  T config{};
  detail::build_config(detail::config_of<T>(), document, overrides, &config);
  return config;
}

/// Reads and validates a config from JSON text with overrides on top.
template <described_config T> T from_string(std::string_view text, std::vector<std::string> const& overrides = {}) {
  T config{};
  detail::build_from_text(detail::config_of<T>(), text, overrides, &config);
  return config;
}

/// Reads and validates a config from a file (JSON, or another registered format such as YAML,
/// see `read_config_file`) with overrides on top:
///
///     auto cfg = cairn::load<trainer_config>("run.json", {"training.checkpoint.interval=1000"});
///
/// `file` is a `std::filesystem::path` or a string.
template <described_config T, class Path> T load(Path const& file, std::vector<std::string> const& overrides = {}) {
  T config{};
  if constexpr (std::is_convertible_v<Path const&, std::string_view>)
    detail::build_from_file(detail::config_of<T>(), std::string(std::string_view(file)), overrides, &config);
  else
    detail::build_from_file(detail::config_of<T>(), file.string(), overrides, &config);
  return config;
}

/// A copy of `config` with overrides applied, validated again.
template <described_config T> T with(T const& config, std::vector<std::string> const& overrides) {
  T updated{};
  detail::build_from_config(detail::config_of<T>(), &config, overrides, &updated);
  return updated;
}

/// The config as JSON: every field, or only those that differ from `T{}`.
template <described_config T> detail::json_value<T> to_json(T const& config, output which = output::all) {
  return detail::config_to_json(detail::config_of<T>(), &config, which);
}

/// The config as indented JSON text.
template <described_config T> std::string to_string(T const& config, output which = output::all) {
  return detail::config_to_string(detail::config_of<T>(), &config, which);
}

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/config/impl/json.ipp>
#include <cairn/config/impl/validate.ipp>
#endif
