// The checkpoint mixins and the save and load configs composed from them, with the seed's
// legacy keys.
#include <cairn/checkpoint/config.hpp>
#include <cairn/config.hpp>

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace {

struct recorded {
  std::vector<std::string> messages;
  cairn::scoped_diagnostic_sink sink{[this](cairn::severity s, cairn::diagnostic const& d) {
    if (s == cairn::severity::deprecation) messages.push_back(d.to_string());
  }};
};

cairn::checkpoint_load_config load(std::string const& json) {
  return cairn::from_string<cairn::checkpoint_load_config>(json);
}

} // namespace

TEST_CASE("defaults of the seed") {
  cairn::checkpoint_save_config save;
  CHECK(save.format == cairn::checkpoint_format::distributed);
  CHECK(save.model_weights);
  CHECK_FALSE(save.optimizer_state);
  CHECK(save.parameters_per_file == std::uint64_t{1} << 32);
  CHECK_FALSE(save.data_type.has_value());
  cairn::checkpoint_load_config loaded;
  CHECK(loaded.load_config == cairn::model_config_type::architecture);
  CHECK_FALSE(loaded.optimizer_state);
}

TEST_CASE("load_config answers three questions") {
  using enum cairn::model_config_type;
  CHECK_FALSE(cairn::loads_architecture(none));
  CHECK(cairn::loads_architecture(architecture));
  CHECK_FALSE(cairn::loads_base_model(architecture));
  CHECK(cairn::loads_base_model(model));
  CHECK_FALSE(cairn::loads_everything(model));
  CHECK(cairn::loads_everything(cairn));
  CHECK(cairn::loads_base_model(cairn));
}

TEST_CASE("save options are checked") {
  CHECK_THROWS_WITH_AS(
      cairn::from_string<cairn::checkpoint_save_config>(R"({"path": "/x", "parameters_per_file": 1000})"),
      "1 config error:\n  parameters_per_file: must be >= 1048576, got 1000", cairn::config_error);
  CHECK_THROWS_WITH_AS(cairn::from_string<cairn::checkpoint_save_config>(R"({})"), "1 config error:\n  path: required",
                       cairn::config_error);
  auto save = cairn::from_string<cairn::checkpoint_save_config>(R"({"path": "/x", "data_type": "bfloat16"})");
  CHECK(save.data_type == cairn::data_type::bfloat16);
}

TEST_CASE("the external format cannot hold optimizer state; its model type is optional") {
  // As in the seed: the converter is found from the checkpoint's config.json on load, and is the
  // program's own on save.
  CHECK_NOTHROW(load(R"({"path": "/m", "format": "external"})"));
  CHECK_NOTHROW(cairn::from_string<cairn::checkpoint_save_config>(R"({"path": "/m", "format": "external"})"));
  CHECK_THROWS_WITH_AS(load(R"({"path": "/m", "format": "external", "model_type": "llama", "optimizer_state": true})"),
                       "1 config error:\n  optimizer_state: the external format cannot hold optimizer state; use "
                       "distributed or state_dict",
                       cairn::config_error);
  CHECK_THROWS_AS(cairn::from_string<cairn::checkpoint_save_config>(
                      R"({"path": "/m", "format": "external", "model_type": "llama", "optimizer_state": true})"),
                  cairn::config_error);
  CHECK_NOTHROW(load(R"({"path": "/m", "format": "state_dict", "optimizer_state": true})"));
}

TEST_CASE("every renamed key of the seed loads, with a deprecation") {
  recorded log;
  auto config = load(R"({"path": "/m", "imported_type": "llama", "load_weights": false, "load_optimizer": true})");
  auto external = load(R"({"path": "/m", "model_type": "llama", "format": "huggingface"})");
  CHECK(config.model_type == "llama");
  CHECK_FALSE(config.model_weights);
  CHECK(config.optimizer_state == true);
  CHECK(external.format == cairn::checkpoint_format::external);
  CHECK(log.messages == std::vector<std::string>{
                            "imported_type: deprecated in checkpoint_load_config; renamed to 'model_type'",
                            "load_weights: deprecated in checkpoint_load_config; renamed to 'model_weights'",
                            "load_optimizer: deprecated in checkpoint_load_config; renamed to 'optimizer_state'",
                            "format: deprecated in checkpoint_load_config; value \"huggingface\" is now \"external\"",
                        });
}

TEST_CASE("the whole-config value keeps its old name fast_llm") {
  recorded log;
  CHECK(load(R"({"load_config": "fast_llm"})").load_config == cairn::model_config_type::cairn);
  CHECK(log.messages == std::vector<std::string>{
                            "load_config: deprecated in checkpoint_load_config; value \"fast_llm\" is now \"cairn\""});
}

TEST_CASE("the three old booleans merge into load_config") {
  recorded log;
  using enum cairn::model_config_type;
  CHECK(load(R"({"load_full_fast_llm_config": true})").load_config == cairn);
  CHECK(load(R"({"load_full_base_model_config": true})").load_config == model);
  CHECK(load(R"({"load_full_base_model_config": true, "load_full_fast_llm_config": true})").load_config == cairn);
  CHECK(load(R"({"override_architecture": true})").load_config == none);
  CHECK(load(R"({"override_architecture": false})").load_config == architecture);
  CHECK(load(R"({"override_architecture": false, "load_full_base_model_config": false})").load_config == architecture);
  CHECK(log.messages.size() == 8);
  CHECK_THROWS_WITH_AS(load(R"({"override_architecture": true, "load_full_fast_llm_config": true})"),
                       "1 config error:\n  override_architecture: override_architecture cannot be combined with "
                       "load_full_base_model_config or load_full_fast_llm_config",
                       cairn::config_error);
  CHECK_THROWS_AS(load(R"({"load_full_base_model_config": true, "load_config": "none"})"), cairn::config_error);
}
