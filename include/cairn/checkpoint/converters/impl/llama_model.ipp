// Definitions of <cairn/checkpoint/converters/llama_model.hpp>: inline in a header-only build,
// compiled once by <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/converters/llama_model.hpp>
#include <cairn/checkpoint/layout.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cairn::llama {

CAIRN_DECL std::vector<parameter> parameters(model_config const& m) {
  auto h = static_cast<std::uint64_t>(m.hidden_size), v = static_cast<std::uint64_t>(m.vocab_size),
       i = static_cast<std::uint64_t>(m.intermediate_size), d = static_cast<std::uint64_t>(m.head_size()),
       q = d * static_cast<std::uint64_t>(m.num_attention_heads),
       kv = d * static_cast<std::uint64_t>(m.num_key_value_heads);
  using enum tensor_split;
  std::vector<parameter> out{{"model.embed_tokens.weight", {v, h}, rows}};
  for (std::int64_t l = 0; l < m.num_hidden_layers; ++l) {
    auto block = "model.layers." + std::to_string(l) + ".";
    out.push_back({block + "input_layernorm.weight", {h}, none});
    for (auto [name, rows_of] : {std::pair{"q_proj", q}, std::pair{"k_proj", kv}, std::pair{"v_proj", kv}}) {
      out.push_back({block + "self_attn." + name + ".weight", {rows_of, h}, rows});
      if (m.qkv_bias) out.push_back({block + "self_attn." + name + ".bias", {rows_of}, rows});
    }
    out.push_back({block + "self_attn.o_proj.weight", {h, q}, columns});
    if (m.o_bias) out.push_back({block + "self_attn.o_proj.bias", {h}, none});
    out.push_back({block + "post_attention_layernorm.weight", {h}, none});
    out.push_back({block + "mlp.gate_proj.weight", {i, h}, rows});
    out.push_back({block + "mlp.up_proj.weight", {i, h}, rows});
    out.push_back({block + "mlp.down_proj.weight", {h, i}, columns});
  }
  out.push_back({"model.norm.weight", {h}, none});
  if (!m.tie_word_embeddings) out.push_back({"lm_head.weight", {v, h}, rows});
  return out;
}

CAIRN_DECL std::optional<std::uint64_t> parameter_elements(model_config const& m) {
  bool overflow = false; // any step below past 64 bits
  auto times = [&](std::uint64_t a, std::uint64_t b) {
    std::uint64_t out = 0;
    overflow = overflow || __builtin_mul_overflow(a, b, &out);
    return out;
  };
  auto plus = [&](std::uint64_t a, std::uint64_t b) {
    std::uint64_t out = 0;
    overflow = overflow || __builtin_add_overflow(a, b, &out);
    return out;
  };
  auto h = static_cast<std::uint64_t>(m.hidden_size), v = static_cast<std::uint64_t>(m.vocab_size),
       i = static_cast<std::uint64_t>(m.intermediate_size), d = static_cast<std::uint64_t>(m.head_size());
  auto q = times(d, static_cast<std::uint64_t>(m.num_attention_heads));
  auto kv = times(d, static_cast<std::uint64_t>(m.num_key_value_heads));
  // A block: q, k, v and o projections, gate, up and down, two norms, the biases asked for.
  auto layer = plus(plus(times(2, times(q, h)), times(2, times(kv, h))), plus(times(3, times(i, h)), times(2, h)));
  if (m.qkv_bias) layer = plus(layer, plus(q, times(2, kv)));
  if (m.o_bias) layer = plus(layer, h);
  auto total = times(layer, static_cast<std::uint64_t>(m.num_hidden_layers));
  total = plus(plus(total, times(m.tie_word_embeddings ? 1 : 2, times(v, h))), h);
  if (overflow) return std::nullopt;
  return total;
}

} // namespace cairn::llama
