#pragma once
// cairn: requires libtorch

// The checkpoint manager: what a trainer calls every iteration. It saves resume checkpoints to
// <experiment_dir>/checkpoints/<iteration>/ and exports to <experiment_dir>/export/<iteration>/
// on their own schedules, commits each one durably (see save_directory), keeps what retention
// says, runs callbacks, stops at shutdowns, and resumes from the newest complete checkpoint.

#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/save_load.hpp>
#include <cairn/comm/strings.hpp>
#include <cairn/config/diagnostics.hpp>
#include <cairn/config/validate.hpp>
#include <cairn/training/callback.hpp>
#include <cairn/training/training_config.hpp>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cairn {

/// How a checkpoint_manager saves and resumes.
struct manager_options {
  /// Write checkpoints on a background thread. Training then pauses only while the state is
  /// copied to host memory (pinned, for GPU state); the copy costs host memory of the size of
  /// this rank's state. Exports are always written in the foreground.
  bool async = true;
  /// Whether resuming checks the checksums of what it reads.
  verification verify = verification::checksums;
  /// The program's whole config, stored with every save.
  boost::json::value program_config;
};

/// The checkpoint a run resumed from.
struct resumed_checkpoint {
  std::int64_t iteration = 0;
  std::filesystem::path path;
  checkpoint_metadata metadata;
};

namespace detail {

/// "1.50 GiB", for progress messages.
inline std::string size_text(double bytes) {
  char const* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", bytes, units[unit]);
  return text;
}

/// Bytes a save of these layouts writes: every rank's shards, replicated parameters once.
inline std::uint64_t saved_bytes(std::vector<rank_layout> const& ranks, std::size_t shards) {
  std::uint64_t total = 0;
  for (std::size_t r = 0; r < ranks.size(); ++r)
    for (auto const& p : ranks[r].parameters)
      if (!p.replicated || r == 0) total += p.shard.numel() * io::size_of(p.dtype) * shards;
  return total;
}

/// Bytes of a save of whole tensors (state_dict, external) of `state` as `save` asks: every
/// rank knows every parameter's whole shape, so no communication is needed.
inline std::uint64_t whole_bytes(model_state const& state, checkpoint_save_config const& save) {
  auto shards = selected_shards(state.shard_names, save.model_weights, save.optimizer_state).size();
  std::uint64_t total = 0;
  for (auto const& p : state.parameters)
    total += whole_numel(p.layout) * io::size_of(stored_type(p.layout.dtype, save.data_type)) * shards;
  return total;
}

/// The metadata stored with a save: the caller's object with "iteration" added.
inline boost::json::value with_iteration(boost::json::value const& metadata, std::int64_t iteration) {
  boost::json::object out;
  if (metadata.is_object())
    out = metadata.get_object();
  else if (!metadata.is_null())
    out["user"] = metadata;
  out["iteration"] = iteration;
  return out;
}

} // namespace detail

/// Saves, exports, retention, callbacks, shutdowns and resuming, as a training config says.
/// Every rank constructs one and makes the same calls in the same order (they are collective).
/// Only rank 0 touches the directories, which must be shared by all ranks.
///
///     cairn::checkpoint_manager manager(cfg.training, cfg.run.experiment_dir, comm);
///     auto resumed = manager.resume(state);      // newest complete checkpoint, any layout
///     manager.preflight(state);                  // writable, enough space, before step one
///     for (auto it = resumed ? resumed->iteration + 1 : 1; it <= cfg.training.train_iters; ++it) {
///       train_one_iteration();
///       if (manager.step(it, state)) break;      // a shutdown: exit 0
///     }
///     manager.finish();
template <comm::communicator Comm> class checkpoint_manager {
public:
  /// Saves an export in the external format, typically through a converter:
  ///     [&](auto const& state, auto& comm, auto const& config) {
  ///       cairn::external::save(state, comm, converter, model_config, config); }
  using exporter = std::function<void(model_state const&, Comm&, checkpoint_save_config const&)>;

  checkpoint_manager(training_config config, std::filesystem::path const& experiment_dir, Comm& comm,
                     manager_options options = {})
      : config_(std::move(config)), experiment_dir_(experiment_dir), checkpoints_(experiment_dir / "checkpoints"),
        exports_(experiment_dir / "export"), comm_(comm), options_(std::move(options)) {}

  checkpoint_manager(checkpoint_manager const&) = delete;
  checkpoint_manager& operator=(checkpoint_manager const&) = delete;

  /// Waits for a background write, without committing it (that takes every rank: call
  /// `finish()`); the next resume removes what it left.
  ~checkpoint_manager() {
    if (!pending_) return;
    try {
      pending_->writing.get();
    } catch (std::exception const& e) {
      emit(severity::warning, {checkpoints_.staging(pending_->iteration).string(), e.what()});
    }
    emit(severity::warning, {checkpoints_.staging(pending_->iteration).string(),
                             "not committed: the checkpoint manager was destroyed before finish()"});
  }

  /// Sets how exports in the external format are saved.
  void set_exporter(exporter save) { exporter_ = std::move(save); }

  [[nodiscard]] save_directory const& checkpoints() const noexcept { return checkpoints_; }
  [[nodiscard]] save_directory const& exports() const noexcept { return exports_; }
  [[nodiscard]] training_config const& config() const noexcept { return config_; }

  /// Loads the newest complete checkpoint into `state` (any layout and world size) and returns
  /// it, or nothing when there is none (the caller starts fresh or from `pretrained`). What
  /// interrupted saves left is removed first, with a warning each. A checkpoint that does not
  /// load (a missing file, a bad checksum) is skipped with a warning for the next older one;
  /// when none loads, an error lists why. Collective.
  std::optional<resumed_checkpoint> resume(model_state& state) {
    finish();
    std::string candidates;
    comm::all_succeed(comm_, "cannot look for checkpoints in " + checkpoints_.root().string(), [&] {
      if (comm_.rank() != 0) return;
      for (auto* dir : {&checkpoints_, &exports_})
        for (auto const& message : dir->clean()) emit(severity::warning, {dir->root().string(), message});
      auto complete = checkpoints_.complete();
      for (auto it = complete.rbegin(); it != complete.rend(); ++it) {
        if (auto problem = checkpoints_.problem(*it))
          emit(severity::warning, {checkpoints_.path(*it).string(), "skipped: " + *problem});
        else
          candidates += (candidates.empty() ? "" : " ") + std::to_string(*it);
      }
    });
    candidates = comm::broadcast_string(comm_, candidates);

    std::string failures;
    for (auto const& word : split_words(candidates)) {
      auto iteration = std::stoll(word);
      checkpoint_load_config load;
      load.path = checkpoints_.path(iteration);
      load.format = checkpoint_format::distributed;
      load.model_weights = true;
      load.optimizer_state = true;
      auto started = clock::now();
      try {
        resumed_checkpoint out{iteration, load.path, {}};
        comm::all_succeed(comm_, "cannot load " + load.path.string(),
                          [&] { out.metadata = load_checkpoint(state, comm_, load, options_.verify); });
        last_checkpoint_ = iteration;
        start_ = iteration;
        report("loaded checkpoint", load.path, detail::saved_bytes(out.metadata.ranks, out.metadata.shard_names.size()),
               started, {});
        return out;
      } catch (std::exception const& e) {
        failures += std::string("\n  ") + e.what();
        if (comm_.rank() == 0)
          emit(severity::warning, {load.path.string(), std::string("skipped, it does not load: ") + e.what()});
      }
    }
    if (!failures.empty())
      throw error("no checkpoint in " + checkpoints_.root().string() + " can be loaded:" + failures);
    return std::nullopt;
  }

  /// Checks, before step one, what would otherwise fail hours later: the config validates, the
  /// experiment directory is writable, its free space covers the checkpoints that `keep`
  /// retains (and the exports) at this state's size, and an external export has its exporter.
  /// An error naming the problem otherwise, on every rank. Collective.
  void preflight(model_state const& state) {
    auto copy = config_;
    validate(copy);
    auto ranks = detail::all_rank_layouts(state, comm_);
    auto checkpoint_bytes = detail::saved_bytes(ranks, state.shard_names.size());
    auto export_bytes = detail::whole_bytes(state, config_.export_.save_config({}));
    comm::all_succeed(comm_, "preflight failed", [&] {
      if (comm_.rank() != 0) return;
      if (config_.export_.enabled() && config_.export_.format == checkpoint_format::external && !exporter_)
        throw error("training.export.format is external: give the checkpoint manager an exporter (set_exporter)");
      if (experiment_dir_.empty()) throw error("run.experiment_dir: required to save checkpoints");
      probe_writable(checkpoints_.root());
      if (config_.export_.enabled()) probe_writable(exports_.root());
      auto checkpoint_slots = slots(config_.checkpoint, checkpoints_, true);
      auto export_slots = config_.export_.enabled() ? slots(config_.export_, exports_, true) : 0;
      auto needed = checkpoint_slots * checkpoint_bytes + export_slots * export_bytes;
      auto available = std::filesystem::space(experiment_dir_).available;
      if (available < needed)
        throw error(experiment_dir_.string() + ": " + detail::size_text(double(available)) +
                    " free, the run needs about " + detail::size_text(double(needed)) + " (" +
                    std::to_string(checkpoint_slots) + " checkpoints of " +
                    detail::size_text(double(checkpoint_bytes)) + ", " + std::to_string(export_slots) + " exports of " +
                    detail::size_text(double(export_bytes)) + ")");
    });
  }

  /// Called on every rank after iteration `iteration` (counted from 1) is trained: saves a
  /// checkpoint and an export when their schedules fire, and both at the last iteration;
  /// commits a background save that has finished. Returns true when a shutdown fires: the
  /// checkpoint is then complete and the caller should exit cleanly. A background save that
  /// failed is thrown here. Collective.
  bool step(std::int64_t iteration, model_state const& state, boost::json::value const& metadata = {}) {
    poll();
    bool last = config_.train_iters > 0 && iteration >= config_.train_iters;
    if ((config_.checkpoint.enabled(iteration) || last) && last_checkpoint_ != iteration)
      save(iteration, state, metadata);
    if ((config_.export_.enabled(iteration) || (last && config_.export_.enabled())) && last_export_ != iteration)
      save_export(iteration, state, metadata);
    bool stop = config_.shutdown.enabled(iteration);
    if (stop || last) finish();
    return stop;
  }

  /// Saves a checkpoint of `state` at `iteration` now (in the background when async), after
  /// committing the one in flight. Retention and the callback follow its commit. Collective.
  void save(std::int64_t iteration, model_state const& state, boost::json::value const& metadata = {}) {
    auto started = clock::now();
    if (pending_) {
      wait_for_writing();
      commit_pending();
    }
    stage(checkpoints_, iteration);
    auto save = config_.checkpoint.save_config(checkpoints_.staging(iteration));
    auto described = formats::distributed::describe(state, comm_, save, options_.program_config,
                                                    detail::with_iteration(metadata, iteration));
    auto bytes = detail::saved_bytes(described.ranks, described.shard_names.size());
    last_checkpoint_ = iteration;
    if (!options_.async) {
      std::packaged_task<void()> write(
          [&, rank = comm_.rank()] { formats::distributed::write_files(state, rank, save, described); });
      pending_ = pending{iteration, write.get_future(), bytes, started, {}};
      write();
      commit_pending();
      return;
    }
    auto snapshot = copy_to_host(state);
    auto paused = std::chrono::duration<double>(clock::now() - started).count();
    pending_ = pending{
        iteration,
        std::async(std::launch::async,
                   [snapshot = std::move(snapshot), save = std::move(save), described = std::move(described),
                    rank = comm_.rank()] { formats::distributed::write_files(snapshot, rank, save, described); }),
        bytes, started, paused};
  }

  /// Saves an export of `state` at `iteration` now, as the export config says, in the
  /// foreground. Retention and the callback follow. Collective.
  void save_export(std::int64_t iteration, model_state const& state, boost::json::value const& metadata = {}) {
    auto started = clock::now();
    stage(exports_, iteration);
    auto save = config_.export_.save_config(exports_.staging(iteration));
    try {
      if (save.format == checkpoint_format::external) {
        if (!exporter_)
          throw error("training.export.format is external: give the checkpoint manager an exporter (set_exporter)");
        exporter_(state, comm_, save);
      } else {
        save_checkpoint(state, comm_, save, options_.program_config, detail::with_iteration(metadata, iteration));
      }
    } catch (...) {
      abandon(exports_, iteration);
      throw;
    }
    last_export_ = iteration;
    auto bytes = detail::whole_bytes(state, save);
    commit(exports_, config_.export_, iteration, "export", bytes, started, {});
  }

  /// Waits for the save in flight and commits it, then waits for the callbacks. Throws what a
  /// failed background save threw. Collective; call it before exiting.
  void finish() {
    if (pending_) {
      wait_for_writing();
      commit_pending();
    }
    for (auto& c : callbacks_) {
      auto status = c.process.wait();
      if (status != 0)
        emit(severity::warning, {c.path.string(), "callback exited with status " + std::to_string(status)});
    }
    callbacks_.clear();
  }

  /// The iteration the run resumed from (0 when it started fresh).
  [[nodiscard]] std::int64_t start_iteration() const noexcept { return start_; }

private:
  using clock = std::chrono::steady_clock;

  struct pending {
    std::int64_t iteration;
    std::future<void> writing;
    std::uint64_t bytes;
    clock::time_point started;
    std::optional<double> paused;
  };

  struct running_callback {
    std::filesystem::path path;
    child_process process;
  };

  /// Waits for this rank's background write, reporting every 30 s that it is still going.
  void wait_for_writing() {
    auto waited = 0;
    while (pending_->writing.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      waited += 30;
      emit(severity::info, {checkpoints_.staging(pending_->iteration).string(),
                            "still writing after " + std::to_string(waited) + " s (" +
                                detail::size_text(double(pending_->bytes)) + " in all)"});
    }
  }

  /// Commits the save in flight once every rank has written its part.
  void poll() {
    if (!pending_) return;
    bool written = pending_->writing.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    auto flag = at::full({1}, written ? 0 : 1, at::TensorOptions().dtype(at::kInt).device(comm_.device()));
    comm_.all_reduce(flag, comm::reduce_op::max);
    if (flag.to(c10::Device(c10::kCPU)).template item<int>() == 0) commit_pending();
  }

  void commit_pending() {
    auto p = std::move(*pending_);
    pending_.reset();
    try {
      comm::all_succeed(comm_, "checkpoint " + std::to_string(p.iteration) + " was not saved",
                        [&] { p.writing.get(); });
    } catch (...) {
      abandon(checkpoints_, p.iteration);
      throw;
    }
    commit(checkpoints_, config_.checkpoint, p.iteration, "checkpoint", p.bytes, p.started, p.paused);
  }

  /// Rank 0 prepares an empty staging directory; every rank learns whether it could.
  void stage(save_directory& dir, std::int64_t iteration) {
    comm::all_succeed(comm_, "cannot prepare " + dir.staging(iteration).string(), [&] {
      if (comm_.rank() == 0) dir.begin(iteration);
    });
  }

  /// Rank 0 removes what a failed save left, as well as it can.
  void abandon(save_directory& dir, std::int64_t iteration) {
    if (comm_.rank() != 0) return;
    try {
      io::remove_tree(dir.staging(iteration));
    } catch (std::exception const& e) {
      emit(severity::warning, {dir.staging(iteration).string(), e.what()});
    }
  }

  /// Every rank has written its part: rank 0 makes the save complete, applies retention and
  /// starts the callback.
  void commit(save_directory& dir, checkpoint_base_config const& schedule, std::int64_t iteration, char const* kind,
              std::uint64_t bytes, clock::time_point started, std::optional<double> paused) {
    try {
      comm::all_succeed(comm_, std::string("cannot commit ") + kind + " " + std::to_string(iteration), [&] {
        if (comm_.rank() == 0) dir.commit(iteration, {{"kind", kind}, {"world_size", comm_.size()}});
      });
    } catch (...) {
      abandon(dir, iteration);
      throw;
    }
    if (comm_.rank() != 0) return;
    report(std::string("saved ") + kind, dir.path(iteration), bytes, started, paused);
    for (auto old : schedule.to_delete(dir.complete())) {
      if (old == iteration) continue;
      try {
        dir.remove(old);
      } catch (std::exception const& e) {
        emit(severity::warning, {dir.path(old).string(), std::string("retention could not remove it: ") + e.what()});
      }
    }
    if (schedule.callback.enabled()) {
      try {
        callbacks_.push_back(
            {dir.path(iteration), schedule.callback.run({{"CAIRN_CHECKPOINT_PATH", dir.path(iteration)},
                                                         {"CAIRN_CHECKPOINT_ITERATION", std::to_string(iteration)},
                                                         {"CAIRN_CHECKPOINT_KIND", kind}})});
      } catch (std::exception const& e) {
        emit(severity::warning, {dir.path(iteration).string(), e.what()});
      }
    }
    reap_callbacks();
  }

  void reap_callbacks() {
    std::erase_if(callbacks_, [](running_callback& c) {
      auto status = c.process.try_wait();
      if (status && *status != 0)
        emit(severity::warning, {c.path.string(), "callback exited with status " + std::to_string(*status)});
      return status.has_value();
    });
  }

  void report(std::string const& what, std::filesystem::path const& path, std::uint64_t bytes,
              clock::time_point started, std::optional<double> paused) {
    if (comm_.rank() != 0) return;
    auto seconds = std::chrono::duration<double>(clock::now() - started).count();
    auto text = what + ": " + detail::size_text(double(bytes)) + " in " + std::to_string(seconds).substr(0, 5) +
                " s (" + detail::size_text(seconds > 0 ? double(bytes) / seconds : 0.0) + "/s)";
    if (paused) text += ", training paused " + std::to_string(*paused).substr(0, 5) + " s";
    emit(severity::info, {path.string(), text});
  }

  /// A copy of `state` in host memory, reusing the buffers of the previous copy. Replicated
  /// parameters are copied on rank 0 only: the others do not write them.
  model_state copy_to_host(model_state const& state) {
    model_state out;
    out.shard_names = state.shard_names;
    std::size_t slot = 0;
    for (auto const& p : state.parameters) {
      parameter_state copy{p.layout, {}};
      for (auto const& t : p.shards) {
        if (p.layout.replicated && comm_.rank() != 0) {
          copy.shards.push_back(t);
          continue;
        }
        if (slot == buffers_.size()) buffers_.emplace_back();
        auto& buffer = buffers_[slot++];
        if (!buffer.defined() || buffer.numel() != t.numel() || buffer.scalar_type() != t.scalar_type())
          buffer = at::empty({t.numel()}, at::TensorOptions().dtype(t.scalar_type()).pinned_memory(t.is_cuda()));
        buffer.copy_(t.reshape({-1}));
        copy.shards.push_back(buffer);
      }
      out.parameters.push_back(std::move(copy));
    }
    buffers_.resize(slot);
    return out;
  }

  static void probe_writable(std::filesystem::path const& dir) {
    io::make_directories(dir);
    auto probe = dir / ".cairn-preflight";
    std::string text = "cairn preflight\n";
    io::write_file_atomically(probe, std::as_bytes(std::span(text)));
    io::remove_tree(probe);
  }

  /// How many saves of a schedule can be on disk at once from now on: those `keep` retains
  /// (beyond those already there), those kept forever, and the one being written.
  std::uint64_t slots(checkpoint_base_config const& schedule, save_directory const& dir, bool final_save) const {
    auto end = config_.train_iters;
    std::int64_t saves = schedule.count(end) - schedule.count(start_);
    if (final_save && !schedule.enabled(end) && end > start_) ++saves;
    std::int64_t forever = 0;
    if (schedule.keep_every)
      for (auto it = schedule.count(start_) + 1; it <= schedule.count(end); ++it)
        if ((it - schedule.count(0)) % *schedule.keep_every == 0) ++forever;
    std::int64_t existing = static_cast<std::int64_t>(dir.complete().size());
    std::int64_t kept = schedule.keep ? std::max<std::int64_t>(*schedule.keep - existing, 0) + 1 : saves;
    return static_cast<std::uint64_t>(std::max<std::int64_t>(std::min(kept, saves) + forever, 1));
  }

  training_config config_;
  std::filesystem::path experiment_dir_;
  save_directory checkpoints_;
  save_directory exports_;
  Comm& comm_;
  manager_options options_;
  exporter exporter_;
  std::optional<pending> pending_;
  std::vector<at::Tensor> buffers_;
  std::vector<running_callback> callbacks_;
  std::optional<std::int64_t> last_checkpoint_;
  std::optional<std::int64_t> last_export_;
  std::int64_t start_ = 0;
};

} // namespace cairn
