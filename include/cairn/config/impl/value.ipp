// Definitions of <cairn/config/value.hpp>: inline in a header-only build, compiled once by
// <cairn/config/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/config/value.hpp>

namespace cairn::detail {

CAIRN_DECL std::string describe_json(boost::json::value const& j) {
  switch (j.kind()) {
  case boost::json::kind::null:
    return "null";
  case boost::json::kind::bool_:
    return j.get_bool() ? "true" : "false";
  case boost::json::kind::int64:
    return "number " + show(j.get_int64());
  case boost::json::kind::uint64:
    return "number " + show(j.get_uint64());
  case boost::json::kind::double_:
    return "number " + show(j.get_double());
  case boost::json::kind::string:
    return "string " + show(std::string_view(j.get_string()));
  case boost::json::kind::array:
    return "an array";
  case boost::json::kind::object:
    return "an object";
  }
  return "a value";
}

CAIRN_DECL boost::json::value string_value(std::string_view s) { return boost::json::string(s.data(), s.size()); }

} // namespace cairn::detail
