// Definitions of <cairn/checkpoint/converters/llama_model.hpp>: inline in a header-only build,
// compiled once by <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/converters/llama_model.hpp>
#include <cairn/checkpoint/layout.hpp>

#include <cstdint>
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

} // namespace cairn::llama
