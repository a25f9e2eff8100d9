// cairn-llama: the Llama family (llama, mistral, qwen2) in libtorch on cairn: a trainer,
// tensor and data parallel, and the logits of any checkpoint, the contract external checks use
// (CONTRACT.md).
//
//     cairn-llama [--config FILE.json] [key.path=value ...]          (train, like cairn-train)
//     cairn launch -n 4 -- cairn-llama parallel.tensor=2 run.experiment_dir=runs/l
//     cairn-llama logits --tokens 1,5,9,2 pretrained.path=DIR pretrained.format=external
//         pretrained.load_config=model
//     cairn-llama convert input.path=... input.format=... output.path=... output.format=...
//
// `logits` prints on standard output exactly one JSON object, {"logits": [[...], ...]}: one row
// per token, vocab_size float32 values each, computed in float32. `convert` takes Hugging Face
// directories of the built-in types to cairn's formats and back; under `cairn launch` with
// `parallel.*` keys it writes the distributed checkpoint of that layout.
//
// Deterministic on CPU: the initial weights and the corpus are pure functions of the seed, and
// each checkpoint holds each rank's dropout generator and corpus position, so a run stopped at
// any iteration and resumed on as many ranks ends bitwise identical to an uninterrupted one.
#include <cairn/cairn.hpp>
#include <cairn/checkpoint/converters/llama.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../loop.hpp" // the command line, the training loop
#include "model.hpp"   // the model: its configs, data, forward pass and trainer

namespace example {

/// The model_type a Hugging Face directory's config.json names; a config_error naming the file
/// and the key otherwise.
std::string model_type_of(std::filesystem::path const& dir) {
  auto file = cairn::formats::external_config(dir);
  auto where = cairn::io::open_location(file.string()); // a file, or an object of s3://
  auto document =
      where.backend->guarantees().directories
          ? cairn::read_json_file(file)
          : cairn::parse_json(where.backend->read_all(where.key, cairn::max_config_file_size), file.string());
  auto const* type = document.is_object() ? document.get_object().if_contains("model_type") : nullptr;
  if (!type || !type->is_string())
    throw cairn::config_error(
        std::vector<cairn::diagnostic>{{file.string() + ": model_type", "missing, or not a string"}});
  return std::string(type->get_string());
}

/// This rank's state of `model` on `grid`: each parameter's block at ZeRO stage `zero_stage`
/// (`place_on_grid`), zero, weights alone.
cairn::model_state zero_state(cairn::llama::model_config const& model, cairn::comm::parallel_grid const& grid, int rank,
                              int zero_stage = 0) {
  using cairn::comm::axis;
  auto at = grid.coordinates(rank);
  cairn::model_state state;
  for (auto const& p : cairn::llama::parameters(model))
    cairn::add_parameter(state, p.name, p.shape,
                         cairn::place_on_grid(p.shape, p.split, at.tensor, grid.size(axis::tensor), at.data,
                                              grid.size(axis::data), zero_stage));
  return state;
}

/// `cairn-llama logits --tokens 1,5,9,2 key=value...`: the model from `pretrained`, under the
/// grid of `parallel`, its logits on rank 0.
int logits(std::vector<std::int64_t> const& tokens, llama_config cfg) {
  auto const& pretrained = cfg.pretrained;
  if (pretrained.path.empty())
    throw cairn::config_error(std::vector<cairn::diagnostic>{{"pretrained.path", "required: the model to run"}});
  if (!pretrained.model_weights)
    throw cairn::config_error(
        std::vector<cairn::diagnostic>{{"pretrained.model_weights", "is false: the logits need the model's weights"}});
  auto model = cfg.model;
  std::optional<cairn::external::converter<cairn::llama::model_config>> conv;
  if (pretrained.format == cairn::checkpoint_format::external) {
    auto type = pretrained.model_type.empty() ? model_type_of(pretrained.path) : pretrained.model_type;
    conv = cairn::llama::converters().at(type);
    auto theirs = cairn::external::load_config_to_load(*conv, pretrained.path, pretrained.model_type);
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
  refuse_too_large(model, grid.size(cairn::comm::axis::tensor), 1);
  auto comms = cairn::comm::connect(cfg.comm, false, grid, cfg.run.timeout());
  auto state = zero_state(model, grid, comms.world.rank());
  auto load = pretrained;
  load.optimizer_state = false;
  auto before = cairn::bytes_read();
  if (conv)
    cairn::external::load(state, comms.world, *conv, model, load);
  else
    cairn::load_checkpoint(state, comms.world, load);
  auto read = cairn::bytes_read() - before; // what this rank read, against what it holds
  cairn::emit(cairn::severity::info,
              {"rank " + std::to_string(comms.world.rank()),
               "read " + std::to_string(read.tensor_bytes) + " bytes of tensors and " +
                   std::to_string(read.header_bytes) + " of headers from " + std::to_string(read.files) +
                   " files, for its " + std::to_string(state.bytes(false)) + " bytes of weights"});
  std::map<std::string, at::Tensor> weights;
  for (auto const& p : state.parameters) {
    std::vector<std::int64_t> box(p.layout.shard.lengths.begin(), p.layout.shard.lengths.end());
    weights[p.layout.name] = p.shards[0].view(box);
  }
  auto vocab_begin = static_cast<std::int64_t>(state.parameters.front().layout.shard.offsets[0]);
  at::NoGradGuard no_grad;
  auto out = forward(model, weights, at::tensor(tokens, at::kLong).unsqueeze(0),
                     tensor_parallel{comms.tensor, c10::kCPU, vocab_begin, 0})
                 .squeeze(0)
                 .contiguous();
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

/// The converter of the run's external format, if it has one: the type it exports
/// (`training.export.model_type`), else that of its external `pretrained` (its model_type, or
/// config.json's). A config_error naming the key when they differ, or when an export has none.
std::optional<cairn::external::converter<cairn::llama::model_config>> run_converter(llama_config const& cfg) {
  using cairn::checkpoint_format;
  auto const& out = cfg.training.export_;
  bool exports = out.enabled() && out.format == checkpoint_format::external;
  std::string type = exports ? out.model_type : std::string();
  if (cfg.has_pretrained() && cfg.pretrained.format == checkpoint_format::external) {
    auto theirs = cfg.pretrained.model_type.empty() ? model_type_of(cfg.pretrained.path) : cfg.pretrained.model_type;
    if (!type.empty() && type != theirs)
      throw cairn::config_error(std::vector<cairn::diagnostic>{
          {"training.export.model_type",
           "is " + type + ", the pretrained model is " + theirs + ": cairn-llama exports the type it imports"}});
    type = theirs;
  }
  if (exports && type.empty())
    throw cairn::config_error(std::vector<cairn::diagnostic>{
        {"training.export.model_type", "required with training.export.format=external: llama, mistral or qwen2"}});
  if (type.empty()) return std::nullopt;
  auto const* conv = cairn::llama::converters().find(type);
  if (!conv)
    throw cairn::config_error(std::vector<cairn::diagnostic>{
        {exports ? "training.export.model_type" : "pretrained.model_type",
         "\"" + type + "\" is not a type cairn-llama converts (llama, mistral, qwen2)"}});
  return *conv;
}

/// Trains as `cfg` says: resumes, else starts from `pretrained`, else fresh; checkpoints and
/// exports on their schedules; stops on a signal, a shutdown or the last iteration.
int train(llama_config cfg) {
  if (cfg.device == cairn::device_type::cuda && !at::hasCUDA())
    throw cairn::config_error(std::vector<cairn::diagnostic>{{"device", "cuda is not available here"}});
  auto world_size = cairn::comm::environment_or_single().world_size;
  auto grid = grid_of(cfg, cfg.model, world_size); // before any rank waits
  auto comms = cairn::comm::connect(cfg.comm, cfg.device == cairn::device_type::cuda, grid, cfg.run.timeout(),
                                    cfg.training.checkpoint.local.copies());
  bool leader = comms.world.rank() == 0;
  cairn::manager_options options;
  options.log_progress = false; // it prints its own (loop.hpp)
  cairn::training_run run(cfg, &llama_config::model, comms.world, run_converter(cfg),
                          options);                                               // may apply pretrained's
  if (comms.transfers) run.manager().set_transfer_communicator(*comms.transfers); // local tier's copies
  grid_of(cfg, cfg.model, world_size);                                            // the final model fits too
  std::vector<cairn::diagnostic> problems;
  if (cfg.model.vocab_size < 128)
    problems.push_back({"model.vocab_size", "is " + std::to_string(cfg.model.vocab_size) +
                                                ": the corpus is ASCII text, one byte a token (at least 128)"});
  if (cfg.data.sequence_length > cfg.model.max_position_embeddings)
    problems.push_back({"data.sequence_length", "is " + std::to_string(cfg.data.sequence_length) +
                                                    ", longer than model.max_position_embeddings (" +
                                                    std::to_string(cfg.model.max_position_embeddings) + ")"});
  if (cfg.data.batch_size < grid.size(cairn::comm::axis::data))
    problems.push_back({"data.batch_size", "must be at least the data-parallel ranks (" +
                                               std::to_string(grid.size(cairn::comm::axis::data)) + ")"});
  if (!problems.empty()) throw cairn::config_error(std::move(problems));
  refuse_too_large(cfg.model, grid.size(cairn::comm::axis::tensor), 4);
  llama_trainer model(cfg, comms);
  auto start = run.start(model.state());
  model.started(run.started());
  report_start(run, start, leader);
  return train_loop(
      run, model.state(), cfg.training, start, leader, [&](std::int64_t it) { return model.step(it); },
      [](std::int64_t) {});
}

/// `cairn-llama convert ... parallel.*=...` on as many ranks as the layout has: the distributed
/// checkpoint of the model (from a Hugging Face directory of a built-in type, or any checkpoint)
/// as the ranks of that layout hold its weights (`zero_state`), each rank reading its part.
int convert_for_layout(cairn::convert_config const& config, llama_config const& cfg) {
  using cairn::checkpoint_format;
  std::vector<cairn::diagnostic> problems;
  if (config.output.format != checkpoint_format::distributed)
    problems.push_back({"output.format", "a conversion for a layout (parallel.*, or several ranks) writes the "
                                         "distributed format"});
  if (config.output.optimizer_state)
    problems.push_back({"output.optimizer_state", "a conversion writes the weights alone"});
  if (std::filesystem::exists(config.output.path))
    problems.push_back({"output.path", "'" + config.output.path.string() +
                                           "' exists: a conversion for a layout "
                                           "writes a new directory"});
  if (!problems.empty()) throw cairn::config_error(std::move(problems));
  std::optional<cairn::external::converter<cairn::llama::model_config>> conv;
  cairn::llama::model_config model;
  if (config.input.format == checkpoint_format::external) {
    conv = cairn::llama::converters().at(config.input.model_type.empty() ? model_type_of(config.input.path)
                                                                         : config.input.model_type);
    model = cairn::external::load_config_to_load(*conv, config.input.path, config.input.model_type);
  } else {
    model =
        cairn::parse_lenient<llama_config>(cairn::read_stored_metadata(config.input.path, config.input.format).config)
            .config.model;
  }
  auto grid = grid_of(cfg, model, cairn::comm::environment_or_single().world_size);
  refuse_too_large(model, grid.size(cairn::comm::axis::tensor), 1);
  auto comms = cairn::comm::connect(cfg.comm, false, grid, cfg.run.timeout());
  auto state = zero_state(model, grid, comms.world.rank(), int(cfg.parallel.zero_stage));
  cairn::checkpoint_load_config load;
  static_cast<cairn::checkpoint_load_metadata_config&>(load) = config.input;
  load.optimizer_state = false;
  if (conv)
    cairn::external::load(state, comms.world, *conv, model, load);
  else
    cairn::load_checkpoint(state, comms.world, load);
  llama_config stored;
  stored.model = model;
  stored.parallel = cfg.parallel;
  cairn::save_checkpoint(state, comms.world, config.output, cairn::to_json(stored));
  if (comms.world.rank() == 0)
    std::printf("converted %zu parameters to %s, as %d ranks (tensor %d x data %d, ZeRO stage %d) hold them\n",
                state.parameters.size(), config.output.path.c_str(), grid.world_size(),
                grid.size(cairn::comm::axis::tensor), grid.size(cairn::comm::axis::data), int(cfg.parallel.zero_stage));
  return 0;
}

/// `cairn-llama convert key=value...`: `cairn convert`, plus the external format of the built-in
/// Llama-family types both ways (the type from config.json, or output.model_type), in one
/// process, every parameter in float32.
int convert(std::vector<std::string> all_arguments) {
  bool optimizer_given = false;
  std::vector<std::string> arguments, layout; // the conversion's keys; parallel.* and comm, the layout's
  for (auto const& a : all_arguments) {
    optimizer_given = optimizer_given || a.starts_with("output.optimizer_state=");
    (a.starts_with("parallel.") || a.starts_with("comm=") || a.starts_with("run.") ? layout : arguments).push_back(a);
  }
  if (!optimizer_given) arguments.push_back("output.optimizer_state=false"); // the model holds none
  auto config = cairn::from_json<cairn::convert_config>(boost::json::object{}, arguments);
  if (!layout.empty() || cairn::comm::environment_or_single().world_size > 1)
    return convert_for_layout(config, cairn::from_json<llama_config>(boost::json::object{}, layout));
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
  std::optional<std::vector<std::int64_t>> tokens; // `logits --tokens 1,5,9,2`: argv[1..3]
  if (argc > 1 && std::string_view(argv[1]) == "logits") {
    if (argc < 4 || std::string_view(argv[2]) != "--tokens") {
      std::fprintf(stderr, "usage: cairn-llama logits --tokens 1,5,9,2 [key.path=value ...]\n");
      return 2;
    }
    tokens = example::parse_tokens(argv[3]);
    if (!tokens) {
      std::fprintf(stderr, "cairn-llama logits: --tokens needs token ids separated by commas, got '%s'\n", argv[3]);
      return 2;
    }
    example::drop_arguments(argc, argv, 3);
  }
  auto cfg = example::parse_trainer_command_line<example::llama_config>(
      argc, argv, "cairn-llama",
      "Trains a Llama-family model, checkpointing, resuming and exporting as configured.\n"
      "Also: cairn-llama logits --tokens 1,5,9,2 [key.path=value ...]\n"
      "      cairn-llama convert input.path=... input.format=... output.path=... output.format=...");
  if (!cfg) return cfg.exit_status();
  if (tokens)
    return cairn::exit_status("cairn-llama logits", [&] { return example::logits(*tokens, std::move(*cfg)); });
  return cairn::exit_status("cairn-llama", [&] { return example::train(std::move(*cfg)); });
}
