// The built-in Llama-family converters: the parameters under transformers' names and shapes,
// config.json both ways for llama, mistral and qwen2, what each refuses, the registry, and an
// export loaded back bitwise.
#include <cairn/checkpoint/converters/llama.hpp>
#include <cairn/checkpoint/external.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/comm/single_process.hpp>
#include <cairn/io/safetensors.hpp>

#include <ATen/ATen.h>
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "../io/temp_dir.hpp"

namespace {

cairn::comm::single_process comm;

/// A small grouped-query model: 4 query heads of 16, 2 key-value heads.
cairn::llama::model_config small() {
  cairn::llama::model_config m;
  m.vocab_size = 50;
  m.hidden_size = 64;
  m.intermediate_size = 96;
  m.num_hidden_layers = 2;
  m.num_attention_heads = 4;
  m.num_key_value_heads = 2;
  m.max_position_embeddings = 128;
  return m;
}

/// `text` as the config.json of a directory; the directory.
std::filesystem::path with_config(std::filesystem::path const& dir, std::string const& text) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << text;
  return dir;
}

std::string load_error(cairn::external::converter<cairn::llama::model_config> const& conv,
                       std::filesystem::path const& dir) {
  try {
    (void)cairn::external::load_config(conv, dir);
  } catch (cairn::error const& e) {
    return e.what();
  }
  return "loaded";
}

} // namespace

TEST_CASE("a Llama-family model's parameters: transformers' names, its shapes, its tensor-parallel splits") {
  using cairn::tensor_split;
  auto m = small();
  auto params = cairn::llama::parameters(m);
  REQUIRE(params.size() == 1 + 2 * 9 + 2); // embedding, 9 a block, final norm, head
  CHECK(params.front().name == "model.embed_tokens.weight");
  CHECK(params.front().shape == std::vector<std::uint64_t>{50, 64});
  auto find = [&](std::string const& name) {
    for (auto const& p : params)
      if (p.name == name) return p;
    FAIL("no parameter " << name);
    return params.front();
  };
  CHECK(find("model.layers.1.self_attn.q_proj.weight").shape == std::vector<std::uint64_t>{64, 64});
  CHECK(find("model.layers.1.self_attn.k_proj.weight").shape == std::vector<std::uint64_t>{32, 64}); // 2 heads of 16
  CHECK(find("model.layers.1.self_attn.k_proj.weight").split == tensor_split::rows);
  CHECK(find("model.layers.0.self_attn.o_proj.weight").split == tensor_split::columns);
  CHECK(find("model.layers.0.mlp.down_proj.weight").shape == std::vector<std::uint64_t>{64, 96});
  CHECK(find("model.layers.0.post_attention_layernorm.weight").split == tensor_split::none);
  CHECK(params.back().name == "lm_head.weight");
  m.tie_word_embeddings = true;
  m.qkv_bias = true;
  m.head_dim = 8; // heads narrower than hidden / heads
  params = cairn::llama::parameters(m);
  CHECK(params.back().name == "model.norm.weight"); // the head is the embedding
  CHECK(find("model.layers.0.self_attn.v_proj.bias").shape == std::vector<std::uint64_t>{16});
  CHECK(find("model.layers.0.self_attn.o_proj.weight").shape == std::vector<std::uint64_t>{64, 32});
}

TEST_CASE(
    "a Llama-family model's parameter count, from its config alone, is the sum of its tensors; past 64 bits, none") {
  for (int variant = 0; variant < 4; ++variant) {
    CAPTURE(variant);
    auto m = small();
    m.qkv_bias = variant & 1;
    m.o_bias = variant == 2;
    m.tie_word_embeddings = variant >= 2;
    if (variant == 3) m.head_dim = 32;
    std::uint64_t sum = 0;
    for (auto const& p : cairn::llama::parameters(m)) {
      std::uint64_t n = 1;
      for (auto d : p.shape) n *= d;
      sum += n;
    }
    CHECK(cairn::llama::parameter_elements(m) == sum);
  }
  auto huge = small();
  huge.vocab_size = std::int64_t{1} << 62;
  CHECK_FALSE(cairn::llama::parameter_elements(huge));
  huge = small();
  huge.num_hidden_layers = std::int64_t{1} << 60;
  CHECK_FALSE(cairn::llama::parameter_elements(huge));
}

TEST_CASE("config.json both ways: llama, mistral and qwen2 write transformers' keys and read them back") {
  temp_dir dir;
  auto m = small();
  for (std::string type : {"llama", "mistral", "qwen2"}) {
    CAPTURE(type);
    auto model = m;
    model.qkv_bias = type == "qwen2";
    auto conv = cairn::llama::converters().at(type);
    auto config = conv.config.to_external(cairn::to_json(model).as_object());
    CHECK(config.at("hidden_size") == 64);
    CHECK(config.at("num_key_value_heads") == 2);
    CHECK(config.at("head_dim") == 16);
    CHECK(config.at("hidden_act") == "silu");
    CHECK(config.at("rope_scaling").is_null());
    CHECK(config.at("tie_word_embeddings") == false);
    if (type == "llama") CHECK(config.at("attention_bias") == false);
    if (type == "mistral") CHECK(config.at("sliding_window").is_null());
    if (type == "qwen2") CHECK(config.at("use_sliding_window") == false);
    CHECK_FALSE(config.contains("qkv_bias"));
    config["model_type"] = type;
    auto read = cairn::external::load_config(conv, with_config(dir / type, boost::json::serialize(config)));
    model.head_dim = model.head_size(); // written, and read back, explicitly
    CHECK(cairn::to_json(read) == cairn::to_json(model));
  }
}

TEST_CASE("config.json files as transformers writes them are read, and what the model lacks is refused by key") {
  temp_dir dir;
  auto conv = cairn::llama::converters().at("llama");
  // TinyLlama-1.1B's config.json.
  auto tiny_llama = R"({"architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 1,
    "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 5632, "max_position_embeddings": 2048, "model_type": "llama", "num_attention_heads": 32,
    "num_hidden_layers": 22, "num_key_value_heads": 4, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": null, "rope_theta": 10000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "transformers_version": "4.35.0", "use_cache": true, "vocab_size": 32000})";
  auto model = cairn::external::load_config(conv, with_config(dir / "tiny", tiny_llama));
  CHECK(model.hidden_size == 2048);
  CHECK(model.num_key_value_heads == 4);
  CHECK(model.head_size() == 64);
  CHECK(model.rms_norm_eps == doctest::Approx(1e-5));
  CHECK_FALSE(model.qkv_bias);
  // Qwen2-0.5B's: q, k, v biases though config.json does not say so, the head tied.
  auto qwen = R"({"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
    "intermediate_size": 4864, "max_position_embeddings": 131072, "max_window_layers": 24, "model_type": "qwen2",
    "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.40.1", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";
  auto q = cairn::external::load_config(cairn::llama::converters().at("qwen2"), with_config(dir / "qwen", qwen));
  CHECK(q.qkv_bias);
  CHECK_FALSE(q.o_bias);
  CHECK(q.tie_word_embeddings);
  CHECK(q.head_size() == 64);

  // Each thing the model does not implement, refused naming the key.
  auto refused = [&](std::string const& name, std::string const& from, std::string const& to) {
    std::string text = tiny_llama;
    auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
    return load_error(conv, with_config(dir / name, text));
  };
  CHECK(refused("rope", R"("rope_scaling": null)", R"("rope_scaling": {"type": "linear", "factor": 2.0})")
            .find("'rope_scaling' must be null") != std::string::npos);
  CHECK(refused("rope", R"("rope_scaling": null)", R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0})")
            .find("'rope_scaling' must be null") != std::string::npos);
  { // transformers' explicit default is no scaling
    std::string text = tiny_llama;
    std::string from = R"("rope_scaling": null)";
    text.replace(text.find(from), from.size(), R"("rope_scaling": {"rope_type": "default"})");
    CHECK_NOTHROW(static_cast<void>(cairn::external::load_config(conv, with_config(dir / "rope_default", text))));
  }
  CHECK(refused("act", R"("hidden_act": "silu")", R"("hidden_act": "gelu")").find("'hidden_act' must be \"silu\"") !=
        std::string::npos);
  CHECK(refused("tp", R"("pretraining_tp": 1)", R"("pretraining_tp": 2)").find("'pretraining_tp' must be 1") !=
        std::string::npos);
  CHECK(refused("unknown", R"("use_cache": true)", R"("use_cache": true, "layer_types": [])")
            .find("unknown key 'layer_types'") != std::string::npos);
  auto heads = refused("heads", R"("num_key_value_heads": 4)", R"("num_key_value_heads": 5)");
  CAPTURE(heads);
  CHECK(heads.find("num_key_value_heads: must divide num_attention_heads (32), got 5") != std::string::npos);
  auto mistral = R"({"architectures": ["MistralForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
    "max_position_embeddings": 32768, "sliding_window": 4096, "model_type": "mistral"})";
  auto windowed = load_error(cairn::llama::converters().at("mistral"), with_config(dir / "mistral", mistral));
  CAPTURE(windowed);
  CHECK(windowed.find("sliding_window: is 4096, shorter than max_position_embeddings (32768): sliding-window "
                      "attention is not implemented") != std::string::npos);
  // Left out, as Llama 1's configs leave it: one key-value head a query head, as transformers takes it.
  auto llama1 = refused("llama1", R"("num_key_value_heads": 4, )", "");
  CHECK(llama1 == "loaded");
  std::string no_kv = tiny_llama;
  no_kv.erase(no_kv.find(R"("num_key_value_heads": 4, )"), std::string(R"("num_key_value_heads": 4, )").size());
  CHECK(cairn::external::load_config(conv, with_config(dir / "no_kv", no_kv)).num_key_value_heads == 32);
  CHECK(refused("odd", R"("num_attention_heads": 32)", R"("num_attention_heads": 32, "head_dim": 15)")
            .find("head_dim: is 15: rotary embedding rotates pairs, it must be even") != std::string::npos);
  // Mistral's window, left out, is transformers' 4096: shorter than 32768 positions, refused.
  auto unwindowed = R"({"architectures": ["MistralForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
    "max_position_embeddings": 32768, "model_type": "mistral"})";
  CHECK(load_error(cairn::llama::converters().at("mistral"), with_config(dir / "unwindowed", unwindowed))
            .find("sliding_window: is 4096") != std::string::npos);
  std::string qwen_windowed = qwen;
  qwen_windowed.replace(qwen_windowed.find(R"("use_sliding_window": false)"), 27, R"("use_sliding_window": true)");
  CHECK(load_error(cairn::llama::converters().at("qwen2"), with_config(dir / "qwen_windowed", qwen_windowed))
            .find("'use_sliding_window' must be false") != std::string::npos);
}

TEST_CASE("a model its type cannot describe is not exported; the registry names the types it has") {
  auto m = small();
  m.qkv_bias = true; // and no output bias: a llama config.json cannot say that
  CHECK_THROWS_WITH(cairn::llama::converter("llama").config.to_external(cairn::to_json(m).as_object()),
                    doctest::Contains("qkv_bias: differs from o_bias"));
  CHECK_THROWS_WITH(cairn::llama::converter("mistral").config.to_external(cairn::to_json(m).as_object()),
                    doctest::Contains("qkv_bias: must be false for this model type, got true"));
  m.qkv_bias = false;
  CHECK_THROWS_WITH(cairn::llama::converter("qwen2").config.to_external(cairn::to_json(m).as_object()),
                    doctest::Contains("qkv_bias: must be true for this model type, got false"));
  CHECK_THROWS_WITH((void)cairn::llama::converters().at("gpt2"),
                    doctest::Contains("\"gpt2\" has no converter here (llama, mistral, qwen2)"));
  CHECK_THROWS_WITH(cairn::llama::converter("gpt2"), doctest::Contains("not a built-in Llama-family type"));
  // A program's own type, on the same model.
  auto mine = cairn::llama::converter("llama");
  mine.model_type = "my_llama";
  cairn::external::converter_registry<cairn::llama::model_config> registry = cairn::llama::converters();
  registry.add(mine);
  CHECK(registry.model_types() == std::vector<std::string>{"llama", "mistral", "my_llama", "qwen2"});
  CHECK(cairn::llama::converters().find("my_llama") == nullptr); // the program's copy, not the built-ins
}

TEST_CASE("an export of a Llama-family model: transformers' files and names, loaded back bitwise") {
  temp_dir dir;
  for (std::string type : {"llama", "qwen2"}) {
    CAPTURE(type);
    auto model = small();
    model.qkv_bias = type == "qwen2";
    model.tie_word_embeddings = type == "qwen2";
    std::vector<std::pair<std::string, at::Tensor>> weights;
    for (auto const& p : cairn::llama::parameters(model))
      weights.emplace_back(p.name, at::randn(std::vector<std::int64_t>(p.shape.begin(), p.shape.end())));
    auto state = cairn::whole_state(weights);
    auto const& conv = cairn::llama::converters().at(type);
    cairn::checkpoint_save_config save;
    save.path = dir / type;
    save.format = cairn::checkpoint_format::external;
    cairn::external::save(state, comm, conv, model, save);
    auto config = cairn::read_json_file(save.path / "config.json").as_object();
    CHECK(config.at("model_type") == boost::json::value(type));
    cairn::io::safetensors_file file(save.path / "model.safetensors");
    CHECK(file.metadata().at("format") == "pt");
    CHECK(file.tensors().size() == weights.size());
    CHECK(file.at("model.layers.1.self_attn.k_proj.weight").shape == std::vector<std::uint64_t>{32, 64});
    CHECK((file.find("lm_head.weight") != nullptr) == (type == "llama"));

    auto loaded_model = cairn::external::load_config(conv, save.path);
    CHECK(cairn::to_json(cairn::external::load_config_to_load(conv, save.path)) == cairn::to_json(loaded_model));
    // A config.json of a model larger than its files, or past 64 bits: refused before anything
    // is made of it.
    for (auto [key, value] :
         {std::pair{"vocab_size", std::int64_t{1} << 40}, std::pair{"num_hidden_layers", std::int64_t{3}},
          std::pair{"hidden_size", std::int64_t{1} << 62}}) {
      CAPTURE(key);
      auto hostile = dir / (type + "-" + key);
      std::filesystem::copy(save.path, hostile);
      auto edited = config;
      edited[key] = value;
      if (std::string(key) == "hidden_size") edited["head_dim"] = 16;
      std::ofstream(hostile / "config.json", std::ios::trunc) << boost::json::serialize(edited);
      CHECK_THROWS_WITH_AS((void)cairn::external::load_config_to_load(conv, hostile),
                           doctest::Contains("refused before"), cairn::config_error);
    }
    auto expected = model;
    expected.head_dim = model.head_size(); // written, and read back, explicitly
    CHECK(cairn::to_json(loaded_model) == cairn::to_json(expected));
    std::vector<std::pair<std::string, at::Tensor>> zeros;
    for (auto const& [name, t] : weights) zeros.emplace_back(name, at::zeros_like(t));
    auto loaded = cairn::whole_state(zeros);
    cairn::checkpoint_load_config load;
    load.path = save.path;
    load.format = cairn::checkpoint_format::external;
    cairn::external::load(loaded, comm, conv, loaded_model, load);
    // A directory with both forms of weights: transformers reads one, other tools the other; refused.
    if (type == "llama") {
      std::ofstream(save.path / "model.safetensors.index.json") << R"({"metadata": {}, "weight_map": {}})";
      CHECK_THROWS_WITH(cairn::external::load(loaded, comm, conv, loaded_model, load),
                        doctest::Contains("holds both model.safetensors and model.safetensors.index.json"));
      std::filesystem::remove(save.path / "model.safetensors.index.json");
      cairn::external::load(loaded, comm, conv, loaded_model, load);
    }
    for (std::size_t i = 0; i < weights.size(); ++i) {
      CAPTURE(weights[i].first);
      CHECK(loaded.parameters[i].shards[0].equal(weights[i].second.view({-1})));
    }
  }
}
