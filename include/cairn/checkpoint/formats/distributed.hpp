#pragma once
// cairn: requires libtorch

// The distributed format: every rank writes its own shards to rank_<r>.safetensors and rank 0
// writes metadata.json with every rank's layout. Loading with the saving layout reads each
// rank's own file; any other layout copies exactly the overlaps out of the saved files.

#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/detail/gather.hpp>
#include <cairn/checkpoint/detail/loader.hpp>
#include <cairn/checkpoint/files.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/comm/collectives.hpp>
#include <cairn/config/json.hpp>
#include <cairn/io/safetensors.hpp>
#include <cairn/io/safetensors_writer.hpp>

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace cairn::formats {

struct distributed {
  static constexpr checkpoint_format format = checkpoint_format::distributed;

  template <class Comm> static void save(model_state const& state, Comm& comm, checkpoint_save_config const& config,
                                         boost::json::value const& program_config,
                                         boost::json::value const& user_metadata) {
    auto metadata = describe(state, comm, config, program_config, user_metadata);
    comm::all_succeed(comm, "cannot save checkpoint " + config.path.string(),
                      [&] { write_files(state, comm.rank(), config, metadata); });
  }

  /// The metadata of a save of `state` (every rank's layout): the collective half of a save.
  template <class Comm> static checkpoint_metadata describe(model_state const& state, Comm& comm,
                                                            checkpoint_save_config const& config,
                                                            boost::json::value const& program_config,
                                                            boost::json::value const& user_metadata) {
    state.check();
    checkpoint_metadata metadata;
    metadata.format = format;
    metadata.save_id = comm::broadcast_string(comm, comm.rank() == 0 ? new_save_id() : std::string());
    for (auto i : detail::selected_shards(state.shard_names, config.model_weights, config.optimizer_state))
      metadata.shard_names.push_back(state.shard_names[i]);
    for (auto layout : detail::all_rank_layouts(state, comm)) {
      for (auto& p : layout.parameters) p.dtype = detail::stored_type(p.dtype, config.data_type);
      metadata.ranks.push_back(std::move(layout));
    }
    metadata.config = program_config;
    metadata.metadata = user_metadata;
    return metadata;
  }

  /// Writes `rank`'s file (and, on rank 0, metadata.json): the local half of a save, with no
  /// communication, so that it can run on a background thread from a copy of the state.
  static void write_files(model_state const& state, int rank, checkpoint_save_config const& config,
                          checkpoint_metadata const& metadata) {
    auto shards = detail::selected_shards(state.shard_names, config.model_weights, config.optimizer_state);
    io::make_directories(config.path);
    std::vector<at::Tensor> keep_alive; // CPU copies stay valid until the file is written
    io::safetensors_writer writer(rank_file(config.path, rank));
    writer.set_metadata("format", "cairn.distributed");
    record_identity(writer, metadata, rank);
    for (auto const& p : state.parameters) {
      if (p.layout.replicated && rank != 0) continue;
      for (auto i : shards) {
        auto cpu = p.shards[i].to(c10::Device(c10::kCPU)).contiguous();
        keep_alive.push_back(cpu);
        writer.add(cairn::tensor_name(p.layout.name, state.shard_names[i]), p.layout.dtype, {p.layout.shard.numel()},
                   tensor_bytes(cpu), detail::stored_type(p.layout.dtype, config.data_type));
      }
    }
    writer.write();
    if (rank == 0) detail::write_distributed_metadata(config.path, metadata);
  }

  template <class Comm> static checkpoint_metadata load(model_state& state, Comm& comm,
                                                        checkpoint_load_config const& config, verification verify) {
    state.check();
    auto metadata = read_checkpoint_metadata(metadata_file(config.path));
    detail::loader loader(state, config, metadata.shard_names, verify);
    for (auto const& problem : tiling_problems(metadata.ranks))
      loader.problem(metadata_file(config.path).string(), problem);
    // With the saving layout on every rank, each rank reads nothing but its own file.
    bool same_layout = static_cast<int>(metadata.ranks.size()) == comm.size() &&
                       metadata.ranks[static_cast<std::size_t>(comm.rank())] == state.layout();
    bool fast = comm::all_of(comm, same_layout);
    std::set<int> identity_checked, foreign; // rank files checked against the save's identity; those refused
    for (auto& p : state.parameters) {
      bool found = false;
      for (auto const& r : metadata.ranks) found = found || r.find(p.layout.name);
      if (!found) {
        loader.missing(p.layout.name);
        continue;
      }
      for (auto const& [live_index, saved_name] : loader.shards()) {
        auto path = tensor_name(p.layout.name, saved_name);
        std::vector<detail::load_source> sources;
        bool mismatch = false;
        for (int r = 0; r < static_cast<int>(metadata.ranks.size()) && !mismatch; ++r) {
          auto const* saved = metadata.ranks[static_cast<std::size_t>(r)].find(p.layout.name);
          // Replicated parameters are in rank 0's file only.
          if (!saved || (saved->replicated ? r != 0 : fast && r != comm.rank())) continue;
          if (saved->shape != p.layout.shape) {
            loader.problem(path, "has shape " + shape_text(saved->shape) + " in the checkpoint, " +
                                     shape_text(p.layout.shape) + " here");
            mismatch = true;
            break;
          }
          try {
            auto& file = loader.file(rank_file(config.path, r));
            if (!identity_checked.contains(r)) {
              identity_checked.insert(r);
              if (auto problem = identity_problem(file, metadata, r)) {
                loader.problem(file.path().string(), *problem);
                foreign.insert(r);
              }
            }
            if (foreign.contains(r)) { // reported once, above
              mismatch = true;
              break;
            }
            sources.push_back(loader.source(file, path, saved->shard));
          } catch (error const& e) {
            loader.problem(path, e.what());
            mismatch = true;
          }
        }
        if (!mismatch) loader.load(p, live_index, sources, path);
      }
      loader.finish(p);
    }
    for (auto const& r : metadata.ranks)
      for (auto const& saved : r.parameters) loader.saved(saved.name);
    loader.agree(comm);
    return metadata;
  }
};

} // namespace cairn::formats
