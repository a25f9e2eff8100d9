#pragma once

// Reflection of described configs: the concept a config satisfies, its fields, and the value
// traits that let a config, or an optional, vector or string-keyed map of values, be a field.
// The machinery (one runtime table of fields per config type) is in config/detail/reflect.hpp.

#include <cairn/config/described.hpp>
#include <cairn/config/detail/reflect.hpp>
#include <cairn/config/value.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cairn {

/// One field of a config: `name`, `description`, `hint`, `checks`.
using field_info = detail::field_info;

/// The fields of config T, inherited ones first, each with `name`, `description`, `hint` and
/// `checks` (after the updates of derived configs).
template <described_config T> std::vector<field_info> const& fields_of() { return detail::config_of<T>().fields; }

template <class U> struct value_traits<std::optional<U>> : detail::container_traits<std::optional<U>> {};
template <class U> struct value_traits<std::vector<U>> : detail::container_traits<std::vector<U>> {};
template <class U, class C, class A> struct value_traits<std::map<std::string, U, C, A>>
    : detail::container_traits<std::map<std::string, U, C, A>> {};

template <described_config T> struct value_traits<T> {
  static void read(boost::json::value const& j, T& v, read_context& ctx) {
    detail::read_config(detail::config_of<T>(), j, &v, ctx);
  }
  static detail::json_value<T> write(T const& v) { return detail::write_config(detail::config_of<T>(), &v); }
  static std::string type_name() { return std::string(config_name<T>()); }
  /// An object schema: each field's type, description, default (from `T{}`) and bounds.
  static void schema(boost::json::object& s) { detail::config_schema(detail::config_of<T>(), s); }
};

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/config/impl/reflect.ipp>
#endif
