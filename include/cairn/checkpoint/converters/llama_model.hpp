#pragma once

// The Llama family of transformers (Llama, Mistral, Qwen2 dense) as cairn holds them: the
// model's config and its parameters under Hugging Face's names, with how tensor parallelism
// splits each. No libtorch: a trainer builds its model from these, and the converters
// (<cairn/checkpoint/converters/llama.hpp>) map them to transformers' config.json and back.

#include <cairn/checkpoint/layout.hpp>
#include <cairn/config/check.hpp>
#include <cairn/config/field.hpp>
#include <cairn/config/hint.hpp>
#include <cairn/config/validation.hpp>
#include <cairn/detail/decl.hpp>

#include <boost/describe/class.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cairn::llama {

/// A Llama-family model: token embedding, `num_hidden_layers` blocks of RMSNorm, grouped-query
/// attention with rotary position embedding (`rotate_half`, as transformers computes it) and a
/// SiLU-gated MLP, a final RMSNorm and a head, tied to the embedding or not. The keys are
/// transformers' own.
struct model_config {
  std::int64_t vocab_size = 32000;
  std::int64_t hidden_size = 4096;
  std::int64_t intermediate_size = 11008;
  std::int64_t num_hidden_layers = 32;
  std::int64_t num_attention_heads = 32;
  std::int64_t num_key_value_heads = 32;
  std::optional<std::int64_t> head_dim; ///< unset: hidden_size / num_attention_heads
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000;
  std::int64_t max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  bool qkv_bias = false; ///< biases of the query, key and value projections (Qwen2's, Llama's attention_bias)
  bool o_bias = false;   ///< a bias of the output projection (Llama's attention_bias)
  /// Mistral's and Qwen2's sliding attention window. Not implemented: unset, or at least
  /// max_position_embeddings (where it never binds).
  std::optional<std::int64_t> sliding_window;
  /// Dropout on the attention probabilities in training (transformers' `attention_dropout`).
  double attention_dropout = 0;

  /// The width of a head.
  [[nodiscard]] std::int64_t head_size() const { return head_dim.value_or(hidden_size / num_attention_heads); }

  /// Heads that split evenly, key-value heads that divide the query heads.
  void validate(validation& v) {
    if (num_attention_heads % num_key_value_heads != 0)
      v.error("num_key_value_heads", "must divide num_attention_heads (" + std::to_string(num_attention_heads) +
                                         "), got " + std::to_string(num_key_value_heads));
    if (sliding_window && *sliding_window < max_position_embeddings)
      v.error("sliding_window", "is " + std::to_string(*sliding_window) + ", shorter than max_position_embeddings (" +
                                    std::to_string(max_position_embeddings) +
                                    "): sliding-window attention is not implemented");
    if (head_size() % 2 != 0)
      v.error("head_dim", "is " + std::to_string(head_size()) + ": rotary embedding rotates pairs, it must be even");
    if (!head_dim && hidden_size % num_attention_heads != 0)
      v.error("head_dim", "unset, and hidden_size (" + std::to_string(hidden_size) +
                              ") does not split into num_attention_heads (" + std::to_string(num_attention_heads) +
                              ") heads: set it");
  }
};
BOOST_DESCRIBE_STRUCT(model_config, (),
                      (vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
                       num_key_value_heads, head_dim, rms_norm_eps, rope_theta, max_position_embeddings,
                       tie_word_embeddings, qkv_bias, o_bias, sliding_window, attention_dropout))

constexpr auto cairn_fields(model_config const*) {
  using namespace cairn;
  using m = model_config;
  return fields(field(&m::vocab_size, "Tokens of the vocabulary.", hint::architecture, check::positive),
                field(&m::hidden_size, "Width of the residual stream.", hint::architecture, check::positive),
                field(&m::intermediate_size, "Width of the MLP.", hint::architecture, check::positive),
                field(&m::num_hidden_layers, "Transformer blocks.", hint::architecture, check::positive),
                field(&m::num_attention_heads, "Query heads.", hint::architecture, check::positive),
                field(&m::num_key_value_heads, "Key and value heads (grouped-query attention).", hint::architecture,
                      check::positive),
                field(&m::head_dim, "Width of a head. Unset: hidden_size / num_attention_heads.", hint::architecture,
                      check::positive),
                field(&m::rms_norm_eps, "Epsilon of the RMS norms.", hint::architecture, check::positive),
                field(&m::rope_theta, "Base of the rotary position embedding.", hint::architecture, check::positive),
                field(&m::max_position_embeddings, "Longest sequence.", hint::architecture, check::positive),
                field(&m::tie_word_embeddings, "The head is the token embedding.", hint::architecture),
                field(&m::qkv_bias, "Biases of the query, key and value projections.", hint::architecture),
                field(&m::o_bias, "A bias of the attention's output projection.", hint::architecture),
                field(&m::sliding_window,
                      "Sliding attention window: not implemented, so unset or at least max_position_embeddings.",
                      hint::architecture, check::positive),
                field(&m::attention_dropout, "Dropout on the attention probabilities, in training only.", hint::feature,
                      check::in_range(0.0, 0.95)));
}

/// A parameter of the model: its name (transformers'), shape, and how a tensor-parallel group
/// splits it (column-parallel projections and the vocabulary by rows, row-parallel projections
/// by columns, norms and the output bias whole).
struct parameter {
  std::string name;
  std::vector<std::uint64_t> shape;
  tensor_split split;
};

/// Every parameter of `model`, in transformers' order: the embedding, each block's, the final
/// norm, the head (when not tied).
CAIRN_DECL std::vector<parameter> parameters(model_config const& model);

/// The elements of the parameters of `model`, computed from its config alone without
/// listing them; nothing when they overflow 64 bits.
CAIRN_DECL std::optional<std::uint64_t> parameter_elements(model_config const& model);

} // namespace cairn::llama

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/converters/impl/llama_model.ipp>
#endif
