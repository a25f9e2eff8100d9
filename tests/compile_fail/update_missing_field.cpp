// cairn::update on a field the base does not have must not compile.
#include <cairn/config.hpp>

#include <boost/describe/class.hpp>

#include <cstdint>
#include <optional>

struct interval_config {
  std::optional<std::int64_t> interval;
};
BOOST_DESCRIBE_STRUCT(interval_config, (), (interval))

struct logs_config : interval_config {};
BOOST_DESCRIBE_STRUCT(logs_config, (interval_config), ())

constexpr auto cairn_fields(logs_config const*) {
#ifdef CAIRN_EXPECT_FAILURE
  return cairn::fields(cairn::update(&logs_config::intervall).description("Misspelt."));
#else
  return cairn::fields(cairn::update(&logs_config::interval).description("Spelt right."));
#endif
}

int main() { return cairn::to_json(logs_config{}).is_object() ? 0 : 1; }
