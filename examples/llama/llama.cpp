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
// Also `cairn-llama convert`: Hugging Face directories of the built-in types to cairn's formats
// and back. Training comes next (#32).
#include <cairn/cairn.hpp>
#include <cairn/checkpoint/converters/llama.hpp>

#include <ATen/ATen.h>
#include <boost/describe/class.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

namespace example {

/// cairn's trainer config (run, training, pretrained, device, comm) and the model.
struct llama_config : cairn::trainer_config {
  cairn::llama::model_config model;
  cairn::parallel_config parallel;
  std::uint64_t seed = 1;
};
BOOST_DESCRIBE_STRUCT(llama_config, (cairn::trainer_config), (model, parallel, seed))
constexpr auto cairn_fields(llama_config const*) {
  using namespace cairn;
  return fields(field(&llama_config::model, "The model, with transformers' keys.", hint::architecture),
                field(&llama_config::parallel,
                      "How the ranks share the model: q, k, v, gate and up split by rows (whole heads), o and "
                      "down by columns, the vocabulary (embedding and head) by rows; no pipeline yet.",
                      hint::core),
                field(&llama_config::seed, "Seed of the initial weights.", hint::core));
}

/// The grid of `world_size` ranks `cfg` asks for, or a config_error naming each key that does
/// not fit the job or the model.
cairn::comm::parallel_grid grid_of(llama_config const& cfg, cairn::llama::model_config const& m, int world_size) {
  std::vector<cairn::diagnostic> problems;
  if (cfg.parallel.pipeline != 1)
    problems.push_back({"parallel.pipeline", "is " + std::to_string(cfg.parallel.pipeline) +
                                                 ": cairn-llama has no pipeline stages yet (1)"});
  if (m.vocab_size < cfg.parallel.tensor || m.intermediate_size < cfg.parallel.tensor)
    problems.push_back({"parallel.tensor", "is " + std::to_string(cfg.parallel.tensor) +
                                               ": more ranks than rows of the vocabulary or of the MLP"});
  if (m.num_key_value_heads % cfg.parallel.tensor != 0)
    problems.push_back({"parallel.tensor", "is " + std::to_string(cfg.parallel.tensor) +
                                               ": it must divide model.num_key_value_heads (" +
                                               std::to_string(m.num_key_value_heads) + "), each rank whole heads"});
  std::optional<cairn::comm::parallel_grid> grid;
  try {
    grid = cfg.parallel.grid(world_size);
  } catch (cairn::config_error const& e) {
    problems.insert(problems.end(), e.errors().begin(), e.errors().end());
  }
  if (!problems.empty()) throw cairn::config_error(std::move(problems));
  return *grid;
}

at::Tensor rms_norm(at::Tensor const& x, at::Tensor const& weight, double eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, true) + eps) * weight;
}

/// The second half of the last dimension, negated, then the first.
at::Tensor rotate_half(at::Tensor const& x) {
  auto half = x.size(-1) / 2;
  return at::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

/// A tensor-parallel group's sums: forward only (the logits need no gradient).
struct tensor_group {
  cairn::comm::any_communicator& comm;
  /// The sum of every rank's `partial`.
  at::Tensor sum(at::Tensor partial) const {
    if (comm.size() == 1) return partial;
    partial = partial.contiguous();
    comm.all_reduce(partial, cairn::comm::reduce_op::sum);
    return partial;
  }
  /// Every rank's `part`, side by side along the last dimension.
  at::Tensor concatenated(at::Tensor const& part) const {
    if (comm.size() == 1) return part;
    std::vector<at::Tensor> parts;
    for (auto const& flat : comm.all_gather(part.contiguous())) parts.push_back(flat.view({part.size(0), -1}));
    return at::cat(parts, -1);
  }
};

/// The logits of `tokens` (one sequence, positions 0, 1, ...) under this rank's blocks `w` of
/// the weights, by name: whole heads of q, k and v, rows of gate and up, columns of o and
/// down, rows of the vocabulary starting at `vocab_begin`, summed and gathered over `group`.
at::Tensor forward(cairn::llama::model_config const& m, std::map<std::string, at::Tensor> const& w,
                   std::vector<std::int64_t> const& tokens, tensor_group const& group, std::int64_t vocab_begin) {
  at::NoGradGuard no_grad;
  auto get = [&](std::string const& name) -> at::Tensor const& { return w.at(name); };
  auto t = static_cast<std::int64_t>(tokens.size());
  auto d = m.head_size(), heads = m.num_attention_heads / group.comm.size(),
       kv_heads = m.num_key_value_heads / group.comm.size();
  auto const& embedding = get("model.embed_tokens.weight");
  auto ids = at::tensor(tokens, at::kLong) - vocab_begin; // this rank's rows of the vocabulary
  auto mine = (ids >= 0) & (ids < embedding.size(0));
  auto x = group.sum(embedding.index_select(0, ids.clamp(0, embedding.size(0) - 1)) * mine.unsqueeze(1));
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
    out = group.sum(at::matmul(out, get(block + "self_attn.o_proj.weight").t()));
    if (m.o_bias) out = out + get(block + "self_attn.o_proj.bias");
    x = x + out;
    h = rms_norm(x, get(block + "post_attention_layernorm.weight"), m.rms_norm_eps);
    auto gate = at::silu(at::matmul(h, get(block + "mlp.gate_proj.weight").t()));
    auto up = at::matmul(h, get(block + "mlp.up_proj.weight").t());
    x = x + group.sum(at::matmul(gate * up, get(block + "mlp.down_proj.weight").t()));
  }
  x = rms_norm(x, get("model.norm.weight"), m.rms_norm_eps);
  auto const& head = m.tie_word_embeddings ? embedding : get("lm_head.weight");
  return group.concatenated(at::matmul(x, head.t()));
}

/// The model_type a Hugging Face directory's config.json names; a config_error naming the file
/// and the key otherwise.
std::string model_type_of(std::filesystem::path const& dir) {
  auto file = cairn::formats::external_config(dir);
  auto document = cairn::read_json_file(file);
  auto const* type = document.is_object() ? document.get_object().if_contains("model_type") : nullptr;
  if (!type || !type->is_string())
    throw cairn::config_error(
        std::vector<cairn::diagnostic>{{file.string() + ": model_type", "missing, or not a string"}});
  return std::string(type->get_string());
}

/// A config_error when this rank's share of `model` (float32, its parameters over `ranks`) is
/// more than the memory of this machine: refused before any of it is allocated.
void refuse_too_large(cairn::llama::model_config const& model, int ranks) {
  std::uint64_t elements = 0;
  for (auto const& p : cairn::llama::parameters(model)) {
    std::uint64_t n = 1;
    for (auto d : p.shape) n *= d;
    elements += n;
  }
  auto bytes = 4 * elements / static_cast<std::uint64_t>(ranks);
  auto memory =
      static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  if (bytes > memory)
    throw cairn::config_error(std::vector<cairn::diagnostic>{
        {"model", "holds " + std::to_string(elements) + " parameters, " + std::to_string(bytes >> 20) +
                      " MiB a rank in float32: more than this machine's " + std::to_string(memory >> 20) +
                      " MiB (is it the model you meant? pretrained.load_config=model takes the checkpoint's)"}});
}

/// This rank's state of `model` on `grid`: each parameter's block (`place_on_grid`), zero.
cairn::model_state zero_state(cairn::llama::model_config const& model, cairn::comm::parallel_grid const& grid,
                              int rank) {
  using cairn::comm::axis;
  auto at = grid.coordinates(rank);
  cairn::model_state state;
  for (auto const& p : cairn::llama::parameters(model)) {
    auto place =
        cairn::place_on_grid(p.shape, p.split, at.tensor, grid.size(axis::tensor), at.data, grid.size(axis::data), 0);
    auto block = at::zeros({static_cast<std::int64_t>(place.shard.numel())}, at::kFloat); // may throw: first
    cairn::parameter_state param;
    param.layout = {p.name, p.shape, cairn::io::dtype::F32, place.replicated, std::move(place.shard)};
    param.shards.push_back(std::move(block));
    state.parameters.push_back(std::move(param));
  }
  return state;
}

/// `cairn-llama logits --tokens 1,5,9,2 key=value...`: the model from `pretrained`, under the
/// grid of `parallel`, its logits on rank 0.
int logits(std::vector<std::int64_t> const& tokens, llama_config cfg) {
  auto const& pretrained = cfg.pretrained;
  if (pretrained.path.empty())
    throw cairn::config_error(std::vector<cairn::diagnostic>{{"pretrained.path", "required: the model to run"}});
  auto model = cfg.model;
  std::optional<cairn::external::converter<cairn::llama::model_config>> conv;
  if (pretrained.format == cairn::checkpoint_format::external) {
    auto type = pretrained.model_type.empty() ? model_type_of(pretrained.path) : pretrained.model_type;
    conv = cairn::llama::converters().at(type);
    auto theirs = cairn::external::load_config(*conv, pretrained.path, pretrained.model_type);
    if (cairn::loads_architecture(pretrained.load_config))
      model = theirs;
    else if (cairn::to_json(theirs) != cairn::to_json(model))
      cairn::emit(cairn::severity::warning, {"model", "differs from the checkpoint's config.json; "
                                                      "pretrained.load_config=model takes it"});
  } else if (cairn::loads_architecture(pretrained.load_config)) { // the model the checkpoint's program stored
    auto stored = cairn::read_stored_metadata(pretrained.path, pretrained.format).config;
    if (!stored.is_object() || !stored.get_object().contains("model"))
      throw cairn::config_error(std::vector<cairn::diagnostic>{
          {pretrained.path.string(), "its stored config has no 'model' to load (pretrained.load_config=none and "
                                     "model.* keys give one)"}});
    model = cairn::parse_lenient<llama_config>(stored).config.model;
  }
  if (model.sliding_window && static_cast<std::int64_t>(tokens.size()) > *model.sliding_window)
    throw cairn::config_error(std::vector<cairn::diagnostic>{
        {"--tokens", std::to_string(tokens.size()) + " tokens, more than model.sliding_window (" +
                         std::to_string(*model.sliding_window) + "): sliding-window attention is not implemented"}});
  for (auto token : tokens)
    if (token < 0 || token >= model.vocab_size)
      throw cairn::config_error(
          std::vector<cairn::diagnostic>{{"--tokens", std::to_string(token) + " is not a token of a vocabulary of " +
                                                          std::to_string(model.vocab_size)}});
  auto grid = grid_of(cfg, model, cairn::comm::environment_or_single().world_size);
  refuse_too_large(model, grid.size(cairn::comm::axis::tensor));
  auto comms = cairn::comm::connect(cfg.comm, false, grid, cfg.run.timeout());
  auto state = zero_state(model, grid, comms.world.rank());
  auto load = pretrained;
  load.optimizer_state = false;
  if (conv)
    cairn::external::load(state, comms.world, *conv, model, load);
  else
    cairn::load_checkpoint(state, comms.world, load);
  std::map<std::string, at::Tensor> weights;
  for (auto const& p : state.parameters) {
    std::vector<std::int64_t> box(p.layout.shard.lengths.begin(), p.layout.shard.lengths.end());
    weights[p.layout.name] = p.shards[0].view(box);
  }
  auto vocab_begin = static_cast<std::int64_t>(state.parameters.front().layout.shard.offsets[0]);
  auto out = forward(model, weights, tokens, tensor_group{comms.tensor}, vocab_begin).contiguous();
  if (comms.world.rank() != 0) return 0;
  if (!at::isfinite(out).all().item<bool>())
    throw cairn::checkpoint_error(cairn::checkpoint_errc::invalid_state,
                                  "the logits hold NaN or infinite values (the model's weights do): JSON has no "
                                  "such numbers");
  // One JSON object; a line break after every 1,000 numbers keeps each line short enough for a
  // launcher that prefixes its ranks' lines (cairn launch cuts lines at 64 KiB).
  auto const* values = out.data_ptr<float>();
  std::string text = "{\"logits\": [";
  char number[32];
  for (std::int64_t r = 0; r < out.size(0); ++r) {
    text += r ? ",\n[" : "[";
    for (std::int64_t c = 0; c < out.size(1); ++c) {
      std::snprintf(number, sizeof number, "%.9g", double(values[r * out.size(1) + c]));
      text += (c ? (c % 1000 == 0 ? ",\n" : ", ") : "") + std::string(number);
    }
    text += "]";
  }
  std::printf("%s]}\n", text.c_str());
  return 0;
}

/// `cairn-llama convert key=value...`: `cairn convert`, plus the external format of the built-in
/// Llama-family types both ways (the type from config.json, or output.model_type), in one
/// process, every parameter in float32.
int convert(std::vector<std::string> arguments) {
  bool optimizer_given = false;
  for (auto const& a : arguments) optimizer_given = optimizer_given || a.starts_with("output.optimizer_state=");
  if (!optimizer_given) arguments.push_back("output.optimizer_state=false"); // the model holds none
  auto config = cairn::from_json<cairn::convert_config>(boost::json::object{}, arguments);
  auto type =
      config.input.format == cairn::checkpoint_format::external ? config.input.model_type : config.output.model_type;
  if (type.empty() && config.input.format == cairn::checkpoint_format::external)
    type = model_type_of(config.input.path);
  if (type.empty() && config.output.format == cairn::checkpoint_format::external)
    throw cairn::config_error(std::vector<cairn::diagnostic>{
        {"output.model_type", "required: the type of the Hugging Face model to write (llama, mistral, qwen2)"}});
  if (type.empty()) {
    std::printf("%s\n", cairn::convert_checkpoint(config).c_str());
    return 0;
  }
  auto config_of = [](cairn::llama::model_config const& model) {
    llama_config cfg;
    cfg.model = model;
    return cfg;
  };
  cairn::external::model_program<cairn::llama::model_config> program{
      [](cairn::llama::model_config const& model) {
        return zero_state(model, cairn::comm::parallel_grid(1, 1, 1, 1), 0); // every parameter whole
      },
      [&](cairn::llama::model_config const& model) { return cairn::to_json(config_of(model)); },
      [](boost::json::value const& stored) { return cairn::parse_lenient<llama_config>(stored).config.model; }};
  std::printf("%s\n", cairn::external::convert(config, cairn::llama::converters().at(type), program).c_str());
  return 0;
}

/// "1,5,9,2" as tokens, or nothing.
std::optional<std::vector<std::int64_t>> parse_tokens(std::string_view text) {
  std::vector<std::int64_t> out;
  if (text.empty() || text.back() == ',') return std::nullopt;
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
  if (argc > 1 && std::string_view(argv[1]) == "convert")
    return cairn::exit_status("cairn-llama convert", [&] { return example::convert({argv + 2, argv + argc}); });
  if (argc < 4 || std::string_view(argv[1]) != "logits" || std::string_view(argv[2]) != "--tokens") {
    std::fprintf(stderr, "usage: cairn-llama logits --tokens 1,5,9,2 [key.path=value ...]\n"
                         "       cairn-llama convert input.path=... input.format=... output.path=... "
                         "output.format=... [output.model_type=llama|mistral|qwen2]\n");
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
