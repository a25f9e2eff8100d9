// Definitions of <cairn/checkpoint/external.hpp>: inline in a header-only build, compiled once
// by <cairn/checkpoint/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/detail/gather.hpp>
#include <cairn/checkpoint/detail/loader.hpp>
#include <cairn/checkpoint/detail/write_behind.hpp>
#include <cairn/checkpoint/external.hpp>
#include <cairn/checkpoint/files.hpp>
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

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace cairn::external {

CAIRN_DECL config_mapping& config_mapping::renamed(std::string ours, std::string theirs) {
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
                        throw error("'" + theirs + "' must be " + cairn::detail::compact(value) + ", got " +
                                    cairn::detail::compact(v));
                    }});
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

/// Our `ours` is their `theirs`, unchanged.
CAIRN_DECL weight_rule renamed(std::string ours, std::string theirs) {
  auto same = [](std::vector<at::Tensor> const& t) { return t; };
  return {{std::move(ours)}, {std::move(theirs)}, same, same};
}
/// Our 2-D `ours` is their `theirs` transposed.
CAIRN_DECL weight_rule transposed(std::string ours, std::string theirs) {
  auto flip = [](std::vector<at::Tensor> const& t) { return std::vector<at::Tensor>{t[0].t().contiguous()}; };
  return {{std::move(ours)}, {std::move(theirs)}, flip, flip};
}
/// Our `ours` is their `theirs` concatenated along `dim` (a fused projection, say), in equal parts.
CAIRN_DECL weight_rule split(std::string ours, std::vector<std::string> theirs, std::int64_t dim) {
  auto parts = static_cast<std::int64_t>(theirs.size());
  return {{std::move(ours)},
          std::move(theirs),
          [=](std::vector<at::Tensor> const& t) {
            std::vector<at::Tensor> out;
            for (auto& piece : t[0].chunk(parts, dim)) out.push_back(piece.contiguous());
            return out;
          },
          [=](std::vector<at::Tensor> const& t) { return std::vector<at::Tensor>{at::cat(t, dim)}; }};
}

/// Our `ours` (several parameters) are their one `theirs`, concatenated along `dim`.
CAIRN_DECL weight_rule merged(std::vector<std::string> ours, std::string theirs, std::int64_t dim) {
  auto parts = static_cast<std::int64_t>(ours.size());
  return {std::move(ours),
          {std::move(theirs)},
          [=](std::vector<at::Tensor> const& t) { return std::vector<at::Tensor>{at::cat(t, dim)}; },
          [=](std::vector<at::Tensor> const& t) {
            std::vector<at::Tensor> out;
            for (auto& piece : t[0].chunk(parts, dim)) out.push_back(piece.contiguous());
            return out;
          }};
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
    throw error("the weight rule for '" + rule.theirs.front() + "' gave " + std::to_string(theirs.size()) +
                " tensors for " + std::to_string(rule.theirs.size()) + " names");
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
    metas.push_back(at::empty(shape, at::TensorOptions().dtype(to_scalar_type(p.dtype)).device(c10::kMeta)));
  }
  try {
    return describe_outputs(rule, rule.to_theirs(metas));
  } catch (std::exception const&) {
    return std::nullopt;
  }
}

/// The parameters of `rule`, whole, on rank `destination` (shaped); nothing on the others. Collective.
template <class Comm> std::vector<at::Tensor> gather_inputs(model_state const& state, Comm& comm,
                                                            std::vector<rank_layout> const& ranks,
                                                            std::map<std::string, parameter_layout> const& parameters,
                                                            weight_rule const& rule, int destination) {
  std::vector<at::Tensor> ours;
  for (auto const& name : rule.ours) {
    auto const& p = parameters.at(name);
    auto whole = cairn::detail::gather_whole(state, comm, ranks, p, 0, destination);
    if (whole) ours.push_back(whole->view(std::vector<std::int64_t>(p.shape.begin(), p.shape.end())));
  }
  return ours;
}

/// Whether `file` records cairn's checksums at all (any tensor has one).
CAIRN_DECL bool records_checksums(io::safetensors_file const& file) {
  for (auto const& [key, value] : file.metadata())
    if (io::is_checksum_key(key)) return true;
  return false;
}

CAIRN_DECL void save(model_state const& state, comm::communicator_ref comm, std::string const& model_type,
                     std::vector<weight_rule> const& rules, boost::json::object const& external_config,
                     checkpoint_save_config const& config) {
  state.check();
  auto ranks = all_rank_layouts(state, comm);
  auto parameters = cairn::detail::parameters_of(ranks);
  std::uint64_t whole_bytes = 0;
  for (auto const& [name, p] : parameters) whole_bytes += cairn::whole_numel(p) * io::size_of(p.dtype);
  progress_scope progress("exporting", config.path.string(), whole_bytes / static_cast<std::uint64_t>(comm.size()));

  std::set<std::string> covered;
  for (auto const& rule : rules)
    for (auto const& name : rule.ours) {
      if (!parameters.contains(name))
        throw error("the " + model_type + " converter expects a parameter '" + name + "'");
      covered.insert(name);
    }
  for (auto const& [name, p] : parameters)
    if (!covered.contains(name))
      throw error("parameter '" + name + "' has no external name in the " + model_type + " converter");

  // What each rule writes, known before any data moves (the headers come first). A rule that
  // cannot run on meta tensors runs once on rank 0 to find out, and rank 0 tells the others.
  std::vector<std::vector<detail::planned_tensor>> outputs(rules.size());
  for (std::size_t r = 0; r < rules.size(); ++r) {
    if (auto planned = detail::plan_outputs(rules[r], parameters)) {
      outputs[r] = std::move(*planned);
      continue;
    }
    std::string text;
    auto ours = detail::gather_inputs(state, comm, ranks, parameters, rules[r], 0);
    if (comm.rank() == 0) {
      try {
        text = cairn::detail::compact(
            to_json(detail::planned_outputs{detail::describe_outputs(rules[r], rules[r].to_theirs(ours))}));
      } catch (std::exception const& e) {
        text = std::string("!") + e.what();
      }
    }
    text = comm::broadcast_string(comm, text);
    if (text.starts_with("!")) throw error("the weight rule for '" + rules[r].theirs.front() + "': " + text.substr(1));
    outputs[r] = parse<detail::planned_outputs>(parse_json(text)).tensors;
  }

  // Files of whole rules, at most parameters_per_file elements each (a larger rule alone).
  std::vector<std::uint64_t> sizes;
  for (auto const& out : outputs) {
    std::uint64_t n = 0;
    for (auto const& t : out) n += shard_layout::whole(t.shape).box_numel();
    sizes.push_back(n);
  }
  auto file_of = cairn::detail::pack_files(sizes, config.parameters_per_file);
  std::size_t files = file_of.empty() ? 1 : file_of.back() + 1;
  auto file_name = [&](std::size_t f) {
    return files == 1 ? std::string("model.safetensors") : detail::shard_file(f, files);
  };
  auto writer_of = [&](std::size_t f) { return static_cast<int>(f % static_cast<std::size_t>(comm.size())); };
  std::vector<std::vector<std::size_t>> contents(files);
  for (std::size_t r = 0; r < rules.size(); ++r) contents[file_of[r]].push_back(r);

  std::vector<std::unique_ptr<io::safetensors_writer>> writers(files);
  cairn::detail::write_behind behind;
  behind.submit(0, [&] {
    io::make_directories(config.path);
    for (std::size_t f = 0; f < files; ++f) {
      if (writer_of(f) != comm.rank()) continue;
      writers[f] = std::make_unique<io::safetensors_writer>(config.path / file_name(f));
      writers[f]->set_metadata("format", "pt");
      for (auto r : contents[f])
        for (auto const& t : outputs[r])
          writers[f]->declare(t.name, t.dtype, t.shape, cairn::detail::stored_type(t.dtype, config.data_type));
      writers[f]->open();
      if (contents[f].empty()) writers[f]->commit(); // nothing to wait for
    }
  });
  std::size_t rounds = 0;
  for (auto const& c : contents) rounds = std::max(rounds, c.size());
  for (std::size_t k = 0; k < rounds; ++k) // file 0's k-th rule, file 1's, …: each rank in turn
    for (std::size_t f = 0; f < files; ++f) {
      if (k >= contents[f].size()) continue;
      auto r = contents[f][k];
      std::vector<at::Tensor> theirs;
      try {
        auto ours = detail::gather_inputs(state, comm, ranks, parameters, rules[r], writer_of(f));
        if (comm.rank() != writer_of(f)) continue;
        for (auto& t : rules[r].to_theirs(ours)) theirs.push_back(t.contiguous());
        if (detail::describe_outputs(rules[r], theirs) != outputs[r])
          throw error("the weight rule for '" + rules[r].theirs.front() +
                      "' gave other shapes or types than it does on meta tensors");
      } catch (std::exception const&) {
        behind.fail(std::current_exception()); // raised on the writer only: reported below, on every rank
        continue;
      }
      std::uint64_t bytes = 0;
      for (auto const& t : theirs) bytes += static_cast<std::uint64_t>(t.nbytes());
      progress_scope::count(bytes);
      behind.submit(bytes, [&, f, r, theirs = std::move(theirs), last = k + 1 == contents[f].size()] {
        for (std::size_t i = 0; i < theirs.size(); ++i) writers[f]->put(outputs[r][i].name, tensor_bytes(theirs[i]));
        if (last) writers[f]->commit();
      });
    }

  comm::all_succeed(comm, "cannot save checkpoint " + config.path.string(), [&] { behind.finish(); });
  // The index and config.json last, once every rank's files are whole.
  comm::all_succeed(comm, "cannot save checkpoint " + config.path.string(), [&] {
    if (comm.rank() == 0) {
      if (files > 1) {
        io::safetensors_index index;
        std::uint64_t total = 0;
        for (std::size_t r = 0; r < rules.size(); ++r)
          for (auto const& t : outputs[r]) {
            index.weight_map[t.name] = file_name(file_of[r]);
            total += shard_layout::whole(t.shape).box_numel() *
                     io::size_of(cairn::detail::stored_type(t.dtype, config.data_type));
          }
        index.metadata["total_size"] = total;
        io::write_index(config.path / "model.safetensors.index.json", index);
      }
      auto text = cairn::detail::pretty(external_config);
      io::write_file_atomically(config.path / "config.json", std::as_bytes(std::span(text)));
    }
  });
}

CAIRN_DECL void load(model_state& state, comm::communicator_ref comm, std::string const& model_type,
                     std::vector<weight_rule> const& rules, checkpoint_load_config const& config, verification verify) {
  state.check();
  progress_scope progress("loading", config.path.string(), state.bytes(false));
  auto weights_only = config;
  weights_only.model_weights = true;
  weights_only.optimizer_state = false;
  cairn::detail::loader loader(state, weights_only, {state.shard_names.at(0)}, verify);
  std::map<std::string, std::string> file_of;
  auto index_path = config.path / "model.safetensors.index.json";
  if (std::filesystem::exists(index_path)) {
    file_of = io::read_index(index_path).weight_map;
  } else {
    for (auto const& t : loader.file(config.path / "model.safetensors").tensors())
      file_of[t.name] = "model.safetensors";
  }
  std::set<std::string> used, loaded;
  for (auto const& rule : rules) {
    bool wanted = std::any_of(rule.ours.begin(), rule.ours.end(), [&](auto const& n) { return state.find(n); });
    if (!wanted) continue;
    std::vector<at::Tensor> theirs;
    try {
      for (auto const& name : rule.theirs) {
        auto entry = file_of.find(name);
        if (entry == file_of.end()) throw error("tensor '" + name + "' is not in the checkpoint");
        auto& file = loader.file(config.path / entry->second);
        auto const& info = file.at(name);
        // Files of other tools record no checksums; in a file cairn wrote, every tensor has one.
        if (verify == verification::checksums && records_checksums(file)) file.verify(info);
        std::vector<std::int64_t> shape(info.shape.begin(), info.shape.end());
        auto t = at::empty(shape, at::TensorOptions().dtype(to_scalar_type(info.dtype)));
        auto bytes = file.bytes(info);
        std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
        theirs.push_back(t);
        used.insert(name);
      }
    } catch (error const& e) {
      loader.problem(rule.ours.front(), e.what());
      continue;
    }
    auto ours = rule.to_ours(theirs);
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
      std::vector<cairn::detail::load_source> sources{{tensor_bytes(static_cast<at::Tensor const&>(whole)),
                                                       to_dtype(whole.scalar_type()),
                                                       shard_layout::whole(p->layout.shape)}};
      loader.load(*p, 0, sources, rule.ours[i]);
    }
  }
  for (auto& p : state.parameters) {
    if (!loaded.contains(p.layout.name)) loader.missing(p.layout.name);
    loader.finish(p);
  }
  for (auto const& [name, file] : file_of)
    if (!used.contains(name))
      loader.problem(name, "in the checkpoint but not mapped by the " + model_type + " converter");
  loader.agree(comm);
}

} // namespace detail

} // namespace cairn::external
