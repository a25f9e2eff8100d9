// Field metadata: descriptions, hints, checks, and FieldUpdate in derived configs.
#include <boost/json.hpp> // these tests are built with CAIRN_SEPARATE_COMPILATION: cairn only declares JSON types
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fixtures.hpp"

namespace {

template <class T> std::vector<std::string> field_names() {
  std::vector<std::string> names;
  for (auto const& field : cairn::fields_of<T>()) names.emplace_back(field.name);
  return names;
}

template <class T> cairn::field_info const& field_named(std::string const& name) {
  for (auto const& field : cairn::fields_of<T>())
    if (field.name == name) return field;
  throw std::out_of_range(name);
}

template <class T> std::string description_of(std::string const& name) {
  return std::string(field_named<T>(name).description);
}

template <class T> cairn::hint hint_of(std::string const& name) { return field_named<T>(name).hint; }

// A field list that is not a constant expression (its check holds a std::function): cairn
// keeps it in a static initialised at run time instead of a constant.
struct runtime_fields {
  int workers = 1;
};
BOOST_DESCRIBE_STRUCT(runtime_fields, (), (workers))
auto cairn_fields(runtime_fields const*) {
  std::function<bool(int)> even = [](int n) { return n % 2 == 0; };
  return cairn::fields(cairn::field(&runtime_fields::workers, "Worker count.", cairn::hint::performance,
                                    cairn::check::satisfies(even, "must be even")));
}

} // namespace

TEST_CASE("a field list built at run time works like a constant one") {
  static_assert(!cairn::detail::constant_fields<runtime_fields>);
  static_assert(cairn::detail::constant_fields<fixture::model_config>);
  CHECK(description_of<runtime_fields>("workers") == "Worker count.");
  CHECK(hint_of<runtime_fields>("workers") == cairn::hint::performance);
  runtime_fields config;
  CHECK_THROWS_WITH_AS(cairn::validate(config), doctest::Contains("workers: must be even"), cairn::config_error);
  config.workers = 2;
  CHECK_NOTHROW(cairn::validate(config));
}

TEST_CASE("fields come in declaration order, inherited ones first") {
  CHECK(field_names<fixture::interval_config>() == std::vector<std::string>{"interval", "offset"});
  CHECK(field_names<fixture::logs_config>() == std::vector<std::string>{"interval", "offset"});
  CHECK(field_names<fixture::trainer_config>() ==
        std::vector<std::string>{"run", "model", "optimizer", "logs", "seed", "train_iters"});
}

TEST_CASE("a field carries its description and hint") {
  CHECK(description_of<fixture::model_config>("layers") == "Number of layers.");
  CHECK(hint_of<fixture::model_config>("hidden_size") == cairn::hint::architecture);
  CHECK(hint_of<fixture::model_config>("dropout") == cairn::hint::feature);
}

TEST_CASE("an update re-describes an inherited field and keeps the rest") {
  CHECK(description_of<fixture::logs_config>("interval") == "Iterations between metric logs. Unset disables logging.");
  CHECK(hint_of<fixture::logs_config>("interval") == cairn::hint::logging);
  // offset is not updated: the base's metadata stands.
  CHECK(description_of<fixture::logs_config>("offset") == "Iteration of the first firing.");
  CHECK(hint_of<fixture::logs_config>("offset") == cairn::hint::feature);
  // The base is unaffected by its derived config's update.
  CHECK(description_of<fixture::interval_config>("interval") == "Iterations between firings. Unset disables.");
}

TEST_CASE("defaults come from the struct, including a derived constructor's") {
  CHECK_FALSE(fixture::interval_config{}.interval.has_value());
  CHECK(fixture::logs_config{}.interval == 100);
  auto json = cairn::to_json(fixture::logs_config{});
  CHECK(json.at("interval").as_int64() == 100);
  CHECK(cairn::document<fixture::logs_config>().find("interval: optional<int64> = 100") != std::string::npos);
}

TEST_CASE("updated checks replace the inherited ones") {
  fixture::logs_config logs;
  logs.interval = 2000000;
  CHECK_THROWS_WITH_AS(cairn::validate(logs), doctest::Contains("interval: must be <= 1000000, got 2000000"),
                       cairn::config_error);
  fixture::interval_config plain;
  plain.interval = 2000000;
  CHECK_NOTHROW(cairn::validate(plain));
}

TEST_CASE("checks on an optional field skip an unset value and test a set one") {
  fixture::interval_config config;
  CHECK_NOTHROW(cairn::validate(config));
  config.interval = 0;
  CHECK_THROWS_WITH_AS(cairn::validate(config), doctest::Contains("interval: must be > 0, got 0"), cairn::config_error);
}

TEST_CASE("check messages") {
  using namespace cairn::check;
  CHECK(positive(-1) == "must be > 0, got -1");
  CHECK(non_negative(0) == std::nullopt);
  CHECK(at_least(std::int64_t{1} << 20)(std::int64_t{5}) == "must be >= 1048576, got 5");
  CHECK(in_range(0.0, 1.0)(1.5) == "must be in [0, 1], got 1.5");
  CHECK(less(10)(10) == "must be < 10, got 10");
  CHECK(at_most(10)(10) == std::nullopt);
  CHECK(one_of("adam", "sgd")(std::string("sgd")) == std::nullopt);
  CHECK(one_of("adam", "sgd")(std::string("lamb")) == "must be one of \"adam\", \"sgd\", got \"lamb\"");
  CHECK(one_of(1, 2, 4)(3) == "must be one of 1, 2, 4, got 3");
  CHECK(non_empty(std::string()) == "must not be empty");
  CHECK(non_empty(std::vector<int>{1}) == std::nullopt);
  CHECK(is_set(std::optional<int>()) == "must be set");
  auto power_of_two = satisfies([](std::int64_t v) { return v > 0 && (v & (v - 1)) == 0; }, "must be a power of two");
  CHECK(power_of_two(std::int64_t{6}) == "must be a power of two, got 6");
  CHECK(power_of_two(std::int64_t{8}) == std::nullopt);
}

TEST_CASE("in_range and the other bounds include or exclude each end as their names say") {
  using namespace cairn::check;
  // Both ends of in_range belong to it, for integers and floating point alike.
  CHECK(in_range(1, 64)(1) == std::nullopt);
  CHECK(in_range(1, 64)(64) == std::nullopt);
  CHECK(in_range(1, 64)(0) == "must be in [1, 64], got 0");
  CHECK(in_range(1, 64)(65) == "must be in [1, 64], got 65");
  CHECK(in_range(0.0, 0.999999)(0.999999) == std::nullopt);
  CHECK(in_range(0.0, 0.999999)(0.0) == std::nullopt);
  CHECK(in_range(0.0, 0.999999)(std::nextafter(0.999999, 1.0)).has_value());
  CHECK(in_range(0.0, 0.999999)(-0.0) == std::nullopt);
  CHECK(at_least(3)(3) == std::nullopt);
  CHECK(greater(3)(3) == "must be > 3, got 3");
  CHECK(at_most(3)(4) == "must be <= 3, got 4");
  CHECK(less(3)(2) == std::nullopt);
}

TEST_CASE("bounds compare exactly across signed and unsigned types") {
  using namespace cairn::check;
  CHECK(non_negative(std::uint64_t{0}) == std::nullopt);
  CHECK(positive(std::uint64_t{0}) == "must be > 0, got 0");
  CHECK(at_most(-1)(std::uint64_t{18446744073709551615ULL}).has_value());
  CHECK(at_least(-1)(std::uint8_t{0}) == std::nullopt);
}

TEST_CASE("bounds compare exactly between integers and floating point, and show values as typed") {
  using namespace cairn::check;
  CHECK(less(0.5)(std::int64_t{1}) == "must be < 0.5, got 1");
  CHECK(at_most(9007199254740992.0)(std::int64_t{9007199254740992}) == std::nullopt); // 2^53
  CHECK(at_most(9007199254740992.0)(std::int64_t{9007199254740993}).has_value());     // 2^53 + 1: not rounded
  CHECK(in_range(0.0, 1.0)(1.1f) == "must be in [0, 1], got 1.1");                    // a float, not 1.100000023841858
  CHECK(greater(std::uint64_t{18446744073709551615ULL})(-1) == "must be > 18446744073709551615, got -1");
}

TEST_CASE("hint importance orders documentation") {
  using cairn::hint;
  CHECK(cairn::importance(hint::core) < cairn::importance(hint::feature));
  CHECK(cairn::importance(hint::feature) < cairn::importance(hint::expert));
  CHECK(cairn::importance(hint::expert) < cairn::importance(hint::derived));
  CHECK(cairn::to_string(hint::architecture) == "architecture");
}
