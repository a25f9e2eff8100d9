#pragma once

#include <cairn/config/detail/pretty.hpp>
#include <cairn/config/reflect.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/diagnostics.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace cairn {

/// Which fields a comparison or copy looks at.
enum class field_selection {
  all,
  architecture, ///< fields hinted `architecture`, and every field inside one
};

/// What a mismatch is.
enum class on_mismatch { error, warning };

/// One field whose value differs between two configs: its path, and its two values as
/// compact JSON text (`3`, `"adam"`, `[1,2]`).
struct difference {
  std::string path;
  std::string left, right;
};

namespace detail {

CAIRN_DECL bool selected(field_info const& f, field_selection which, bool inside_selected);

CAIRN_DECL void collect_differences(config_ops const& ops, void const* left, void const* right, field_selection which,
                                    bool inside_selected, std::string const& prefix, std::vector<difference>& out);

CAIRN_DECL void copy_selected(config_ops const& ops, void* to, void const* from, field_selection which,
                              bool inside_selected);

CAIRN_DECL void report_architecture(std::vector<difference> const& differences, on_mismatch mode,
                                    std::string_view context);

} // namespace detail

/// The fields whose values differ, by path, in field order.
template <described_config T>
std::vector<difference> compare(T const& left, T const& right, field_selection which = field_selection::all) {
  std::vector<difference> out;
  detail::collect_differences(detail::config_of<T>(), &left, &right, which, false, "", out);
  return out;
}

/// Copies the selected fields of `from` into `to`; the others keep their values.
template <described_config T> void copy_fields(T& to, T const& from, field_selection which) {
  detail::copy_selected(detail::config_of<T>(), &to, &from, which, false);
}

/// Compares the architecture fields of `expected` and `actual`. Each difference becomes an
/// error (thrown together as a config_error) or a warning, as the caller chooses; `context`
/// says what is compared, as in "checkpoint architecture".
template <described_config T>
void check_architecture(T const& expected, T const& actual, on_mismatch mode, std::string_view context) {
  detail::report_architecture(compare(expected, actual, field_selection::architecture), mode, context);
}

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/config/impl/compare.ipp>
#endif
