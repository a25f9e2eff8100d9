// Legacy keys: renames, value rewrites and merges attached to the config that owns the keys,
// applied wherever it appears, each announced by a deprecation diagnostic; and versioned
// migrations of stored documents.
#include <boost/json.hpp> // these tests are built with CAIRN_SEPARATE_COMPILATION: cairn only declares JSON types
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "fixtures.hpp"

namespace {

BOOST_DEFINE_ENUM_CLASS(format_kind, distributed, state_dict, external)
BOOST_DEFINE_ENUM_CLASS(load_kind, none, architecture, model, all)

// A mixin that owns its keys and their old spellings.
struct state_mixin {
  bool model_weights = true;
  bool optimizer_state = false;
};
BOOST_DESCRIBE_STRUCT(state_mixin, (), (model_weights, optimizer_state))

inline std::vector<cairn::legacy_rule> cairn_legacy(state_mixin const*) {
  return {cairn::legacy::rename("load_weights", "model_weights"),
          cairn::legacy::rename("load_optimizer", "optimizer_state")};
}

struct load_config : state_mixin {
  format_kind format = format_kind::distributed;
  load_kind load_config = load_kind::architecture;
};
BOOST_DESCRIBE_STRUCT(load_config, (state_mixin), (format, load_config))

inline std::vector<cairn::legacy_rule> cairn_legacy(load_config const*) {
  return {cairn::legacy::rename_value("format", "huggingface", "external"),
          cairn::legacy::rename_value("load_config", "everything", "all"),
          cairn::legacy::merge({"override_architecture", "load_full_config"}, "load_config",
                               [](boost::json::object const& old) -> boost::json::value {
                                 auto flag = [&](char const* key) {
                                   auto const* v = old.if_contains(key);
                                   if (v && !v->is_bool()) throw cairn::error(std::string(key) + " must be a boolean");
                                   return v && v->get_bool();
                                 };
                                 if (flag("load_full_config")) return "all";
                                 return flag("override_architecture") ? "architecture" : "none";
                               })};
}

struct experiment_config {
  load_config pretrained;
  std::vector<load_config> extra;
};
BOOST_DESCRIBE_STRUCT(experiment_config, (), (pretrained, extra))

struct recorded {
  std::vector<std::string> messages;
  cairn::scoped_diagnostic_sink sink{[this](cairn::severity s, cairn::diagnostic const& d) {
    if (s == cairn::severity::deprecation) messages.push_back(d.to_string());
  }};
};

} // namespace

TEST_CASE("a renamed key of a mixin loads in every config that contains it") {
  recorded log;
  auto config = cairn::from_string<experiment_config>(
      R"({"pretrained": {"load_weights": false, "load_optimizer": true}, "extra": [{"load_weights": false}]})");
  CHECK_FALSE(config.pretrained.model_weights);
  CHECK(config.pretrained.optimizer_state);
  REQUIRE(config.extra.size() == 1);
  CHECK_FALSE(config.extra[0].model_weights);
  CHECK(log.messages == std::vector<std::string>{
                            "pretrained.load_weights: deprecated in load_config; renamed to 'model_weights'",
                            "pretrained.load_optimizer: deprecated in load_config; renamed to 'optimizer_state'",
                            "extra[0].load_weights: deprecated in load_config; renamed to 'model_weights'",
                        });
}

TEST_CASE("an old enum spelling is rewritten") {
  recorded log;
  auto config = cairn::from_string<load_config>(R"({"format": "huggingface"})");
  CHECK(config.format == format_kind::external);
  CHECK(log.messages ==
        std::vector<std::string>{"format: deprecated in load_config; value \"huggingface\" is now \"external\""});
}

TEST_CASE("several old booleans merge into one new key") {
  recorded log;
  CHECK(cairn::from_string<load_config>(R"({"override_architecture": true})").load_config == load_kind::architecture);
  CHECK(cairn::from_string<load_config>(R"({"override_architecture": false})").load_config == load_kind::none);
  CHECK(cairn::from_string<load_config>(R"({"override_architecture": true, "load_full_config": true})").load_config ==
        load_kind::all);
  CHECK(log.messages.size() == 4);
  CHECK(log.messages[0] == "override_architecture: deprecated in load_config; merged into 'load_config'");
}

TEST_CASE("a merge that makes no sense is an error at the old key") {
  recorded log;
  CHECK_THROWS_WITH_AS(cairn::from_string<load_config>(R"({"load_full_config": "yes"})"),
                       "1 config error:\n  load_full_config: load_full_config must be a boolean", cairn::config_error);
}

TEST_CASE("old and new spellings together are an error, not a silent choice") {
  recorded log;
  CHECK_THROWS_WITH_AS(cairn::from_string<load_config>(R"({"load_weights": true, "model_weights": false})"),
                       "1 config error:\n  load_weights: both 'load_weights' (deprecated) and 'model_weights' are "
                       "given; keep only 'model_weights'",
                       cairn::config_error);
  CHECK_THROWS_AS(cairn::from_string<load_config>(R"({"override_architecture": true, "load_config": "model"})"),
                  cairn::config_error);
}

TEST_CASE("an old key in a file and the new key in an override do not clash") {
  recorded log;
  auto config = cairn::from_string<experiment_config>(R"({"pretrained": {"load_weights": true}})",
                                                      {"pretrained.model_weights=false"});
  CHECK_FALSE(config.pretrained.model_weights);
}

TEST_CASE("an old key in an override sets the new key a file already holds: the override wins") {
  recorded log;
  auto config = cairn::from_string<experiment_config>(R"({"pretrained": {"model_weights": true}})",
                                                      {"pretrained.load_weights=false"});
  CHECK_FALSE(config.pretrained.model_weights);
  REQUIRE(log.messages.size() == 1);
  CHECK(log.messages[0].find("load_weights") != std::string::npos);
  // Old launch scripts that still pass the old booleans, on a migrated file.
  auto merged = cairn::from_string<experiment_config>(R"({"pretrained": {"load_config": "model"}})",
                                                      {"pretrained.override_architecture=true"});
  CHECK(merged.pretrained.load_config == load_kind::architecture);
}

TEST_CASE("an old key works in an override too") {
  recorded log;
  auto config = cairn::from_string<experiment_config>("{}", {"pretrained.load_weights=false"});
  CHECK_FALSE(config.pretrained.model_weights);
  CHECK(log.messages.size() == 1);
}

TEST_CASE("the JSON Schema accepts the old keys, marked deprecated") {
  auto schema = cairn::json_schema<load_config>();
  auto const& properties = schema.at("properties").as_object();
  for (auto key : {"load_weights", "load_optimizer", "override_architecture", "load_full_config"}) {
    CAPTURE(key);
    REQUIRE(properties.contains(key));
    CHECK(properties.at(key).at("deprecated") == true);
  }
  CHECK(properties.at("load_weights").at("description") == "Deprecated: load_weights -> model_weights");
  CHECK(schema.at("additionalProperties") == false);
}

TEST_CASE("documentation lists the old spellings still accepted") {
  auto doc = cairn::document<experiment_config>();
  CHECK(doc.find("load_weights -> model_weights") != std::string::npos);
  CHECK(doc.find("format: \"huggingface\" -> \"external\"") != std::string::npos);
  CHECK(doc.find("override_architecture, load_full_config -> load_config") != std::string::npos);
}

TEST_CASE("a migration chain brings a stored document to the current version") {
  cairn::migration_chain chain("3");
  chain
      .step("1", "2",
            [](boost::json::object& doc) {
              doc["shards"] = doc["shard_names"];
              doc.erase("shard_names");
            })
      .step("2", "3", [](boost::json::object& doc) { doc["version"] = "3"; });
  auto doc = cairn::parse_json(R"({"version": "1", "shard_names": ["weights"]})").as_object();
  chain.migrate(doc, "1", "metadata.json");
  CHECK(doc == cairn::parse_json(R"({"version": "3", "shards": ["weights"]})").as_object());

  auto current = cairn::parse_json(R"({"version": "3"})").as_object();
  chain.migrate(current, "3", "metadata.json");
  CHECK(current.at("version") == "3");

  CHECK_THROWS_WITH_AS(chain.migrate(doc, "0.9", "ckpt/metadata.json"),
                       "1 config error:\n  ckpt/metadata.json: unknown version \"0.9\" (this build reads 1, 2, 3)",
                       cairn::config_error);
}
