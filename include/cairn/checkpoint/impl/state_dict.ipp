// Definitions of <cairn/checkpoint/formats/state_dict.hpp>: inline in a header-only build,
// compiled once by <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/detail/executor.hpp>
#include <cairn/checkpoint/detail/identity.hpp>
#include <cairn/checkpoint/detail/loader.hpp>
#include <cairn/checkpoint/detail/save_files.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/formats/state_dict.hpp>
#include <cairn/comm/collectives.hpp>
#include <cairn/io/index.hpp>
#include <cairn/io/safetensors_writer.hpp>
#include <cairn/progress.hpp>

#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cairn::formats {

CAIRN_DECL void state_dict::save(model_state const& state, comm::communicator_ref comm,
                                 checkpoint_save_config const& config, boost::json::value const& program_config,
                                 boost::json::value const& user_metadata) {
  detail::execute(plan(state, comm, config, program_config, user_metadata), config.path, state, comm);
}

CAIRN_DECL save_plan state_dict::plan(model_state const& state, comm::communicator_ref comm,
                                      checkpoint_save_config const& config, boost::json::value const& program_config,
                                      boost::json::value const& user_metadata) {
  comm::all_succeed(comm, "the state is not valid", [&] { state.check(); }); // on every rank together
  save_plan out;
  out.format = format;
  out.ranks = cairn::detail::all_rank_layouts(state, comm);
  auto parameters = detail::parameters_of(out.ranks);
  auto shards = detail::selected_shards(state.shard_names, config.model_weights, config.optimizer_state);
  checkpoint_metadata metadata;
  metadata.format = format;
  metadata.save_id = comm::broadcast_string(comm, comm.rank() == 0 ? cairn::detail::new_save_id() : std::string());
  for (auto i : shards) metadata.shard_names.push_back(state.shard_names[i]);
  metadata.config = program_config;
  metadata.metadata = cairn::detail::hooked_metadata(state, user_metadata); // a libtorch optimizer's step counts…
  metadata.iteration = detail::stored_iteration(metadata.metadata);

  // Files of at most parameters_per_file elements, parameters in name order; file i written by
  // rank i mod world size, so that the ranks write their files at the same time.
  auto file_of = detail::assign_state_dict_files(parameters, shards.size(), config.parameters_per_file);
  std::size_t files = 0;
  for (auto const& [name, f] : file_of) files = std::max(files, f + 1);
  for (std::size_t f = 0; f < files; ++f)
    out.files.push_back({state_dict_file(f),
                         static_cast<int>(f % static_cast<std::size_t>(comm.size())),
                         cairn::detail::identity_metadata(metadata),
                         {}});
  std::map<std::string, std::string> weight_map;
  for (auto const& [name, p] : parameters) {
    auto& file = out.files[file_of[name]];
    // Each holder writes its part in place where the parts are runs of the whole; else gathered.
    auto source = detail::part_runs(out.ranks, p) ? write_source::co_written : write_source::gathered;
    for (auto i : shards) {
      file.items.push_back({cairn::detail::tensor_name(name, state.shard_names[i]), p.dtype,
                            detail::stored_type(p.dtype, config.data_type), p.shape, source, name, i});
      weight_map[file.items.back().tensor] = file.name;
    }
    auto whole = p;
    whole.replicated = false;
    whole.shard = shard_layout::whole(p.shape);
    whole.dtype = detail::stored_type(whole.dtype, config.data_type);
    metadata.parameters.push_back(std::move(whole));
  }
  out.closing.push_back(
      {state_dict_index({}).string(), detail::state_dict_index_text(metadata, std::move(weight_map))});
  return out;
}

CAIRN_DECL checkpoint_metadata state_dict::load(model_state& state, comm::communicator_ref comm,
                                                checkpoint_load_config const& config, verification verify) {
  comm::all_succeed(comm, "the state is not valid", [&] { state.check(); }); // on every rank together
  auto index_path = state_dict_index(config.path);
  auto index = io::read_index(index_path);
  auto metadata = parse_checkpoint_metadata(index.metadata, index_path.string());
  detail::loader loader(state, config, metadata.shard_names, verify);
  for (auto const& problem : tiling_problems({rank_layout{metadata.parameters}}))
    loader.problem(index_path.string(), problem);
  std::map<std::string, parameter_layout const*, std::less<>> saved_parameters;
  for (auto const& s : metadata.parameters) saved_parameters.try_emplace(s.name, &s);
  for (auto& p : state.parameters) {
    auto found = saved_parameters.find(p.layout.name);
    auto const* saved = found == saved_parameters.end() ? nullptr : found->second;
    if (!saved) {
      loader.missing(p.layout.name);
      continue;
    }
    if (saved->shape != p.layout.shape) {
      loader.problem(p.layout.name, "has shape " + shape_text(saved->shape) + " in the checkpoint, " +
                                        shape_text(p.layout.shape) + " here");
      continue;
    }
    for (auto const& [live_index, saved_name] : loader.shards()) {
      auto path = cairn::detail::tensor_name(p.layout.name, saved_name);
      std::vector<detail::load_source> sources;
      try {
        auto entry = index.weight_map.find(path);
        if (entry == index.weight_map.end())
          throw checkpoint_error(checkpoint_errc::missing_tensor, "not in " + index_path.filename().string());
        auto& file = loader.file(config.path / entry->second);
        if (auto problem = cairn::detail::identity_problem(file, metadata)) throw io::io_error(file.path(), *problem);
        if (file.at(path).shape != p.layout.shape)
          throw io::io_error(file.path(), "tensor '" + path + "' has shape " + shape_text(file.at(path).shape) +
                                              ", the index says " + shape_text(saved->shape));
        sources.push_back(loader.source(file, path, shard_layout::whole(p.layout.shape), saved->dtype));
      } catch (error const& e) {
        loader.problem(path, e.what());
        continue;
      }
      loader.load(p, live_index, sources, path);
    }
    loader.finish(p);
  }
  for (auto const& [name, saved] : saved_parameters) loader.saved(name);
  loader.agree(comm);
  state.items.clear(); // whole tensors, no rank's items
  cairn::detail::after_load(state, metadata, config.optimizer_state);
  return metadata;
}

} // namespace cairn::formats
