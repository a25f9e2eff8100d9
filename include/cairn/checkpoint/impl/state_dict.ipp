// Definitions of <cairn/checkpoint/formats/state_dict.hpp>: inline in a header-only build,
// compiled once by <cairn/checkpoint/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/detail/gather.hpp>
#include <cairn/checkpoint/detail/loader.hpp>
#include <cairn/checkpoint/detail/write_behind.hpp>
#include <cairn/checkpoint/files.hpp>
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
  state.check();
  auto shards = detail::selected_shards(state.shard_names, config.model_weights, config.optimizer_state);
  io::make_directories(config.path);

  // Every rank's layout: the whole parameters and who holds which part.
  auto ranks = all_rank_layouts(state, comm);
  auto parameters = detail::parameters_of(ranks);

  // Files of at most parameters_per_file elements, in name order; file i written by rank i % size.
  auto file_of = detail::assign_state_dict_files(parameters, shards.size(), config.parameters_per_file);
  std::size_t files = 0;
  for (auto const& [name, f] : file_of) files = std::max(files, f + 1);
  auto writer_of = [&](std::size_t file) { return static_cast<int>(file % static_cast<std::size_t>(comm.size())); };

  // What each file holds, in order; the header of each is fixed before any tensor is gathered.
  struct item {
    parameter_layout const* parameter;
    std::size_t shard;
    std::string tensor;
  };
  std::vector<std::vector<item>> contents(files);
  std::map<std::string, std::string> weight_map;
  for (auto const& [name, p] : parameters)
    for (auto i : shards) {
      contents[file_of[name]].push_back({&p, i, cairn::tensor_name(name, state.shard_names[i])});
      weight_map[contents[file_of[name]].back().tensor] = state_dict_file(file_of[name]);
    }
  checkpoint_metadata identity;
  identity.save_id = comm::broadcast_string(comm, comm.rank() == 0 ? new_save_id() : std::string());

  // Whole tensors are gathered to the rank that writes them, one at a time, and written behind
  // on a thread of that rank while the next ones are gathered: the files of different ranks
  // are written at the same time, and what waits in memory is bounded whatever the model size.
  std::vector<std::unique_ptr<io::safetensors_writer>> writers(files);
  detail::write_behind behind;
  behind.submit(0, [&] {
    for (std::size_t f = 0; f < files; ++f) {
      if (writer_of(f) != comm.rank()) continue;
      writers[f] = std::make_unique<io::safetensors_writer>(config.path / state_dict_file(f));
      record_identity(*writers[f], identity);
      for (auto const& it : contents[f])
        writers[f]->declare(it.tensor, it.parameter->dtype, it.parameter->shape,
                            detail::stored_type(it.parameter->dtype, config.data_type));
      writers[f]->open();
      if (contents[f].empty()) writers[f]->commit(); // nothing to wait for
    }
  });
  std::size_t rounds = 0;
  for (auto const& c : contents) rounds = std::max(rounds, c.size());
  for (std::size_t k = 0; k < rounds; ++k) // file 0's k-th tensor, file 1's, …: each rank in turn
    for (std::size_t f = 0; f < files; ++f) {
      if (k >= contents[f].size()) continue;
      auto const& it = contents[f][k];
      std::optional<at::Tensor> whole;
      try {
        whole = detail::gather_whole(state, comm, ranks, *it.parameter, it.shard, writer_of(f));
      } catch (std::exception const&) {
        behind.fail(std::current_exception()); // raised on the writer only: reported below, on every rank
        continue;
      }
      if (!whole) continue;
      auto bytes = static_cast<std::uint64_t>(whole->nbytes());
      progress_scope::count(bytes);
      behind.submit(bytes, [&writers, f, name = it.tensor, tensor = *whole, last = k + 1 == contents[f].size()] {
        writers[f]->put(name, tensor_bytes(tensor));
        if (last) writers[f]->commit();
      });
    }

  comm::all_succeed(comm, "cannot save checkpoint " + config.path.string(), [&] { behind.finish(); });
  // The index last, once every rank's files are whole: an index never lists a missing file.
  comm::all_succeed(comm, "cannot save checkpoint " + config.path.string(), [&] {
    if (comm.rank() == 0) {
      checkpoint_metadata metadata;
      metadata.format = format;
      metadata.save_id = identity.save_id;
      for (auto i : shards) metadata.shard_names.push_back(state.shard_names[i]);
      for (auto const& [name, p] : parameters) {
        auto whole = p;
        whole.replicated = false;
        whole.shard = shard_layout::whole(p.shape);
        whole.dtype = detail::stored_type(whole.dtype, config.data_type);
        metadata.parameters.push_back(whole);
      }
      metadata.config = program_config;
      metadata.metadata = user_metadata;
      detail::write_state_dict_index(config.path, metadata, std::move(weight_map));
    }
  });
}

CAIRN_DECL checkpoint_metadata state_dict::load(model_state& state, comm::communicator_ref comm,
                                                checkpoint_load_config const& config, verification verify) {
  state.check();
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
      auto path = tensor_name(p.layout.name, saved_name);
      std::vector<detail::load_source> sources;
      try {
        auto entry = index.weight_map.find(path);
        if (entry == index.weight_map.end()) throw error("not in " + index_path.filename().string());
        auto& file = loader.file(config.path / entry->second);
        if (auto problem = identity_problem(file, metadata)) throw io::io_error(file.path(), *problem);
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
  return metadata;
}

} // namespace cairn::formats
