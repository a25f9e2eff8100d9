// load_config: what of a checkpoint's stored config replaces ours.
#include <cairn/checkpoint/stored_config.hpp>

#include <doctest/doctest.h>

#include "../config/fixtures.hpp"

namespace {

fixture::trainer_config stored() {
  fixture::trainer_config theirs;
  theirs.model = {256, 8, 0.25};
  theirs.seed = 7;
  return theirs;
}

} // namespace

TEST_CASE("none keeps ours and warns about a different architecture") {
  std::vector<std::string> warnings;
  cairn::scoped_diagnostic_sink sink(
      [&](cairn::severity, cairn::diagnostic const& d) { warnings.push_back(d.to_string()); });
  fixture::trainer_config mine;
  cairn::apply_stored_config(mine, cairn::to_json(stored()), &fixture::trainer_config::model,
                             cairn::model_config_type::none, "ckpt");
  CHECK(mine.model.hidden_size == 64);
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0] == "hidden_size: checkpoint architecture (ckpt) differs: expected 256, got 64");
  CHECK(warnings[1] == "layers: checkpoint architecture (ckpt) differs: expected 8, got 2");
}

TEST_CASE("architecture takes the architecture fields only") {
  fixture::trainer_config mine;
  cairn::apply_stored_config(mine, cairn::to_json(stored()), &fixture::trainer_config::model,
                             cairn::model_config_type::architecture, "ckpt");
  CHECK(mine.model.hidden_size == 256);
  CHECK(mine.model.layers == 8);
  CHECK(mine.model.dropout == 0.0); // not architecture
  CHECK(mine.seed == 1234);
}

TEST_CASE("model takes the whole model config; cairn also the parts the program names, never the run") {
  fixture::trainer_config mine;
  mine.run.experiment_dir = "runs/mine";
  auto theirs = stored();
  theirs.run.experiment_dir = "runs/theirs";
  theirs.train_iters = 99;
  cairn::apply_stored_config(mine, cairn::to_json(theirs), &fixture::trainer_config::model,
                             cairn::model_config_type::model, "ckpt");
  CHECK(mine.model.dropout == 0.25);
  CHECK(mine.seed == 1234);
  cairn::apply_stored_config(mine, cairn::to_json(theirs), &fixture::trainer_config::model,
                             cairn::model_config_type::cairn, "ckpt");
  CHECK(mine.model.dropout == 0.25);
  CHECK(mine.seed == 1234); // not named
  cairn::apply_stored_config(mine, cairn::to_json(theirs), &fixture::trainer_config::model,
                             cairn::model_config_type::cairn, "ckpt", &fixture::trainer_config::seed);
  CHECK(mine.seed == 7);
  // A run started from another run's checkpoint keeps its own directory and schedule.
  CHECK(mine.run.experiment_dir == "runs/mine");
  CHECK(mine.train_iters == 0);
}

TEST_CASE("a stored config that does not parse names the checkpoint") {
  fixture::trainer_config mine;
  CHECK_THROWS_WITH_AS(cairn::apply_stored_config(mine, cairn::parse_json(R"({"model": {"layers": "many"}})"),
                                                  &fixture::trainer_config::model,
                                                  cairn::model_config_type::architecture, "ckpt/metadata.json"),
                       "1 config error:\n  ckpt/metadata.json: config.model.layers: expected an integer, got string "
                       "\"many\"",
                       cairn::config_error);
}
