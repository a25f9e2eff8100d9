// All errors of one load come together, each with its full path; the text is a golden file.
#include <doctest/doctest.h>

#include "fixtures.hpp"
#include "golden.hpp"

TEST_CASE("five mistakes at different depths are reported together") {
  // A type error in a nested config, an unknown key at the top, a bound broken by an
  // override, an enum value that does not exist, an empty string where one is required.
  // The top config's cross-field rule (experiment_dir needed to train) is not reported: it
  // runs only once the fields it reads are sound.
  auto const json = R"({
    "run": {"name": ""},
    "model": {"hidden_size": "wide", "layers": 2},
    "optimizer": {"kind": "lamb"},
    "train_iters": 100,
    "dropout": 0.1
  })";
  std::string actual;
  try {
    cairn::from_string<fixture::trainer_config>(json, {"logs.interval=0"});
    FAIL("the config was accepted");
  } catch (cairn::config_error const& e) {
    CHECK(e.errors().size() == 5);
    actual = std::string(e.what()) + "\n";
  }
  CHECK(actual == golden("config_errors.txt", actual));
}

TEST_CASE("cross-field validation runs once the fields are sound") {
  try {
    cairn::from_string<fixture::trainer_config>(R"({"train_iters": 100})");
    FAIL("the config was accepted");
  } catch (cairn::config_error const& e) {
    REQUIRE(e.errors().size() == 1);
    CHECK(e.errors()[0] == cairn::diagnostic{"run.experiment_dir", "required when train_iters > 0"});
  }
}

TEST_CASE("config_error is a cairn::error") {
  CHECK_THROWS_AS(cairn::from_string<fixture::trainer_config>(R"({"seed": []})"), cairn::error);
}
