#pragma once
// A tiny model with a converter to an external ("tiny", Hugging Face-like) format: renamed,
// merged, split and transposed weights. For the external format's tests, in one process and
// across ranks.
#include <cairn/checkpoint/external.hpp>

#include <ATen/ATen.h>
#include <boost/describe/class.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace test_model {

struct tiny_model {
  std::int32_t hidden = 4;
  std::int32_t layers = 2;
  std::int32_t vocab = 8;
};
BOOST_DESCRIBE_STRUCT(tiny_model, (), (hidden, layers, vocab))

inline cairn::external::converter<tiny_model> tiny_converter() {
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

/// The tiny model's state, every element distinct: whole (one process), or this rank's flat
/// range of every parameter among `size` ranks.
inline cairn::model_state tiny_state(tiny_model const& m, bool flat, bool fill, int rank = 0, int size = 1) {
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
    auto total = p.layout.shard.box_numel();
    auto begin = total * std::uint64_t(rank) / std::uint64_t(size),
         end = total * std::uint64_t(rank + 1) / std::uint64_t(size);
    if (flat)
      p.layout.shard.flat = cairn::flat_range{begin, end};
    else
      begin = 0, end = total;
    auto n = static_cast<std::int64_t>(end - begin);
    auto first = next + double(begin);
    p.shards.push_back(fill ? at::arange(first, first + double(n)).to(at::kFloat) : at::zeros({n}));
    p.shards.push_back(at::full({n}, 5.0));
    next += double(total);
    state.parameters.push_back(std::move(p));
  }
  return state;
}

} // namespace test_model
