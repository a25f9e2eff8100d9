#pragma once

#include <cairn/config/detail/pretty.hpp>
#include <cairn/config/reflect.hpp>
#include <cairn/detail/decl.hpp>

#include <string>
#include <string_view>

namespace cairn {

/// What `document` shows.
struct doc_options {
  int max_importance = importance(hint::expert); ///< hide fields less important than this
};

namespace detail {

CAIRN_DECL void document_fields(std::string& out, config_ops const& ops, void const* defaults,
                                doc_options const& options, int depth);

CAIRN_DECL void document_legacy(std::string& out, config_ops const& ops);

CAIRN_DECL std::string document(config_ops const& ops, doc_options const& options);

} // namespace detail

/// The fields of T as an indented tree: name, type, default (from `T{}`), hint, checks and
/// description, followed by the deprecated spellings that are still accepted.
template <described_config T> std::string document(doc_options const& options = {}) {
  return detail::document(detail::config_of<T>(), options);
}

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/config/impl/docs.ipp>
#endif
