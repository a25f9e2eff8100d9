// Definitions of <cairn/config/schema.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/config/schema.hpp>

#include <boost/json/object.hpp>

namespace cairn::detail {

CAIRN_DECL boost::json::object config_json_schema(config_ops const& ops) {
  boost::json::object schema;
  schema["$schema"] = "https://json-schema.org/draft/2020-12/schema";
  config_schema(ops, schema);
  return schema;
}

} // namespace cairn::detail
