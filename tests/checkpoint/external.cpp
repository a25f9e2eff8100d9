// The external format through a converter: config.json and tensors in the other framework's
// names, shapes and layout, and back, bitwise; everything unmapped reported.
#include <cairn/checkpoint/external.hpp>
#include <cairn/comm/single_process.hpp>

#include <ATen/ATen.h>
#include <boost/describe/class.hpp>
#include <doctest/doctest.h>

#include "../io/temp_dir.hpp"

namespace {

struct tiny_model {
  std::int32_t hidden = 4;
  std::int32_t layers = 2;
  std::int32_t vocab = 8;
};
BOOST_DESCRIBE_STRUCT(tiny_model, (), (hidden, layers, vocab))

cairn::external::converter<tiny_model> tiny_converter() {
  cairn::external::converter<tiny_model> conv;
  conv.model_type = "tiny";
  conv.config.renamed("hidden", "hidden_size")
      .renamed("layers", "num_hidden_layers")
      .renamed("vocab", "vocab_size")
      .constant("architectures", boost::json::array{"TinyForCausalLM"})
      .computed(
          "intermediate_size", [](boost::json::object const& ours) { return ours.at("hidden").as_int64() * 4; },
          [](boost::json::value const&, boost::json::object&) {})
      .ignored("torch_dtype");
  conv.weights = [](tiny_model const& m) {
    std::vector<cairn::external::weight_rule> rules{
        cairn::external::renamed("embedding", "model.embed_tokens.weight"),
        cairn::external::merged({"norm.a", "norm.b"}, "model.norm.weight", 0)};
    for (int i = 0; i < m.layers; ++i) {
      auto prefix = "model.layers." + std::to_string(i) + ".self_attn.";
      rules.push_back(
          cairn::external::split("layers." + std::to_string(i) + ".qkv",
                                 {prefix + "q_proj.weight", prefix + "k_proj.weight", prefix + "v_proj.weight"}, 0));
      rules.push_back(cairn::external::transposed("layers." + std::to_string(i) + ".out", prefix + "o_proj.weight"));
    }
    return rules;
  };
  return conv;
}

/// The tiny model's state, every element distinct, in one process: whole or as one flat range.
cairn::model_state tiny_state(tiny_model const& m, bool flat, bool fill) {
  cairn::model_state state;
  state.shard_names = {"weights", "exp_avg"};
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> shapes{
      {"embedding", {std::uint64_t(m.vocab), std::uint64_t(m.hidden)}},
      {"norm.a", {std::uint64_t(m.hidden)}},
      {"norm.b", {std::uint64_t(m.hidden)}}};
  for (int i = 0; i < m.layers; ++i) {
    shapes.push_back({"layers." + std::to_string(i) + ".qkv", {3 * std::uint64_t(m.hidden), std::uint64_t(m.hidden)}});
    shapes.push_back({"layers." + std::to_string(i) + ".out", {std::uint64_t(m.hidden), 2 * std::uint64_t(m.hidden)}});
  }
  double next = 1;
  for (auto const& [name, shape] : shapes) {
    cairn::parameter_state p;
    p.layout = {name, shape, cairn::io::dtype::F32, false, cairn::shard_layout::whole(shape)};
    if (flat) p.layout.shard.flat = cairn::flat_range{0, p.layout.shard.box_numel()};
    auto n = static_cast<std::int64_t>(p.layout.shard.numel());
    p.shards.push_back(fill ? at::arange(next, next + double(n)).to(at::kFloat) : at::zeros({n}));
    p.shards.push_back(at::full({n}, 5.0));
    next += double(n);
    state.parameters.push_back(std::move(p));
  }
  return state;
}

cairn::comm::single_process comm;

} // namespace

TEST_CASE("save in the external format and load back, bitwise") {
  temp_dir dir;
  tiny_model model;
  auto conv = tiny_converter();
  auto state = tiny_state(model, false, true);
  cairn::checkpoint_save_config save;
  save.path = dir / "hf";
  save.format = cairn::checkpoint_format::external;
  save.model_type = "tiny";
  cairn::external::save(state, comm, conv, model, save);

  auto config = cairn::read_json_file(dir / "hf" / "config.json").as_object();
  CHECK(config.at("model_type") == "tiny");
  CHECK(config.at("hidden_size") == 4);
  CHECK(config.at("num_hidden_layers") == 2);
  CHECK(config.at("intermediate_size") == 16);
  CHECK(config.at("architectures") == boost::json::array{"TinyForCausalLM"});

  cairn::io::safetensors_file file(dir / "hf" / "model.safetensors");
  CHECK(file.at("model.layers.1.self_attn.k_proj.weight").shape == std::vector<std::uint64_t>{4, 4});
  CHECK(file.at("model.layers.0.self_attn.o_proj.weight").shape == std::vector<std::uint64_t>{8, 4}); // transposed
  CHECK(file.metadata().at("format") == "pt");
  CHECK(file.tensors().size() == 2 + 2 * 4);
  CHECK(file.at("model.norm.weight").shape == std::vector<std::uint64_t>{8}); // two of ours, merged

  auto read_back = cairn::external::load_config(conv, dir / "hf");
  CHECK(read_back.hidden == 4);
  CHECK(read_back.layers == 2);
  // A model type the program has no converter for is refused, naming the one it has.
  CHECK_THROWS_WITH_AS(cairn::external::load_config(conv, dir / "hf", "llama"),
                       doctest::Contains("\"llama\" has no converter in this program (it converts \"tiny\")"),
                       cairn::config_error);

  auto loaded = tiny_state(model, true, false);
  cairn::checkpoint_load_config load;
  load.path = dir / "hf";
  load.format = cairn::checkpoint_format::external;
  load.model_type = "tiny";
  cairn::external::load(loaded, comm, conv, model, load);
  for (std::size_t i = 0; i < state.parameters.size(); ++i) {
    CHECK_MESSAGE(loaded.parameters[i].shards[0].equal(state.parameters[i].shards[0]), state.parameters[i].layout.name);
    CHECK(loaded.parameters[i].shards[1].equal(at::zeros_like(loaded.parameters[i].shards[1]))); // optimizer zeroed
  }
}

TEST_CASE("large models are split into numbered files with an index") {
  temp_dir dir;
  tiny_model model{32, 2, 64};
  auto conv = tiny_converter();
  auto state = tiny_state(model, false, true);
  cairn::checkpoint_save_config save;
  save.path = dir / "hf";
  save.parameters_per_file = 2048; // below the 2^20 a config allows, to force several files here
  cairn::external::save(state, comm, conv, model, save);
  auto index = cairn::io::read_index(dir / "hf" / "model.safetensors.index.json");
  CHECK(index.files().size() > 1);
  CHECK(index.files().front() == "model-00001-of-0000" + std::to_string(index.files().size()) + ".safetensors");
  auto loaded = tiny_state(model, true, false);
  cairn::checkpoint_load_config load;
  load.path = dir / "hf";
  cairn::external::load(loaded, comm, conv, model, load);
  for (std::size_t i = 0; i < state.parameters.size(); ++i)
    CHECK(loaded.parameters[i].shards[0].equal(state.parameters[i].shards[0]));
}

TEST_CASE("unmapped parameters, unmapped tensors and wrong configs are refused") {
  temp_dir dir;
  tiny_model model;
  auto conv = tiny_converter();
  auto state = tiny_state(model, false, true);
  cairn::parameter_state extra = state.parameters[0];
  extra.layout.name = "lm_head";
  state.parameters.push_back(extra);
  cairn::checkpoint_save_config save;
  save.path = dir / "hf";
  CHECK_THROWS_WITH_AS(cairn::external::save(state, comm, conv, model, save),
                       "parameter 'lm_head' has no external name in the tiny converter", cairn::error);

  state.parameters.pop_back();
  cairn::external::save(state, comm, conv, model, save);
  auto fewer = tiny_model{4, 1, 8};
  auto loaded = tiny_state(fewer, false, false);
  cairn::checkpoint_load_config load;
  load.path = dir / "hf";
  try {
    cairn::external::load(loaded, comm, conv, fewer, load);
    FAIL("loaded");
  } catch (cairn::checkpoint_error const& e) {
    std::string text = e.what();
    CHECK(text.find("model.layers.1.self_attn.q_proj.weight: in the checkpoint but not mapped by the tiny converter") !=
          std::string::npos);
  }

  auto config = cairn::read_json_file(dir / "hf" / "config.json").as_object();
  config["architectures"] = boost::json::array{"Other"};
  config["rope_theta"] = 10000;
  std::ofstream(dir / "hf" / "config.json") << boost::json::serialize(config);
  try {
    (void)cairn::external::load_config(conv, dir / "hf");
    FAIL("accepted");
  } catch (cairn::config_error const& e) {
    REQUIRE(e.errors().size() == 2);
    CHECK(e.errors()[0].message == R"('architectures' must be ["TinyForCausalLM"], got ["Other"])");
    CHECK(e.errors()[1].message == "unknown key 'rope_theta'");
  }
}
