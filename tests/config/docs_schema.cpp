// Documentation tree and JSON Schema, both from the same reflection that parses configs.
#include <boost/json.hpp> // these tests are built with CAIRN_SEPARATE_COMPILATION: cairn only declares JSON types
#include <doctest/doctest.h>

#include <string>

#include "fixtures.hpp"
#include "golden.hpp"

TEST_CASE("the documentation tree shows path, type, default, hint, checks and description") {
  auto doc = cairn::document<fixture::trainer_config>({.max_importance = cairn::importance(cairn::hint::testing)});
  CHECK(doc == golden("docs_trainer.txt", doc));
}

TEST_CASE("documentation can hide less important fields") {
  auto all = cairn::document<fixture::trainer_config>({.max_importance = 100});
  auto core = cairn::document<fixture::trainer_config>({.max_importance = cairn::importance(cairn::hint::core)});
  CHECK(all.find("betas") != std::string::npos);
  CHECK(core.find("betas") == std::string::npos);       // expert
  CHECK(core.find("dropout") == std::string::npos);     // feature
  CHECK(core.find("hidden_size") != std::string::npos); // architecture
}

TEST_CASE("the JSON Schema carries types, descriptions, defaults, enums and bounds") {
  auto schema = cairn::json_schema<fixture::trainer_config>();
  CHECK(schema.at("$schema") == "https://json-schema.org/draft/2020-12/schema");
  CHECK(schema.at("type") == "object");
  CHECK(schema.at("additionalProperties") == false);
  auto const& model = schema.at("properties").at("model").as_object();
  CHECK(model.at("description") == "The model.");
  auto const& layers = model.at("properties").at("layers").as_object();
  CHECK(layers.at("type") == "integer");
  CHECK(layers.at("minimum") == 1);
  CHECK(layers.at("maximum") == 128);
  CHECK(layers.at("default") == 2);
  CHECK(layers.at("description") == "Number of layers.");
  auto const& kind = schema.at("properties").at("optimizer").at("properties").at("kind").as_object();
  CHECK(kind.at("enum") == boost::json::array{"adam", "sgd"});
  auto const& interval = schema.at("properties").at("logs").at("properties").at("interval").as_object();
  CHECK(interval.at("type") == boost::json::array{"integer", "null"});
  CHECK(interval.at("exclusiveMinimum") == 0);
  CHECK(interval.at("maximum") == 1000000);
  CHECK(interval.at("default") == 100);
  auto const& name = schema.at("properties").at("run").at("properties").at("name").as_object();
  CHECK(name.at("type") == boost::json::array{"string", "null"});
  CHECK(name.at("minLength") == 1);
  auto const& environment = schema.at("properties").at("run").at("properties").at("environment").as_object();
  CHECK(environment.at("additionalProperties").at("type") == "string");
}

TEST_CASE("every default in the schema is a valid config value") {
  auto schema = cairn::json_schema<fixture::trainer_config>();
  boost::json::object defaults;
  for (auto const& [key, property] : schema.at("properties").as_object()) defaults[key] = property.at("default");
  auto config = cairn::from_json<fixture::trainer_config>(defaults);
  CHECK(cairn::compare(config, fixture::trainer_config{}).empty());
}
