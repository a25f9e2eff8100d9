#pragma once

#include <cairn/config/detail/json_fwd.hpp>
#include <cairn/config/detail/show.hpp>
#include <cairn/detail/decl.hpp>

#include <string>

namespace cairn::detail {

/// Writes JSON for people: numbers in their shortest form (`0.1`, not `1E-1`), and, when
/// `indent` is not negative, two spaces per level with keys in the config's order.
CAIRN_DECL void write_json(std::string& out, boost::json::value const& v, int indent);

/// Indented JSON text, ending with a newline.
CAIRN_DECL std::string pretty(boost::json::value const& v);

/// JSON text on one line.
CAIRN_DECL std::string compact(boost::json::value const& v);

} // namespace cairn::detail

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/config/impl/pretty.ipp>
#endif
