// Validation as a phase: field checks, then each config's own validate(), nested configs first.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "fixtures.hpp"

namespace {

std::vector<std::string> order;

struct leaf_config {
  int value = 1;
  void validate(cairn::validation&) { order.push_back("leaf"); }
};
BOOST_DESCRIBE_STRUCT(leaf_config, (), (value))

struct base_config {
  int base_value = 1;
  void validate(cairn::validation&) { order.push_back("base"); }
};
BOOST_DESCRIBE_STRUCT(base_config, (), (base_value))

struct derived_config : base_config {
  leaf_config leaf;
  std::vector<leaf_config> leaves{2};
  void validate(cairn::validation&) { order.push_back("derived"); }
};
BOOST_DESCRIBE_STRUCT(derived_config, (base_config), (leaf, leaves))

// A config validated by throwing, as simple code does.
struct throwing_config {
  int low = 0;
  int high = 10;
  void validate() {
    if (low > high) throw std::invalid_argument("low must not exceed high");
  }
};
BOOST_DESCRIBE_STRUCT(throwing_config, (), (low, high))

struct holder_config {
  throwing_config range;
  fixture::interval_config every;
};
BOOST_DESCRIBE_STRUCT(holder_config, (), (range, every))

struct warning_config {
  std::int64_t checkpoint_interval = 0;
  void validate(cairn::validation& v) {
    if (checkpoint_interval == 0) v.warning("checkpoint_interval", "checkpoints are disabled");
  }
};
BOOST_DESCRIBE_STRUCT(warning_config, (), (checkpoint_interval))

} // namespace

TEST_CASE("nested configs validate first, then bases, then the config itself") {
  order.clear();
  derived_config config;
  cairn::validate(config);
  CHECK(order == std::vector<std::string>{"leaf", "leaf", "leaf", "base", "derived"});
}

TEST_CASE("validate may derive values: an offset is reduced modulo its interval") {
  auto config = cairn::from_string<fixture::interval_config>(R"({"interval": 10, "offset": 25})");
  CHECK(config.offset == 5);
  auto logs = cairn::from_string<fixture::logs_config>(R"({"offset": 250})");
  CHECK(logs.offset == 50);
}

TEST_CASE("validate does not run on a config whose fields failed their checks") {
  // offset %= 0 would divide by zero; the failed check keeps validate from running.
  fixture::interval_config config;
  config.interval = 0;
  config.offset = 3;
  try {
    cairn::validate(config);
    FAIL("accepted");
  } catch (cairn::config_error const& e) {
    REQUIRE(e.errors().size() == 1);
    CHECK(e.errors()[0].path == "interval");
  }
  CHECK(config.offset == 3);
}

TEST_CASE("an exception from a plain validate() becomes an error at the config's path") {
  holder_config config;
  config.range.low = 11;
  config.every.interval = -1;
  try {
    cairn::validate(config);
    FAIL("accepted");
  } catch (cairn::config_error const& e) {
    REQUIRE(e.errors().size() == 2);
    CHECK(e.errors()[0] == cairn::diagnostic{"range", "low must not exceed high"});
    CHECK(e.errors()[1] == cairn::diagnostic{"every.interval", "must be > 0, got -1"});
  }
}

TEST_CASE("warnings go to the diagnostic sink and do not fail validation") {
  std::vector<std::string> seen;
  cairn::scoped_diagnostic_sink sink([&](cairn::severity s, cairn::diagnostic const& d) {
    CHECK(s == cairn::severity::warning);
    seen.push_back(d.to_string());
  });
  warning_config config;
  CHECK_NOTHROW(cairn::validate(config));
  CHECK(seen == std::vector<std::string>{"checkpoint_interval: checkpoints are disabled"});
}

TEST_CASE("a config can be built unvalidated and validated later") {
  fixture::trainer_config config;
  config.train_iters = 5;
  CHECK_THROWS_AS(cairn::validate(config), cairn::config_error);
  config.run.experiment_dir = "/tmp/x";
  CHECK_NOTHROW(cairn::validate(config));
}
