#pragma once
// cairn: requires libtorch

// The distributed format: every rank writes its own shards to rank_<r>.safetensors and rank 0
// writes metadata.json with every rank's layout. Loading with the saving layout reads each
// rank's own file; any other layout copies exactly the overlaps out of the saved files.

#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/detail/files.hpp>
#include <cairn/checkpoint/detail/gather.hpp>
#include <cairn/checkpoint/detail/transfer.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/comm/strings.hpp>
#include <cairn/config/json.hpp>
#include <cairn/io/safetensors.hpp>
#include <cairn/io/safetensors_writer.hpp>

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <memory>
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
    writer.set_metadata("rank", std::to_string(rank));
    for (auto const& p : state.parameters) {
      if (p.layout.replicated && rank != 0) continue;
      for (auto i : shards) {
        auto cpu = p.shards[i].to(c10::Device(c10::kCPU)).contiguous();
        keep_alive.push_back(cpu);
        writer.add(detail::tensor_name(p.layout.name, state.shard_names[i]), p.layout.dtype, {p.layout.shard.numel()},
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
    detail::load_report report;
    auto shards = requested(state, metadata, config, report);
    bool same_layout = static_cast<int>(metadata.ranks.size()) == comm.size() &&
                       metadata.ranks[static_cast<std::size_t>(comm.rank())] == state.layout();
    auto agreed = at::full({1}, same_layout ? 0 : 1, at::TensorOptions().dtype(at::kInt).device(comm.device()));
    comm.all_reduce(agreed, comm::reduce_op::max);
    bool fast = agreed.to(c10::Device(c10::kCPU)).template item<int>() == 0;

    std::map<int, std::unique_ptr<io::safetensors_file>> files;
    auto file = [&](int rank) -> io::safetensors_file& {
      auto& slot = files[rank];
      if (!slot) slot = std::make_unique<io::safetensors_file>(rank_file(config.path, rank));
      return *slot;
    };
    for (auto& p : state.parameters) {
      bool found = false;
      for (auto const& r : metadata.ranks) found = found || r.find(p.layout.name);
      if (!found) {
        report.add(p.layout.name, "missing from the checkpoint");
        continue;
      }
      for (auto [live_index, saved_name] : shards) {
        auto path = detail::tensor_name(p.layout.name, saved_name);
        std::vector<detail::load_source> sources;
        bool mismatch = false;
        for (int r = 0; r < static_cast<int>(metadata.ranks.size()) && !mismatch; ++r) {
          auto const* saved = metadata.ranks[static_cast<std::size_t>(r)].find(p.layout.name);
          // Replicated parameters are in rank 0's file only; with the saving layout, each rank
          // reads nothing but its own file.
          if (!saved || (saved->replicated ? r != 0 : fast && r != comm.rank())) continue;
          if (saved->shape != p.layout.shape) {
            report.add(path, "has shape " + detail::shape_text(saved->shape) + " in the checkpoint, " +
                                 detail::shape_text(p.layout.shape) + " here");
            mismatch = true;
            break;
          }
          try {
            auto& f = file(r);
            sources.push_back(detail::source_from(f, f.at(path), saved->shard, verify));
          } catch (error const& e) {
            report.add(path, e.what());
            mismatch = true;
          }
        }
        if (mismatch) continue;
        auto& live = p.shards[live_index];
        auto staging = detail::staging_for(live);
        detail::load_shard(p.layout, staging, sources, path, report);
        detail::finish_staging(live, staging);
      }
      zero_unloaded(state, p, shards);
    }
    for (auto const& r : metadata.ranks)
      for (auto const& saved : r.parameters)
        if (!state.find(saved.name)) report.add(saved.name, "in the checkpoint but not in the model");
    report.agree(comm, "cannot load checkpoint " + config.path.string());
    return metadata;
  }

  // --- shared with the other formats ----------------------------------------------------------

  /// The live shards to load, with the names they have in the checkpoint.
  static std::vector<std::pair<std::size_t, std::string>> requested(model_state const& state,
                                                                    checkpoint_metadata const& metadata,
                                                                    checkpoint_load_config const& config,
                                                                    detail::load_report& report) {
    std::vector<std::pair<std::size_t, std::string>> out;
    for (auto i : detail::selected_shards(state.shard_names, config.model_weights, config.optimizer_state)) {
      auto const& name = state.shard_names[i];
      if (std::find(metadata.shard_names.begin(), metadata.shard_names.end(), name) == metadata.shard_names.end())
        report.add(name, "state shard not in the checkpoint (it holds " + join(metadata.shard_names) + ")");
      else
        out.emplace_back(i, name);
    }
    return out;
  }

  /// Optimizer state not loaded is zeroed, so that training restarts it cleanly.
  static void zero_unloaded(model_state& state, parameter_state& p,
                            std::vector<std::pair<std::size_t, std::string>> const& loaded) {
    for (std::size_t i = 1; i < state.shard_names.size(); ++i) {
      bool was_loaded = std::any_of(loaded.begin(), loaded.end(), [&](auto const& l) { return l.first == i; });
      if (!was_loaded) p.shards[i].zero_();
    }
  }

  static std::string join(std::vector<std::string> const& names) {
    std::string text;
    for (auto const& n : names) text += (text.empty() ? "" : ", ") + n;
    return text.empty() ? "nothing" : text;
  }
};

} // namespace cairn::formats
