#pragma once

#include <cairn/config/detail/pretty.hpp>
#include <cairn/config/diagnostics.hpp>
#include <cairn/config/reflect.hpp>

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

/// One field whose value differs between two configs.
struct difference {
  std::string path;
  boost::json::value left, right;
};

namespace detail {

inline bool selected(field_info const& f, field_selection which, bool inside_selected) {
  return inside_selected || which == field_selection::all || f.hint == hint::architecture;
}

inline void collect_differences(config_ops const& ops, void const* left, void const* right, field_selection which,
                                bool inside_selected, std::string const& prefix, std::vector<difference>& out) {
  for (auto const& f : ops.fields) {
    bool chosen = selected(f, which, inside_selected);
    auto path = prefix.empty() ? std::string(f.name) : prefix + '.' + std::string(f.name);
    if (f.type->config) {
      collect_differences(f.type->config(), f.member(left), f.member(right), which, chosen, path, out);
    } else if (chosen) {
      auto a = f.type->write(f.member(left));
      auto b = f.type->write(f.member(right));
      if (a != b) out.push_back({std::move(path), std::move(a), std::move(b)});
    }
  }
}

inline void copy_selected(config_ops const& ops, void* to, void const* from, field_selection which,
                          bool inside_selected) {
  for (auto const& f : ops.fields) {
    bool chosen = selected(f, which, inside_selected);
    if (f.type->config)
      copy_selected(f.type->config(), f.member(to), f.member(from), which, chosen);
    else if (chosen)
      f.type->assign(f.member(to), f.member(from));
  }
}

inline void report_architecture(std::vector<difference> const& differences, on_mismatch mode,
                                std::string_view context) {
  std::vector<diagnostic> problems;
  for (auto const& d : differences) {
    problems.push_back(
        {d.path, std::string(context) + " differs: expected " + compact(d.left) + ", got " + compact(d.right)});
  }
  if (problems.empty()) return;
  if (mode == on_mismatch::error) throw config_error(std::move(problems));
  for (auto const& p : problems) emit(severity::warning, p);
}

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
