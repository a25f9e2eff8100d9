// cairn-llama: the Llama family (llama, mistral, qwen2) in libtorch on cairn. This first step
// computes logits from a checkpoint, the contract external checks use (CONTRACT.md):
//
//     cairn-llama logits --tokens 1,5,9,2 pretrained.path=DIR pretrained.format=external
//         pretrained.load_config=model
//
// prints on standard output exactly one JSON object, {"logits": [[...], ...]}: one row per
// token, vocab_size float32 values each, computed in float32. The model is transformers':
// RMSNorm in float32, rotary position embedding with rotate_half over cat(freqs, freqs),
// key and value heads repeated for grouped-query attention, a causal softmax, a SiLU-gated MLP.
// Training comes next (#32).
#include <cairn/cairn.hpp>
#include <cairn/checkpoint/converters/llama.hpp>

#include <ATen/ATen.h>
#include <boost/describe/class.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace example {

/// cairn's trainer config (run, training, pretrained, device, comm) and the model.
struct llama_config : cairn::trainer_config {
  cairn::llama::model_config model;
  std::uint64_t seed = 1;
};
BOOST_DESCRIBE_STRUCT(llama_config, (cairn::trainer_config), (model, seed))
constexpr auto cairn_fields(llama_config const*) {
  using namespace cairn;
  return fields(field(&llama_config::model, "The model, with transformers' keys.", hint::architecture),
                field(&llama_config::seed, "Seed of the initial weights.", hint::core));
}

at::Tensor rms_norm(at::Tensor const& x, at::Tensor const& weight, double eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, true) + eps) * weight;
}

/// The second half of the last dimension, negated, then the first.
at::Tensor rotate_half(at::Tensor const& x) {
  auto half = x.size(-1) / 2;
  return at::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

/// The logits of `tokens` (one sequence, positions 0, 1, ...) under the weights `w`, by name.
at::Tensor forward(cairn::llama::model_config const& m, std::map<std::string, at::Tensor> const& w,
                   std::vector<std::int64_t> const& tokens) {
  at::NoGradGuard no_grad;
  auto get = [&](std::string const& name) -> at::Tensor const& { return w.at(name); };
  auto t = static_cast<std::int64_t>(tokens.size());
  auto d = m.head_size(), heads = m.num_attention_heads, kv_heads = m.num_key_value_heads;
  auto x = get("model.embed_tokens.weight").index_select(0, at::tensor(tokens, at::kLong));
  // Rotary position embedding: angle p * theta^(-2i/d) for the pair (i, i + d/2).
  auto inverse = 1.0 / at::pow(m.rope_theta, at::arange(0, d, 2, at::kFloat) / double(d));
  auto angles = at::outer(at::arange(t, at::kFloat), inverse);
  auto both = at::cat({angles, angles}, -1);
  auto cos = both.cos().unsqueeze(1), sin = both.sin().unsqueeze(1); // [t, 1, d]
  auto causal = at::ones({t, t}, at::kBool).triu(1);
  for (std::int64_t l = 0; l < m.num_hidden_layers; ++l) {
    auto block = "model.layers." + std::to_string(l) + ".";
    auto h = rms_norm(x, get(block + "input_layernorm.weight"), m.rms_norm_eps);
    auto project = [&](char const* name, std::int64_t n) {
      auto y = at::matmul(h, get(block + "self_attn." + name + ".weight").t());
      if (m.qkv_bias) y = y + get(block + "self_attn." + name + ".bias");
      return y.view({t, n, d});
    };
    auto q = project("q_proj", heads), k = project("k_proj", kv_heads), v = project("v_proj", kv_heads);
    q = q * cos + rotate_half(q) * sin;
    k = k * cos + rotate_half(k) * sin;
    k = k.repeat_interleave(heads / kv_heads, 1); // key-value head j serves query heads j * n .. j * n + n - 1
    v = v.repeat_interleave(heads / kv_heads, 1);
    auto scores = at::matmul(q.transpose(0, 1), k.transpose(0, 1).transpose(1, 2)) / std::sqrt(double(d));
    auto attention = at::softmax(scores.masked_fill(causal, -INFINITY), -1);
    auto out = at::matmul(attention, v.transpose(0, 1)).transpose(0, 1).reshape({t, heads * d});
    out = at::matmul(out, get(block + "self_attn.o_proj.weight").t());
    if (m.o_bias) out = out + get(block + "self_attn.o_proj.bias");
    x = x + out;
    h = rms_norm(x, get(block + "post_attention_layernorm.weight"), m.rms_norm_eps);
    auto gate = at::silu(at::matmul(h, get(block + "mlp.gate_proj.weight").t()));
    auto up = at::matmul(h, get(block + "mlp.up_proj.weight").t());
    x = x + at::matmul(gate * up, get(block + "mlp.down_proj.weight").t());
  }
  x = rms_norm(x, get("model.norm.weight"), m.rms_norm_eps);
  auto const& head = m.tie_word_embeddings ? get("model.embed_tokens.weight") : get("lm_head.weight");
  return at::matmul(x, head.t());
}

/// `cairn-llama logits --tokens 1,5,9,2 key=value...`: the model from `pretrained`, its logits.
int logits(std::vector<std::int64_t> const& tokens, llama_config cfg) {
  auto const& pretrained = cfg.pretrained;
  if (pretrained.path.empty())
    throw cairn::config_error(std::vector<cairn::diagnostic>{{"pretrained.path", "required: the model to run"}});
  cairn::comm::single_process comm;
  auto model = cfg.model;
  std::vector<std::pair<std::string, at::Tensor>> zeros;
  auto fill = [&] {
    zeros.clear();
    for (auto const& p : cairn::llama::parameters(model))
      zeros.emplace_back(p.name, at::zeros(std::vector<std::int64_t>(p.shape.begin(), p.shape.end()), at::kFloat));
  };
  auto load = pretrained;
  load.optimizer_state = false;
  cairn::model_state state;
  if (pretrained.format == cairn::checkpoint_format::external) {
    auto type = pretrained.model_type;
    if (type.empty())
      type = std::string(
          cairn::read_json_file(cairn::formats::external_config(pretrained.path)).at("model_type").as_string());
    auto const& conv = cairn::llama::converters().at(type);
    if (cairn::loads_architecture(pretrained.load_config))
      model = cairn::external::load_config(conv, pretrained.path, pretrained.model_type);
    fill();
    state = cairn::whole_state(zeros);
    cairn::external::load(state, comm, conv, model, load);
  } else {
    fill();
    state = cairn::whole_state(zeros);
    cairn::load_checkpoint(state, comm, load);
  }
  std::map<std::string, at::Tensor> weights;
  for (std::size_t i = 0; i < zeros.size(); ++i)
    weights[zeros[i].first] = state.parameters[i].shards[0].view(zeros[i].second.sizes());
  for (auto token : tokens)
    if (token < 0 || token >= model.vocab_size)
      throw cairn::config_error(
          std::vector<cairn::diagnostic>{{"--tokens", std::to_string(token) + " is not a token of a vocabulary of " +
                                                          std::to_string(model.vocab_size)}});
  auto out = forward(model, weights, tokens).contiguous();
  auto const* values = out.data_ptr<float>();
  std::string text = "{\"logits\": [";
  char number[32];
  for (std::int64_t r = 0; r < out.size(0); ++r) {
    text += r ? ", [" : "[";
    for (std::int64_t c = 0; c < out.size(1); ++c) {
      std::snprintf(number, sizeof number, "%.9g", double(values[r * out.size(1) + c]));
      text += (c ? ", " : "") + std::string(number);
    }
    text += "]";
  }
  std::printf("%s]}\n", text.c_str());
  return 0;
}

/// "1,5,9,2" as tokens, or nothing.
std::optional<std::vector<std::int64_t>> parse_tokens(std::string_view text) {
  std::vector<std::int64_t> out;
  while (!text.empty()) {
    auto comma = text.find(',');
    auto part = text.substr(0, comma);
    std::int64_t value = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (ec != std::errc() || end != part.data() + part.size()) return std::nullopt;
    out.push_back(value);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  if (out.empty()) return std::nullopt;
  return out;
}

} // namespace example

int main(int argc, char** argv) {
  if (argc < 4 || std::string_view(argv[1]) != "logits" || std::string_view(argv[2]) != "--tokens") {
    std::fprintf(stderr, "usage: cairn-llama logits --tokens 1,5,9,2 [key.path=value ...]\n");
    return 2;
  }
  auto tokens = example::parse_tokens(argv[3]);
  if (!tokens) {
    std::fprintf(stderr, "cairn-llama logits: --tokens needs token ids separated by commas, got '%s'\n", argv[3]);
    return 2;
  }
  argv[3] = argv[0];
  argv += 3;
  argc -= 3;
  cairn::command_line_options options;
  options.program = "cairn-llama";
  options.description = "Computes the logits of a Llama-family model (cairn-llama logits --tokens ...).";
  auto cfg = cairn::parse_command_line<example::llama_config>(argc, argv, options);
  if (!cfg) return cfg.exit_status();
  return cairn::exit_status("cairn-llama logits", [&] { return example::logits(*tokens, std::move(*cfg)); });
}
