// `key.path=value` overrides, typed by the field they land on.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "fixtures.hpp"

namespace {

std::vector<cairn::diagnostic> errors_of(std::vector<std::string> const& overrides) {
  try {
    cairn::from_string<fixture::trainer_config>("{}", overrides);
  } catch (cairn::config_error const& e) {
    return e.errors();
  }
  return {};
}

} // namespace

TEST_CASE("values are read as the field's type expects") {
  auto config = cairn::from_string<fixture::trainer_config>(
      "{}", {"model.layers=12", "optimizer.learning_rate=3e-4", "optimizer.kind=sgd", "optimizer.betas=[0.8, 0.9]",
             "run.experiment_dir=/data/exp 1", "run.name=123", "run.environment.CUDA_VISIBLE_DEVICES=0,1",
             "logs.interval=null", "train_iters=5"});
  CHECK(config.model.layers == 12);
  CHECK(config.optimizer.learning_rate == 3e-4);
  CHECK(config.optimizer.kind == fixture::optimizer_kind::sgd);
  CHECK(config.optimizer.betas == std::vector<double>{0.8, 0.9});
  CHECK(config.run.experiment_dir == "/data/exp 1");
  CHECK(config.run.name == "123"); // a string field takes "123" verbatim, not as a number
  CHECK(config.run.environment.at("CUDA_VISIBLE_DEVICES") == "0,1");
  CHECK_FALSE(config.logs.interval.has_value());
}

TEST_CASE("a quoted string value may hold what a bare one cannot") {
  auto config = cairn::from_string<fixture::trainer_config>("{}", {R"(run.name="  padded  ")"});
  CHECK(config.run.name == "  padded  ");
}

TEST_CASE("overrides apply on top of the file, later ones win") {
  auto config = cairn::from_string<fixture::trainer_config>(R"({"model": {"layers": 3, "hidden_size": 32}})",
                                                            {"model.layers=4", "model.layers=5"});
  CHECK(config.model.layers == 5);
  CHECK(config.model.hidden_size == 32);
}

TEST_CASE("an override can fill a whole nested config") {
  auto config = cairn::from_string<fixture::trainer_config>("{}", {R"(model={"layers": 7})"});
  CHECK(config.model.layers == 7);
  CHECK(config.model.hidden_size == 64);
}

TEST_CASE("errors name the override") {
  CHECK(errors_of({"model.layers"}) ==
        std::vector<cairn::diagnostic>{{"", "override 'model.layers' must look like key.path=value"}});
  CHECK(errors_of({"=3"}) == std::vector<cairn::diagnostic>{{"", "override '=3' must look like key.path=value"}});
  CHECK(errors_of({"model..layers=3"}) ==
        std::vector<cairn::diagnostic>{{"", "override 'model..layers=3' has an empty key segment"}});
  CHECK(errors_of({"model.layers=many"}) ==
        std::vector<cairn::diagnostic>{
            {"model.layers", "override 'model.layers=many': \"many\" is not a valid value (write it as JSON)"}});
  CHECK(errors_of({"model.layers=0"}) ==
        std::vector<cairn::diagnostic>{{"model.layers", "must be in [1, 128], got 0"}});
  CHECK(errors_of({"model.layerz=3"}) ==
        std::vector<cairn::diagnostic>{{"model.layerz", "unknown key in model_config; did you mean 'layers'?"}});
}

TEST_CASE("with() returns an updated, validated copy") {
  fixture::trainer_config base;
  auto changed = cairn::with(base, {"model.layers=9", "logs.offset=150"});
  CHECK(changed.model.layers == 9);
  CHECK(changed.logs.offset == 50); // validated: reduced modulo the interval
  CHECK(base.model.layers == 2);
  CHECK_THROWS_AS(cairn::with(base, {"model.layers=0"}), cairn::config_error);
}
