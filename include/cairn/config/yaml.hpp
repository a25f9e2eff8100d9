#pragma once
// cairn: requires yaml-cpp
// cairn: not in the umbrella: needs yaml-cpp (cairn::core with CAIRN_WITH_YAML)

// YAML config files, read into the same JSON document as a JSON file, so that every rule of the
// config core (legacy keys, overrides, checks, all errors at once) applies to them. Needs
// yaml-cpp: cairn configured with CAIRN_WITH_YAML (on when yaml-cpp is found). No libtorch.
//
// Reading YAML is an explicit choice: after `cairn::enable_yaml()`, `load`, `read_config_file`
// and `parse_command_line` read `.yaml` and `.yml` files, and `--print-config=yaml` prints YAML.
// Until then a `.yaml` config is refused with an error that names the call to make.
//
// What is accepted: the YAML 1.2 core schema, so `yes`, `no`, `on` and dates stay strings and
// only `true`/`false` are booleans; plain scalars that look like numbers are numbers (`0x1f`,
// `0o17`, `1e-3`, `.inf`), quoted ones are strings; `~`, `null` and empty values are null;
// anchors, aliases and merge keys (`<<`). Refused, with the line and column: a syntax error, a
// key given twice in one mapping, a key that is not a scalar, a tag other than the core ones
// (`!!str`, `!!int`, `!!float`, `!!bool`, `!!null`, `!!map`, `!!seq`), more than one document.

#ifndef CAIRN_WITH_YAML
#error "cairn/config/yaml.hpp needs yaml-cpp (configure cairn with CAIRN_WITH_YAML=ON and link cairn::core)"
#endif

#include <cairn/config/json.hpp>
#include <cairn/detail/decl.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace cairn {

/// Parses YAML text into a JSON document; errors are config_errors naming `source`, the line
/// and the column.
CAIRN_DECL boost::json::value parse_yaml(std::string_view text, std::string_view source = "<string>");

/// Reads a YAML file of at most `limit` bytes (see `max_config_file_size`).
CAIRN_DECL boost::json::value read_yaml_file(std::string const& file, std::size_t limit = max_config_file_size);

/// A JSON document as block-style YAML that `parse_yaml` reads back to the same document:
/// strings that would read as something else are quoted, floats keep a decimal point.
CAIRN_DECL std::string to_yaml(boost::json::value const& document);

/// Registers YAML (".yaml", ".yml") with the config file readers of this program. Thread-safe;
/// calling it again changes nothing.
inline void enable_yaml() { register_config_file_format({"yaml", {".yaml", ".yml"}, &read_yaml_file, &to_yaml}); }

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/config/impl/yaml.ipp>
#endif
