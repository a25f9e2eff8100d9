// A program of an outside project: reads a config with an override and checks the result.
#include <cairn/config.hpp>

#include <boost/describe/class.hpp>

#include <cstdio>
#include <string>

struct run_config {
  std::string name = "default";
  int steps = 10;
};
BOOST_DESCRIBE_STRUCT(run_config, (), (name, steps))

constexpr auto cairn_fields(run_config const*) {
  using namespace cairn;
  return fields(field(&run_config::name, "Name of the run.", hint::core, check::non_empty),
                field(&run_config::steps, "Steps to run.", hint::core, check::positive));
}

#ifdef CONSUMER_TWO_UNITS
std::string second_unit();
#endif

int main() {
#ifdef CONSUMER_TWO_UNITS
  if (second_unit() != R"({"unit": 2})") return 1;
#ifndef CAIRN_SEPARATE_COMPILATION
  return 1; // cairn::core_compiled gives every translation unit the definition
#endif
#endif
  auto config = cairn::from_string<run_config>(R"({"name": "consumer"})", {"steps=3"});
  if (config.name != "consumer" || config.steps != 3) return 1;
  try {
    cairn::from_string<run_config>(R"({"steps": 0})");
    return 1;
  } catch (cairn::config_error const& e) {
    std::printf("%s\n", e.what());
  }
  return 0;
}
