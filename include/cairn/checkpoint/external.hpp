#pragma once
// cairn: requires libtorch

// The external format: another framework's checkpoint (Hugging Face's: config.json,
// model.safetensors or model-0000i-of-0000n.safetensors with model.safetensors.index.json),
// through a converter that maps the model config and the weights both ways. Weights only: the
// configs refuse optimizer state in this format before launch.

#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/plan.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/checkpoint/verify.hpp>
#include <cairn/checkpoint/weight_rule.hpp>
#include <cairn/comm/ref.hpp>
#include <cairn/config/json.hpp>
#include <cairn/detail/decl.hpp>

#include <ATen/core/Tensor.h>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cairn::external {

/// How a model config (as JSON) and an external config.json map onto each other: keys renamed,
/// constants written (and checked on load), keys ignored, values computed both ways.
class config_mapping {
public:
  /// Our `ours` (a dotted path in the model config) is their `theirs`.
  CAIRN_DECL config_mapping& renamed(std::string ours, std::string theirs);
  /// Their `theirs` is always `value`; a config.json that says otherwise is refused.
  CAIRN_DECL config_mapping& constant(std::string theirs, boost::json::value value);
  /// Their `theirs` means nothing to us: not written, skipped when read.
  CAIRN_DECL config_mapping& ignored(std::string theirs);
  /// Our `ours` is always `value` for this model type, which their config.json does not say
  /// (Qwen2's query, key and value biases): set when read; a model config that says otherwise
  /// cannot be written, refused naming `ours`.
  CAIRN_DECL config_mapping& fixed(std::string ours, boost::json::value value);
  /// Runs `finish` on our config's JSON once every key of theirs is read: defaults that depend
  /// on other keys (transformers' num_key_value_heads, when left out, is num_attention_heads).
  CAIRN_DECL config_mapping& after_reading(std::function<void(boost::json::object&)> finish);
  /// Their `theirs` is computed from our config, and sets ours when read.
  CAIRN_DECL config_mapping& computed(std::string theirs,
                                      std::function<boost::json::value(boost::json::object const&)> to_theirs,
                                      std::function<void(boost::json::value const&, boost::json::object&)> to_ours);

  /// Their config.json (less model_type) from our model config's JSON.
  [[nodiscard]] CAIRN_DECL boost::json::object to_external(boost::json::object const& ours) const;

  /// Their name of our key `ours` (a dotted path), where a rule renames it; else `ours`.
  [[nodiscard]] std::string theirs_of(std::string const& ours) const {
    auto found = theirs_of_.find(ours);
    return found == theirs_of_.end() ? ours : found->second;
  }

  /// Our model config's JSON from theirs. Keys no rule knows are errors, all listed, naming
  /// `source`; but `torch_dtype`, the element type of the files, which an export writes itself
  /// (when every tensor has one) and a load converts from, whatever it says.
  [[nodiscard]] CAIRN_DECL boost::json::object to_ours(boost::json::object const& theirs,
                                                       std::string const& source) const;

private:
  struct mapping_rule {
    std::string key;
    std::function<void(boost::json::object const&, boost::json::object&)> write;
    std::function<void(boost::json::value const&, boost::json::object&)> read;
  };
  CAIRN_DECL static boost::json::value const* find(boost::json::object const& in, std::string const& path);
  CAIRN_DECL static void set(boost::json::object& out, std::string const& path, boost::json::value const& v);
  std::vector<mapping_rule> rules_;
  std::vector<std::pair<std::string, boost::json::value>> fixed_; // ours -> its one value
  std::vector<std::function<void(boost::json::object&)>> after_reading_;
  std::map<std::string, std::string> theirs_of_; // renamed keys: ours -> theirs
};

/// Everything cairn needs to read and write another framework's checkpoints of a model.
template <class Model> struct converter {
  std::string model_type;
  config_mapping config;
  std::function<std::vector<weight_rule>(Model const&)> weights;
  /// Tensors of their checkpoints that mean nothing to the model, skipped when read instead of
  /// refused as unmapped (buffers an older writer saved, such as Llama's rotary `inv_freq`).
  std::function<bool(std::string const&)> skipped = {};
  /// The elements of the model's parameters, from its config alone (nothing: more than 64 bits
  /// hold). Given, `load_config` refuses a config.json whose model the checkpoint's files cannot
  /// hold, before any program allocates it (a hostile `vocab_size` or `num_hidden_layers`).
  std::function<std::optional<std::uint64_t>(Model const&)> elements = {};
};

/// `conv` applied to `model`: its config.json and weight rules, for `save_checkpoint` and
/// `load_checkpoint` (which take every format, this one included, given it).
///
///     cairn::save_checkpoint(state, comm, save, cairn::external::bind(llama, cfg.model));
template <class Model> model_converter bind(converter<Model> const& conv, Model const& model) {
  auto config = conv.config.to_external(to_json(model).as_object());
  config["model_type"] = conv.model_type;
  return {conv.model_type, std::move(config), conv.weights(model), conv.skipped};
}

namespace detail {
/// A config_error when `requested` (a config's model_type; empty: any) is not the converter's.
template <class Model> void check_model_type(converter<Model> const& conv, std::string const& requested) {
  if (!requested.empty() && requested != conv.model_type)
    throw config_error({{"model_type", "\"" + requested + "\" has no converter in this program (it converts \"" +
                                           conv.model_type + "\")"}});
}

/// The plan of a save in the external format, for the weight rules of a converter of
/// `model_type`; `external_config` is the config.json it writes. Collective.
CAIRN_DECL save_plan plan(model_state const& state, comm::communicator_ref comm, std::string const& model_type,
                          std::vector<weight_rule> const& rules, boost::json::object const& external_config,
                          checkpoint_save_config const& config);

/// The save and the load of the external format, for the weight rules of a converter of
/// `model_type`; `external_config` is the config.json a save writes.
CAIRN_DECL void save(model_state const& state, comm::communicator_ref comm, std::string const& model_type,
                     std::vector<weight_rule> const& rules, boost::json::object const& external_config,
                     checkpoint_save_config const& config);
CAIRN_DECL void load(model_state& state, comm::communicator_ref comm, std::string const& model_type,
                     std::vector<weight_rule> const& rules, checkpoint_load_config const& config, verification verify,
                     std::function<bool(std::string const&)> const& skipped = {});
} // namespace detail

/// Saves the model weights of `state` in the external format of `conv`, with `model` as its
/// config.json. Every parameter must be covered by a weight rule. Collective. Files (of at most
/// `parameters_per_file` elements) are written by rank i mod world size, each rule's parameters
/// gathered to the rank that writes their file alone, in bounded memory; rank 0 writes the
/// index and config.json.
template <class Model> void save(model_state const& state, comm::communicator_ref comm, converter<Model> const& conv,
                                 Model const& model, checkpoint_save_config const& config) {
  detail::check_model_type(conv, config.model_type);
  auto bound = bind(conv, model);
  detail::save(state, comm, bound.model_type, bound.weights, bound.config, config);
}

namespace detail {
/// The elements of every tensor in the `.safetensors` files of the external checkpoint at
/// `path`, read from their headers.
CAIRN_DECL std::uint64_t stored_elements(std::filesystem::path const& path);
/// A config_error naming config.json when a model of `elements` (nothing: beyond 64 bits)
/// cannot be in the files of `path`.
CAIRN_DECL void check_model_fits(std::filesystem::path const& path, std::optional<std::uint64_t> elements);
} // namespace detail

/// The model config of an external checkpoint, through the converter's config mapping. The
/// checkpoint's config.json must name the converter's model type; `model_type` (the load
/// config's, optional) must too when given.
template <class Model>
Model load_config(converter<Model> const& conv, std::filesystem::path const& path, std::string const& model_type = {}) {
  detail::check_model_type(conv, model_type);
  auto file = formats::external_config(path);
  auto document = cairn::detail::read_json(file, max_json_file_size);
  if (!document.is_object()) throw config_error({{file.string(), "config.json must be a JSON object"}});
  auto theirs = document.get_object();
  auto const* type = theirs.if_contains("model_type");
  if (!type || *type != boost::json::value(conv.model_type))
    throw config_error(
        {{file.string(), "model_type " + (type ? cairn::detail::compact(*type) : std::string("(none)")) +
                             " has no converter in this program (it converts \"" + conv.model_type + "\")"}});
  theirs.erase("model_type");
  try {
    return from_json<Model>(conv.config.to_ours(theirs, file.string()));
  } catch (config_error const& e) { // the model's checks, said in config.json's terms
    std::vector<diagnostic> named;
    for (auto const& d : e.errors()) {
      if (d.path == file.string()) { // the mapping's own, already naming the file
        named.push_back(d);
        continue;
      }
      auto key = conv.config.theirs_of(d.path);
      named.push_back({file.string() + ": " + key, d.message + (key != d.path ? " (the model's " + d.path + ")" : "")});
    }
    throw config_error(std::move(named));
  }
}

/// `load_config`, for a program about to make the model and load the checkpoint's weights
/// into it: with the converter's `elements`, a model the checkpoint's files cannot hold (a
/// config.json of a huge `vocab_size` or `num_hidden_layers`, a count past 64 bits) is refused
/// first, naming config.json, before anything is allocated for it.
template <class Model> Model load_config_to_load(converter<Model> const& conv, std::filesystem::path const& path,
                                                 std::string const& model_type = {}) {
  auto model = load_config(conv, path, model_type);
  if (conv.elements) detail::check_model_fits(path, conv.elements(model));
  return model;
}

/// Loads the model weights of an external checkpoint into `state` (any layout). `model` is the
/// config the weights are mapped with. Every element accounted for, as for cairn's own formats;
/// the optimizer state is zeroed. Collective (each rank reads what it needs).
template <class Model> void load(model_state& state, comm::communicator_ref comm, converter<Model> const& conv,
                                 Model const& model, checkpoint_load_config const& config,
                                 verification verify = verification::checksums) {
  detail::check_model_type(conv, config.model_type);
  detail::load(state, comm, conv.model_type, conv.weights(model), config, verify, conv.skipped);
}

} // namespace cairn::external

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/external.ipp>
#endif
