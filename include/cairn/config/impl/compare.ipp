// Definitions of <cairn/config/compare.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/config/compare.hpp>

#include <boost/json/value.hpp>

namespace cairn::detail {

CAIRN_DECL bool selected(field_info const& f, field_selection which, bool inside_selected) {
  return inside_selected || which == field_selection::all || f.hint == hint::architecture;
}

CAIRN_DECL void collect_differences(config_ops const& ops, void const* left, void const* right, field_selection which,
                                    bool inside_selected, std::string const& prefix, std::vector<difference>& out) {
  for (auto const& f : ops.fields) {
    bool chosen = selected(f, which, inside_selected);
    auto path = prefix.empty() ? std::string(f.name) : prefix + '.' + std::string(f.name);
    if (f.type->config) {
      collect_differences(f.type->config(), f.member(left), f.member(right), which, chosen, path, out);
    } else if (chosen) {
      auto a = write_value(*f.type, f.member(left));
      auto b = write_value(*f.type, f.member(right));
      if (a != b) out.push_back({std::move(path), compact(a), compact(b)});
    }
  }
}

CAIRN_DECL void copy_selected(config_ops const& ops, void* to, void const* from, field_selection which,
                              bool inside_selected) {
  for (auto const& f : ops.fields) {
    bool chosen = selected(f, which, inside_selected);
    if (f.type->config)
      copy_selected(f.type->config(), f.member(to), f.member(from), which, chosen);
    else if (chosen)
      f.type->assign(f.member(to), f.member(from));
  }
}

CAIRN_DECL void report_architecture(std::vector<difference> const& differences, on_mismatch mode,
                                    std::string_view context) {
  std::vector<diagnostic> problems;
  for (auto const& d : differences) {
    problems.push_back({d.path, std::string(context) + " differs: expected " + d.left + ", got " + d.right});
  }
  if (problems.empty()) return;
  if (mode == on_mismatch::error) throw config_error(std::move(problems));
  for (auto const& p : problems) emit(severity::warning, p);
}

} // namespace cairn::detail
