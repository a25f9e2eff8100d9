// Definitions of <cairn/checkpoint/converters/llama.hpp>: inline in a header-only build,
// compiled once by <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/converters/llama.hpp>
#include <cairn/checkpoint/converters/llama_model.hpp>
#include <cairn/checkpoint/external.hpp>
#include <cairn/checkpoint/weight_rule.hpp>
#include <cairn/error.hpp>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace cairn::llama {

namespace detail {
inline std::int64_t integer_at(boost::json::object const& ours, char const* key) {
  auto const& v = ours.at(key);
  return v.is_int64() ? v.get_int64() : static_cast<std::int64_t>(v.as_uint64());
}
} // namespace detail

CAIRN_DECL external::converter<model_config> converter(std::string const& model_type) {
  char const* architecture = model_type == "llama"     ? "LlamaForCausalLM"
                             : model_type == "mistral" ? "MistralForCausalLM"
                             : model_type == "qwen2"   ? "Qwen2ForCausalLM"
                                                       : nullptr;
  if (!architecture)
    throw config_error(std::vector<diagnostic>{
        {"model_type", "\"" + model_type + "\" is not a built-in Llama-family type (llama, mistral, qwen2)"}});
  external::config_mapping mapping;
  mapping.constant("architectures", boost::json::array{architecture});
  for (auto key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                   "num_key_value_heads", "rms_norm_eps", "rope_theta", "max_position_embeddings",
                   "tie_word_embeddings", "attention_dropout"})
    mapping.renamed(key, key);
  mapping.computed(
      "head_dim",
      [](boost::json::object const& ours) -> boost::json::value {
        if (auto const* d = ours.if_contains("head_dim"); d && !d->is_null()) return *d;
        return detail::integer_at(ours, "hidden_size") / detail::integer_at(ours, "num_attention_heads");
      },
      [](boost::json::value const& v, boost::json::object& ours) {
        if (!v.is_null()) ours["head_dim"] = v;
      });
  mapping.constant("hidden_act", "silu");
  // Rotary scaling is not implemented: null, or transformers' explicit {"rope_type": "default"}.
  mapping.computed(
      "rope_scaling", [](boost::json::object const&) -> boost::json::value { return nullptr; },
      [](boost::json::value const& v, boost::json::object&) {
        auto const* object = v.if_object();
        auto const* type = object ? object->if_contains("rope_type") : nullptr;
        if (object && !type) type = object->if_contains("type");
        bool plain = v.is_null() || (object && type && *type == "default");
        if (!plain)
          throw checkpoint_error(checkpoint_errc::mismatch,
                                 "'rope_scaling' must be null or {\"rope_type\": \"default\"} (scaled rotary "
                                 "embeddings are not implemented), got " +
                                     cairn::detail::compact(v));
      });
  // Left out or null, num_key_value_heads is num_attention_heads (Llama 1's configs), as
  // transformers takes it; Mistral's sliding_window, left out, is transformers' 4096.
  mapping.after_reading([mistral = model_type == "mistral"](boost::json::object& ours) {
    if (auto const* kv = ours.if_contains("num_key_value_heads");
        (!kv || kv->is_null()) && ours.contains("num_attention_heads"))
      ours["num_key_value_heads"] = ours.at("num_attention_heads");
    if (mistral && !ours.contains("sliding_window")) ours["sliding_window"] = 4096;
  });
  // What transformers writes that does not change the model's function.
  for (auto key : {"bos_token_id", "eos_token_id", "pad_token_id", "use_cache", "initializer_range", "torch_dtype",
                   "transformers_version", "_name_or_path"})
    mapping.ignored(key);
  if (model_type == "llama") {
    mapping.computed(
        "attention_bias",
        [](boost::json::object const& ours) -> boost::json::value {
          if (ours.at("qkv_bias") != ours.at("o_bias"))
            throw config_error(std::vector<diagnostic>{
                {"qkv_bias", "differs from o_bias: a llama config.json has one attention_bias for both (qwen2 "
                             "has q, k and v biases alone)"}});
          return ours.at("qkv_bias");
        },
        [](boost::json::value const& v, boost::json::object& ours) {
          ours["qkv_bias"] = v;
          ours["o_bias"] = v;
        });
    mapping.constant("mlp_bias", false).constant("pretraining_tp", 1);
  } else if (model_type == "mistral") {
    mapping.renamed("sliding_window", "sliding_window").fixed("qkv_bias", false).fixed("o_bias", false);
  } else { // qwen2: q, k and v biases always; a window only where use_sliding_window says so
    mapping.fixed("qkv_bias", true).fixed("o_bias", false);
    mapping.constant("use_sliding_window", false).ignored("sliding_window").ignored("max_window_layers");
  }
  external::converter<model_config> out;
  out.model_type = model_type;
  out.config = std::move(mapping);
  out.weights = [](model_config const& model) {
    std::vector<external::weight_rule> rules;
    for (auto const& p : parameters(model)) rules.push_back(external::renamed(p.name, p.name));
    return rules;
  };
  out.elements = [](model_config const& model) { return parameter_elements(model); };
  // transformers before 4.31 saved each layer's rotary frequencies, a buffer it computes.
  out.skipped = [](std::string const& name) { return name.ends_with(".self_attn.rotary_emb.inv_freq"); };
  return out;
}

CAIRN_DECL external::converter_registry<model_config>& converters() {
  static external::converter_registry<model_config> registry = [] {
    external::converter_registry<model_config> built_in;
    for (auto type : {"llama", "mistral", "qwen2"}) built_in.add(converter(type));
    return built_in;
  }();
  return registry;
}

} // namespace cairn::llama
