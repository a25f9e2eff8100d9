// Definitions of <cairn/config/docs.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/config/docs.hpp>

namespace cairn::detail {

CAIRN_DECL void document_fields(std::string& out, config_ops const& ops, void const* defaults,
                                doc_options const& options, int depth) {
  auto indent = std::string(static_cast<std::size_t>(depth) * 2, ' ');
  for (auto const& f : ops.fields) {
    if (importance(f.hint) > options.max_importance) continue;
    out += indent;
    out += f.name;
    out += ": ";
    out += type_name_of(*f.type);
    if (!f.type->config) {
      out += " = ";
      out += compact(write_value(*f.type, f.member(defaults)));
    }
    out += "  [";
    out += to_string(f.hint);
    for (auto const& check : f.checks) out += ", " + check.describe(check.check);
    if (f.type->enum_names) out += ", one of " + f.type->enum_names();
    out += "]\n";
    if (!f.description.empty()) {
      out += indent + "    ";
      out += f.description;
      out += '\n';
    }
    if (f.type->config) {
      document_fields(out, f.type->config(), f.member(defaults), options, depth + 1);
    } else if (f.type->optional_config) {
      auto const& nested = f.type->optional_config();
      document_fields(out, nested, nested.defaults(), options, depth + 1);
    }
  }
}

CAIRN_DECL void document_legacy(std::string& out, config_ops const& ops) {
  if (!ops.legacy.empty()) {
    out += "  deprecated spellings in " + std::string(ops.name) + ":\n";
    for (auto const& rule : ops.legacy) out += "    " + rule.summary() + '\n';
  }
  for (auto const& f : ops.fields) {
    if (f.type->config) document_legacy(out, f.type->config());
  }
}

CAIRN_DECL std::string document(config_ops const& ops, doc_options const& options) {
  std::string out = std::string(ops.name) + '\n';
  document_fields(out, ops, ops.defaults(), options, 1);
  std::string legacy;
  document_legacy(legacy, ops);
  if (!legacy.empty()) out += "\n" + legacy;
  return out;
}

} // namespace cairn::detail
