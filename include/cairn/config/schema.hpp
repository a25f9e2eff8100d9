#pragma once

#include <cairn/config/reflect.hpp>
#include <cairn/detail/decl.hpp>

namespace cairn {

namespace detail {
CAIRN_DECL boost::json::object config_json_schema(config_ops const& ops);
} // namespace detail

/// A JSON Schema (draft 2020-12) of T with descriptions, defaults, enums and bounds, for
/// editors to complete and check config files.
template <described_config T> detail::json_object<T> json_schema() {
  return detail::config_json_schema(detail::config_of<T>());
}

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/config/impl/schema.ipp>
#endif
