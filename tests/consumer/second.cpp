// A second translation unit of the consumer: with cairn::core_compiled both declare cairn's
// functions and the library defines them once.
#include <cairn/config.hpp>

#include <boost/json/value.hpp> // with cairn compiled once, its headers declare JSON types only

#include <string>

std::string second_unit() { return cairn::to_compact_json(cairn::parse_json(R"({"unit": 2})")); }
