#pragma once
// cairn: requires libtorch

// Built-in converters of the Llama family, by transformers' model_type: "llama", "mistral" and
// "qwen2" (dense). Each maps config.json both ways and keeps tensor names as they are (cairn's
// Llama-family parameters carry transformers' names, `llama::parameters`), refusing what the
// model does not implement with the key named. A registry keyed by model_type holds them, and
// a program adds its own.

#include <cairn/checkpoint/converters/llama_model.hpp>
#include <cairn/checkpoint/external.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/error.hpp>

#include <map>
#include <string>
#include <vector>

namespace cairn::external {

/// Converters of one kind of model config by model_type: `at(type)` or a config_error on the key
/// `model_type` listing the types it has.
template <class Model> class converter_registry {
public:
  /// Adds `conv` (replacing the converter of its model type, if any).
  void add(converter<Model> conv) {
    auto type = conv.model_type;
    converters_.insert_or_assign(std::move(type), std::move(conv));
  }
  [[nodiscard]] converter<Model> const* find(std::string const& model_type) const {
    auto found = converters_.find(model_type);
    return found == converters_.end() ? nullptr : &found->second;
  }
  [[nodiscard]] converter<Model> const& at(std::string const& model_type) const {
    if (auto const* conv = find(model_type)) return *conv;
    std::string known;
    for (auto const& [type, c] : converters_) known += (known.empty() ? "" : ", ") + type;
    throw config_error(std::vector<diagnostic>{
        {"model_type", "\"" + model_type + "\" has no converter here (" + (known.empty() ? "none" : known) + ")"}});
  }
  [[nodiscard]] std::vector<std::string> model_types() const {
    std::vector<std::string> out;
    for (auto const& [type, c] : converters_) out.push_back(type);
    return out;
  }

private:
  std::map<std::string, converter<Model>> converters_;
};

} // namespace cairn::external

namespace cairn::llama {

/// The converter of `model_type`: "llama", "mistral" or "qwen2"; a config_error naming
/// `model_type` otherwise.
/// - Read, a config.json is refused, each key named, where it asks for what the model does not
///   implement: `rope_scaling` (but transformers' explicit default), an activation other than
///   SiLU, `mlp_bias`, `pretraining_tp` other than 1, a sliding window shorter than
///   `max_position_embeddings` (Qwen2's `use_sliding_window`), another architecture; keys it
///   does not know are refused too.
///   Generation settings (token ids, `use_cache`), `torch_dtype`, `initializer_range` and
///   `transformers_version` are skipped, and so are the `rotary_emb.inv_freq` tensors that
///   transformers before 4.31 saved (frequencies it computes).
/// - Written, a model the type cannot describe is refused: a Llama whose q, k, v and output
///   biases differ (one `attention_bias` says both), a Mistral with biases, a Qwen2 without its
///   q, k, v biases or with an output bias.
CAIRN_DECL external::converter<model_config> converter(std::string const& model_type);

/// The Llama-family converters of this program: the built-in ones, and any it adds.
CAIRN_DECL external::converter_registry<model_config>& converters();

} // namespace cairn::llama

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/converters/impl/llama.ipp>
#endif
