#pragma once

#include <cairn/config/reflect.hpp>
#include <cairn/detail/decl.hpp>

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cairn {

namespace detail {

CAIRN_DECL std::vector<std::string_view> split_key(std::string_view key);

CAIRN_DECL bool parse_json_value(std::string_view text, boost::json::value& out);

/// Sets `value` at the dotted `key` of `document`, creating objects on the way.
CAIRN_DECL void set_at(boost::json::value& document, std::span<std::string_view const> key, boost::json::value value);

} // namespace detail

namespace detail {
CAIRN_DECL void apply_overrides(config_ops const& ops, boost::json::value& document,
                                std::span<std::string const> overrides, read_context& ctx);

} // namespace detail

/// Applies `key.path=value` overrides (as given on a command line) to a config document of
/// type T. The value is read as the field's type expects: verbatim for strings, paths and
/// enums (`run.experiment_dir=/tmp/x`), as JSON otherwise (`keep=3`, `interval=null`,
/// `layers=[1,2]`). Problems are recorded in `ctx`, each naming its override.
template <described_config T>
void apply_overrides(boost::json::value& document, std::span<std::string const> overrides, read_context& ctx) {
  detail::apply_overrides(detail::config_of<T>(), document, overrides, ctx);
}

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/config/impl/override.ipp>
#endif
