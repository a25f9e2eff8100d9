#pragma once

#include <cairn/config/reflect.hpp>

#include <boost/json/object.hpp>

namespace cairn {

/// A JSON Schema (draft 2020-12) of T with descriptions, defaults, enums and bounds, for
/// editors to complete and check config files.
template <described_config T> boost::json::object json_schema() {
  boost::json::object schema;
  schema["$schema"] = "https://json-schema.org/draft/2020-12/schema";
  value_traits<T>::schema(schema);
  return schema;
}

} // namespace cairn
