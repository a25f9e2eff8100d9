// Definitions of <cairn/checkpoint/external.hpp>: inline in a header-only build, compiled once
// by <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/detail/executor.hpp>
#include <cairn/checkpoint/detail/gather.hpp>
#include <cairn/checkpoint/detail/loader.hpp>
#include <cairn/checkpoint/detail/save_files.hpp>
#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/external.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/comm/collectives.hpp>
#include <cairn/config/json.hpp>
#include <cairn/io/index.hpp>
#include <cairn/io/safetensors.hpp>
#include <cairn/io/safetensors_writer.hpp>
#include <cairn/progress.hpp>

#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace cairn::external {

CAIRN_DECL config_mapping& config_mapping::renamed(std::string ours, std::string theirs) {
  theirs_of_[ours] = theirs;
  rules_.push_back({theirs,
                    [=](boost::json::object const& in, boost::json::object& out) {
                      if (auto const* v = find(in, ours)) out[theirs] = *v;
                    },
                    [=](boost::json::value const& v, boost::json::object& out) { set(out, ours, v); }});
  return *this;
}

CAIRN_DECL config_mapping& config_mapping::constant(std::string theirs, boost::json::value value) {
  rules_.push_back({theirs, [=](boost::json::object const&, boost::json::object& out) { out[theirs] = value; },
                    [=](boost::json::value const& v, boost::json::object&) {
                      if (v != value)
                        throw checkpoint_error(checkpoint_errc::mismatch, "'" + theirs + "' must be " +
                                                                              cairn::detail::compact(value) + ", got " +
                                                                              cairn::detail::compact(v));
                    }});
  return *this;
}

CAIRN_DECL config_mapping& config_mapping::fixed(std::string ours, boost::json::value value) {
  fixed_.emplace_back(std::move(ours), std::move(value));
  return *this;
}

CAIRN_DECL config_mapping& config_mapping::after_reading(std::function<void(boost::json::object&)> finish) {
  after_reading_.push_back(std::move(finish));
  return *this;
}

CAIRN_DECL config_mapping& config_mapping::ignored(std::string theirs) {
  rules_.push_back({theirs, [](boost::json::object const&, boost::json::object&) {},
                    [](boost::json::value const&, boost::json::object&) {}});
  return *this;
}

CAIRN_DECL config_mapping&
config_mapping::computed(std::string theirs, std::function<boost::json::value(boost::json::object const&)> to_theirs,
                         std::function<void(boost::json::value const&, boost::json::object&)> to_ours) {
  rules_.push_back(
      {theirs, [=](boost::json::object const& in, boost::json::object& out) { out[theirs] = to_theirs(in); }, to_ours});
  return *this;
}

CAIRN_DECL boost::json::object config_mapping::to_external(boost::json::object const& ours) const {
  std::vector<diagnostic> problems;
  for (auto const& [key, value] : fixed_)
    if (auto const* v = find(ours, key); v && *v != value)
      problems.push_back({key, "must be " + cairn::detail::compact(value) + " for this model type, got " +
                                   cairn::detail::compact(*v)});
  if (!problems.empty()) throw config_error(std::move(problems));
  boost::json::object out;
  for (auto const& rule : rules_) rule.write(ours, out);
  return out;
}

CAIRN_DECL boost::json::object config_mapping::to_ours(boost::json::object const& theirs,
                                                       std::string const& source) const {
  boost::json::object out;
  std::vector<diagnostic> problems;
  for (auto const& entry : theirs) {
    auto rule = std::find_if(rules_.begin(), rules_.end(), [&](auto const& r) { return r.key == entry.key(); });
    if (rule == rules_.end()) {
      if (entry.key() == "torch_dtype") continue; // the files' element type, which cairn writes itself
      problems.push_back({source, "unknown key '" + std::string(entry.key()) + "'"});
      continue;
    }
    try {
      rule->read(entry.value(), out);
    } catch (std::exception const& e) {
      problems.push_back({source, e.what()});
    }
  }
  if (!problems.empty()) throw config_error(std::move(problems));
  for (auto const& [key, value] : fixed_) set(out, key, value);
  for (auto const& finish : after_reading_) finish(out);
  return out;
}

CAIRN_DECL boost::json::value const* config_mapping::find(boost::json::object const& in, std::string const& path) {
  boost::json::value const* at = nullptr;
  boost::json::object const* object = &in;
  for (auto part : cairn::detail::split_key(path)) {
    if (!object) return nullptr;
    at = object->if_contains(boost::json::string_view(part.data(), part.size()));
    if (!at) return nullptr;
    object = at->is_object() ? &at->get_object() : nullptr;
  }
  return at;
}

CAIRN_DECL void config_mapping::set(boost::json::object& out, std::string const& path, boost::json::value const& v) {
  boost::json::value root = std::move(out);
  auto parts = cairn::detail::split_key(path);
  cairn::detail::set_at(root, parts, v);
  out = std::move(root.get_object());
}

namespace detail {

CAIRN_DECL std::string shard_file(std::size_t i, std::size_t n) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return name;
}

/// A tensor an export writes: its name, element type and shape.
struct planned_tensor {
  std::string name;
  io::dtype dtype;
  std::vector<std::uint64_t> shape;
  friend bool operator==(planned_tensor const&, planned_tensor const&) = default;
};
BOOST_DESCRIBE_STRUCT(planned_tensor, (), (name, dtype, shape))
struct planned_outputs {
  std::vector<planned_tensor> tensors;
};
BOOST_DESCRIBE_STRUCT(planned_outputs, (), (tensors))

CAIRN_DECL std::vector<planned_tensor> describe_outputs(weight_rule const& rule,
                                                        std::vector<at::Tensor> const& theirs) {
  if (theirs.size() != rule.theirs.size())
    throw checkpoint_error(checkpoint_errc::mismatch, "the weight rule for '" + rule.theirs.front() + "' gave " +
                                                          std::to_string(theirs.size()) + " tensors for " +
                                                          std::to_string(rule.theirs.size()) + " names");
  std::vector<planned_tensor> out;
  for (std::size_t i = 0; i < theirs.size(); ++i)
    out.push_back({rule.theirs[i], to_dtype(theirs[i].scalar_type()),
                   std::vector<std::uint64_t>(theirs[i].sizes().begin(), theirs[i].sizes().end())});
  return out;
}

/// What `rule` makes of parameters of these layouts, found without their data: the rule runs
/// on meta tensors. Empty when it cannot (an operation without a meta kernel).
CAIRN_DECL std::optional<std::vector<planned_tensor>>
plan_outputs(weight_rule const& rule, std::map<std::string, parameter_layout> const& parameters) {
  std::vector<at::Tensor> metas;
  for (auto const& name : rule.ours) {
    auto const& p = parameters.at(name);
    std::vector<std::int64_t> shape(p.shape.begin(), p.shape.end());
    metas.push_back(
        at::empty(shape, at::TensorOptions().dtype(cairn::detail::to_scalar_type(p.dtype)).device(c10::kMeta)));
  }
  try {
    return describe_outputs(rule, rule.to_theirs(metas));
  } catch (std::exception const&) {
    return std::nullopt;
  }
}

/// Whether `file` records cairn's checksums at all (any tensor has one).
CAIRN_DECL bool records_checksums(io::safetensors_file const& file) {
  for (auto const& [key, value] : file.metadata())
    if (io::is_checksum_key(key)) return true;
  return false;
}

/// What each of `rules` writes, known before any data moves (the files' headers come first): the
/// rule run on meta tensors, or, for a rule that cannot be (an operation without a meta kernel),
/// run once on rank 0 over the whole parameters, what it found agreed by every rank. Collective.
inline std::vector<std::vector<planned_tensor>> plan_rules(model_state const& state, comm::communicator_ref comm,
                                                           std::vector<rank_layout> const& ranks,
                                                           std::map<std::string, parameter_layout> const& parameters,
                                                           std::vector<weight_rule> const& rules) {
  std::vector<std::vector<planned_tensor>> outputs(rules.size());
  for (std::size_t r = 0; r < rules.size(); ++r) {
    if (auto planned = plan_outputs(rules[r], parameters)) {
      outputs[r] = std::move(*planned);
      continue;
    }
    std::vector<at::Tensor> ours;
    for (auto const& name : rules[r].ours) {
      auto const& p = parameters.at(name);
      if (auto whole = cairn::detail::gather_whole(state, comm, ranks, p, 0, 0))
        ours.push_back(whole->view(std::vector<std::int64_t>(p.shape.begin(), p.shape.end())));
    }
    std::string text;
    comm::all_succeed(comm, "the weight rule for '" + rules[r].theirs.front() + "'", [&] {
      if (comm.rank() == 0)
        text = cairn::detail::compact(to_json(planned_outputs{describe_outputs(rules[r], rules[r].to_theirs(ours))}));
    });
    outputs[r] = parse<planned_outputs>(parse_json(comm::broadcast_string(comm, text))).tensors;
  }
  return outputs;
}

/// Refuses rules naming a parameter the state lacks, and parameters no rule names.
inline void check_coverage(std::map<std::string, parameter_layout> const& parameters,
                           std::vector<weight_rule> const& rules, std::string const& model_type) {
  std::set<std::string> covered;
  for (auto const& rule : rules)
    for (auto const& name : rule.ours) {
      if (!parameters.contains(name))
        throw checkpoint_error(checkpoint_errc::missing_tensor,
                               "the " + model_type + " converter expects a parameter '" + name + "'");
      covered.insert(name);
    }
  for (auto const& [name, p] : parameters)
    if (!covered.contains(name))
      throw checkpoint_error(checkpoint_errc::missing_tensor,
                             "parameter '" + name + "' has no external name in the " + model_type + " converter");
}

/// Whether the output `t` of `rule` is a parameter as it is, in parts its holders can write in place.
inline bool co_writable(weight_rule const& rule, planned_tensor const& t, std::vector<rank_layout> const& ranks,
                        std::map<std::string, parameter_layout> const& parameters) {
  if (!rule.unchanged || rule.ours.size() != 1 || rule.theirs.size() != 1) return false;
  auto const& p = parameters.at(rule.ours.front());
  return t.dtype == p.dtype && t.shape == p.shape && cairn::detail::part_runs(ranks, p).has_value();
}

CAIRN_DECL save_plan plan(model_state const& state, comm::communicator_ref comm, std::string const& model_type,
                          std::vector<weight_rule> const& rules, boost::json::object const& external_config,
                          checkpoint_save_config const& config) {
  comm::all_succeed(comm, "the state is not valid", [&] { state.check(); }); // on every rank together
  save_plan out;
  out.format = checkpoint_format::external;
  out.ranks = cairn::detail::all_rank_layouts(state, comm);
  auto parameters = cairn::detail::parameters_of(out.ranks);
  check_coverage(parameters, rules, model_type);
  auto outputs = plan_rules(state, comm, out.ranks, parameters, rules);

  // Files of whole rules, at most parameters_per_file elements each (a larger rule alone), file i
  // written by rank i mod world size.
  std::vector<std::uint64_t> sizes;
  for (auto const& planned : outputs) {
    std::uint64_t n = 0;
    for (auto const& t : planned) n += shard_layout::whole(t.shape).box_numel();
    sizes.push_back(n);
  }
  auto file_of = cairn::detail::pack_files(sizes, config.parameters_per_file);
  std::size_t files = file_of.empty() ? 1 : file_of.back() + 1;
  for (std::size_t f = 0; f < files; ++f)
    out.files.push_back({files == 1 ? std::string("model.safetensors") : shard_file(f, files),
                         static_cast<int>(f % static_cast<std::size_t>(comm.size())),
                         {{"format", "pt"}},
                         {}});
  io::safetensors_index index;
  std::uint64_t total = 0;
  for (std::size_t r = 0; r < rules.size(); ++r)
    for (std::size_t i = 0; i < outputs[r].size(); ++i) {
      auto const& t = outputs[r][i];
      auto& file = out.files[file_of[r]];
      file.items.push_back({t.name,
                            t.dtype,
                            cairn::detail::stored_type(t.dtype, config.data_type),
                            t.shape,
                            write_source::converted,
                            {},
                            0,
                            r,
                            i});
      if (co_writable(rules[r], t, out.ranks, parameters)) { // each holder writes its part in place
        file.items.back().source = write_source::co_written;
        file.items.back().parameter = rules[r].ours.front();
      }
      index.weight_map[t.name] = file.name;
      total += file.items.back().stored_bytes();
    }
  if (files > 1) {
    index.metadata["total_size"] = total;
    out.closing.push_back({"model.safetensors.index.json", io::index_text(index)});
  }
  // transformers' torch_dtype: the one element type of the tensors, unless the converter says.
  std::set<io::dtype> stored;
  for (auto const& file : out.files)
    for (auto const& item : file.items) stored.insert(item.stored);
  auto written = external_config;
  if (stored.size() == 1 && !written.contains("torch_dtype")) {
    auto type = *stored.begin();
    if (type == io::dtype::F32) written["torch_dtype"] = "float32";
    if (type == io::dtype::BF16) written["torch_dtype"] = "bfloat16";
    if (type == io::dtype::F16) written["torch_dtype"] = "float16";
  }
  out.closing.push_back({formats::external_config({}).string(), cairn::detail::pretty(written)});
  return out;
}

CAIRN_DECL void save(model_state const& state, comm::communicator_ref comm, std::string const& model_type,
                     std::vector<weight_rule> const& rules, boost::json::object const& external_config,
                     checkpoint_save_config const& config) {
  if (!config.model_weights) // what validation says of a parsed config, for one filled in by hand
    throw config_error(std::vector<diagnostic>{
        {"model_weights", "is false, but the external format holds the model's weights and nothing else"}});
  auto planned = plan(state, comm, model_type, rules, external_config, config);
  progress_scope progress("exporting", config.path.string(),
                          planned.bytes_per_rank(comm.size())[static_cast<std::size_t>(comm.rank())]);
  cairn::detail::execute(planned, config.path, state, comm, rules);
}

/// Which file holds each tensor of an external checkpoint: its index, or its one file.
inline std::map<std::string, std::string> external_weight_map(cairn::detail::loader& loader,
                                                              std::filesystem::path const& dir) {
  std::map<std::string, std::string> file_of;
  auto index_path = dir / "model.safetensors.index.json";
  bool indexed = cairn::detail::present(index_path);
  if (indexed && cairn::detail::present(dir / "model.safetensors"))
    throw checkpoint_error(checkpoint_errc::invalid_state,
                           dir.string() + ": holds both model.safetensors and model.safetensors.index.json; "
                                          "transformers reads the first, other tools the second: remove one");
  if (indexed) return io::read_index(index_path).weight_map;
  for (auto const& t : loader.file(dir / "model.safetensors").tensors()) file_of[t.name] = "model.safetensors";
  return file_of;
}

/// The tensors a rule reads (its `theirs`), each copied out of its file and checked.
inline std::vector<at::Tensor> read_theirs(weight_rule const& rule, std::map<std::string, std::string> const& file_of,
                                           cairn::detail::loader& loader, std::filesystem::path const& dir,
                                           verification verify, std::set<std::string>& used) {
  std::vector<at::Tensor> theirs;
  for (auto const& name : rule.theirs) {
    auto entry = file_of.find(name);
    if (entry == file_of.end())
      throw checkpoint_error(checkpoint_errc::missing_tensor, "tensor '" + name + "' is not in the checkpoint");
    auto& file = loader.file(dir / entry->second);
    auto const& info = file.at(name);
    // Files of other tools record no checksums; in a file cairn wrote, every tensor has one.
    if (verify == verification::checksums && records_checksums(file)) file.verify(info);
    std::vector<std::int64_t> shape(info.shape.begin(), info.shape.end());
    auto t = at::empty(shape, at::TensorOptions().dtype(cairn::detail::to_scalar_type(info.dtype)));
    auto bytes = file.bytes(info);
    std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
    cairn::detail::read_counts().tensor_bytes.fetch_add(bytes.size(), std::memory_order_relaxed);
    theirs.push_back(t);
    used.insert(name);
  }
  return theirs;
}

/// Loads the rule's outputs (`ours`, whole) into the parameters of `state` they name.
inline void load_ours(model_state& state, weight_rule const& rule, std::vector<at::Tensor> const& ours,
                      cairn::detail::loader& loader, std::set<std::string>& loaded) {
  for (std::size_t i = 0; i < rule.ours.size(); ++i) {
    auto* p = state.find(rule.ours[i]);
    if (!p) continue;
    loaded.insert(rule.ours[i]);
    auto whole = ours[i].contiguous();
    std::vector<std::uint64_t> shape(whole.sizes().begin(), whole.sizes().end());
    if (shape != p->layout.shape) {
      loader.problem(rule.ours[i], "has another shape in the checkpoint");
      continue;
    }
    std::vector<cairn::detail::load_source> sources{{cairn::detail::tensor_bytes(static_cast<at::Tensor const&>(whole)),
                                                     to_dtype(whole.scalar_type()),
                                                     shard_layout::whole(p->layout.shape)}};
    loader.load(*p, 0, sources, rule.ours[i]);
  }
}

/// Loads the parameter of a `renamed` rule straight from its tensor in the file: the rank reads
/// the runs of it that it holds (the whole tensor where the file records a checksum to check),
/// converting the element type as it copies.
inline void load_renamed(model_state& state, weight_rule const& rule, std::map<std::string, std::string> const& file_of,
                         cairn::detail::loader& loader, std::filesystem::path const& dir, verification verify,
                         std::set<std::string>& used, std::set<std::string>& loaded) {
  auto const& name = rule.theirs.at(0);
  auto* p = state.find(rule.ours.at(0));
  auto entry = file_of.find(name);
  if (entry == file_of.end())
    throw checkpoint_error(checkpoint_errc::missing_tensor, "tensor '" + name + "' is not in the checkpoint");
  auto& file = loader.file(dir / entry->second);
  auto const& info = file.at(name);
  used.insert(name);
  loaded.insert(rule.ours[0]);
  if (info.shape != p->layout.shape) {
    loader.problem(rule.ours[0], "has another shape in the checkpoint");
    return;
  }
  // Files of other tools record no checksums; in a file cairn wrote, every tensor has one.
  auto check =
      verify == verification::checksums && records_checksums(file) ? verification::checksums : verification::none;
  std::vector<cairn::detail::load_source> sources{
      cairn::detail::source_from(file, info, shard_layout::whole(p->layout.shape), info.dtype, check)};
  loader.load(*p, 0, sources, rule.ours[0]);
}

CAIRN_DECL std::uint64_t stored_elements(std::filesystem::path const& path) {
  std::uint64_t elements = 0;
  for (auto const& file : safetensors_files(path)) { // each header bounded and checked against its file's size
    io::safetensors_file read(file);
    for (auto const& t : read.tensors()) elements += t.numel();
  }
  return elements;
}

CAIRN_DECL void check_model_fits(std::filesystem::path const& path, std::optional<std::uint64_t> elements) {
  auto file = formats::external_config(path).string();
  if (!elements)
    throw config_error({{file, "describes a model of more than 2^64 parameters: refused before it is made"}});
  auto stored = stored_elements(path);
  if (*elements > stored)
    throw config_error({{file, "describes a model of " + std::to_string(*elements) +
                                   " parameters; the checkpoint's .safetensors files hold " + std::to_string(stored) +
                                   " elements: refused before the model is made"}});
}

CAIRN_DECL void load(model_state& state, comm::communicator_ref comm, std::string const& model_type,
                     std::vector<weight_rule> const& rules, checkpoint_load_config const& config, verification verify,
                     std::function<bool(std::string const&)> const& skipped) {
  comm::all_succeed(comm, "the state is not valid", [&] { state.check(); }); // on every rank together
  progress_scope progress("loading", config.path.string(), state.bytes(false));
  auto weights_only = config;
  weights_only.model_weights = true;
  weights_only.optimizer_state = false;
  cairn::detail::loader loader(state, weights_only, {state.shard_names.at(0)}, verify);
  auto file_of = external_weight_map(loader, config.path);
  std::set<std::string> used, loaded, reported;
  // The rules whose tensors are not in the files: reported once each, below, with what the
  // files hold instead.
  std::vector<std::pair<std::string, std::vector<std::string>>> absent; // parameter, its absent tensors
  for (auto const& rule : rules) {
    bool wanted = std::any_of(rule.ours.begin(), rule.ours.end(), [&](auto const& n) { return state.find(n); });
    if (!wanted) continue;
    std::vector<std::string> gone;
    for (auto const& name : rule.theirs)
      if (!file_of.contains(name)) gone.push_back(name);
    if (!gone.empty()) {
      used.insert(rule.theirs.begin(), rule.theirs.end()); // those present are this rule's, not unmapped
      reported.insert(rule.ours.begin(), rule.ours.end());
      absent.emplace_back(rule.ours.front(), std::move(gone));
      continue;
    }
    try {
      if (rule.unchanged) { // each rank reads its own part of it, where it lies in the file
        load_renamed(state, rule, file_of, loader, config.path, verify, used, loaded);
        continue;
      }
      auto theirs = read_theirs(rule, file_of, loader, config.path, verify, used);
      load_ours(state, rule, rule.to_ours(theirs), loader, loaded);
    } catch (error const& e) {
      loader.problem(rule.ours.front(), e.what());
      reported.insert(rule.ours.begin(), rule.ours.end());
    }
  }
  for (auto& p : state.parameters) {
    if (!loaded.contains(p.layout.name) && !reported.contains(p.layout.name)) loader.missing(p.layout.name);
    loader.finish(p);
  }
  std::vector<std::string> unmapped;
  for (auto const& [name, file] : file_of)
    if (!used.contains(name) && !(skipped && skipped(name))) unmapped.push_back(name);
  // A tensor the converter looks for in vain and one it does not map, alike in name, are one
  // error: a renamed tensor.
  auto likeness = [](std::string const& a, std::string const& b) {
    std::size_t prefix = 0, suffix = 0, most = std::min(a.size(), b.size());
    while (prefix < most && a[prefix] == b[prefix]) ++prefix;
    while (suffix < most - prefix && a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix]) ++suffix;
    return prefix + suffix;
  };
  for (auto const& [parameter, gone] : absent) {
    std::string text;
    for (auto const& name : gone) {
      auto best = unmapped.end();
      std::size_t best_likeness = 0;
      for (auto it = unmapped.begin(); it != unmapped.end(); ++it)
        if (auto l = likeness(name, *it); l > best_likeness) best = it, best_likeness = l;
      text += (text.empty() ? "" : "; ") + std::string("tensor '") + name + "' is not in the checkpoint";
      if (best != unmapped.end() && 2 * best_likeness >= name.size()) {
        text +=
            ", which holds '" + *best + "' instead, a name the " + model_type + " converter does not map (renamed?)";
        unmapped.erase(best);
      }
    }
    loader.problem(parameter, text);
  }
  for (auto const& name : unmapped)
    loader.problem(name, "in the checkpoint but not mapped by the " + model_type + " converter");
  // Every tensor of the files where the index says: a second copy in another file is one that
  // transformers may load instead (it loads every file), so the two readers would differ.
  // (A file the index names two ways, "./a" and "a", is one file.)
  auto normal = [](std::string const& name) { return std::filesystem::path(name).lexically_normal().string(); };
  std::set<std::string> file_names;
  for (auto const& [name, file] : file_of) file_names.insert(normal(file));
  for (auto const& file_name : file_names) {
    try {
      for (auto const& t : loader.file(config.path / file_name).tensors())
        if (auto mapped = file_of.find(t.name); mapped == file_of.end())
          loader.problem(t.name, "in " + file_name + ", which model.safetensors.index.json does not map");
        else if (normal(mapped->second) != file_name)
          loader.problem(t.name, "in two files, " + file_name + " and " + mapped->second +
                                     " (the index maps it there): which copy is the model's?");
    } catch (error const& e) {
      loader.problem(file_name, e.what());
    }
  }
  loader.agree(comm);
  state.items.clear(); // whole tensors, no rank's items
  cairn::detail::after_load(state, checkpoint_metadata{}, false); // the weights alone: an optimizer starts afresh
}

} // namespace detail

} // namespace cairn::external
