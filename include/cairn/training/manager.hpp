#pragma once
// cairn: requires libtorch

// The checkpoint manager: what a trainer calls every iteration. An orchestrator over the parts
// beside it (schedules and retention, the background writer, resume discovery, the preflight
// estimate, progress reports, the experiment lock). Saves go to <experiment_dir>/checkpoints/
// and export/, each committed durably (see save_directory).

#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/formats/distributed.hpp>
#include <cairn/checkpoint/save_load.hpp>
#include <cairn/comm/collectives.hpp>
#include <cairn/config/validate.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/training/background_writer.hpp>
#include <cairn/training/callback.hpp>
#include <cairn/training/lock.hpp>
#include <cairn/training/manager_options.hpp>
#include <cairn/training/preemption.hpp>
#include <cairn/training/preflight.hpp>
#include <cairn/training/progress.hpp>
#include <cairn/training/resume.hpp>
#include <cairn/training/training_config.hpp>

#include <boost/json/value.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cairn {

/// Saves, exports, retention, callbacks, shutdowns and resuming, as a training config says.
/// Every rank constructs one and makes the same calls in the same order (they are collective).
/// Only rank 0 touches the directories, which must be shared by all ranks.
///
///     cairn::checkpoint_manager manager(cfg.training, cfg.run.experiment_dir, comm);
///     auto resumed = manager.resume(state);      // newest complete checkpoint, any layout
///     manager.preflight(state);                  // writable, enough space, before step one
///     for (auto it = resumed ? resumed->iteration + 1 : 1; it <= cfg.training.train_iters; ++it)
///       if (train(it), manager.step(it, state)) break;   // a shutdown or a stop signal
template <comm::communicator Comm> class checkpoint_manager {
public:
  /// Saves an export in the external format, typically through a converter:
  ///     [&](auto const& state, auto& comm, auto const& config) {
  ///       cairn::external::save(state, comm, converter, model_config, config); }
  using exporter = std::function<void(model_state const&, Comm&, checkpoint_save_config const&)>;

  checkpoint_manager(training_config config, std::filesystem::path const& experiment_dir, Comm& comm,
                     manager_options options = {})
      : config_(std::move(config)), experiment_dir_(experiment_dir),
        checkpoints_(experiment_layout{experiment_dir}.checkpoints()),
        exports_(experiment_layout{experiment_dir}.exports()), comm_(comm), options_(std::move(options)) {
    if (!options_.stop_signals.empty()) signals_.emplace(options_.stop_signals);
  }

  checkpoint_manager(checkpoint_manager const&) = delete;
  checkpoint_manager& operator=(checkpoint_manager const&) = delete;

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
    if (experiment_dir_.empty()) return std::nullopt; // a run that saves nothing
    std::vector<std::int64_t> candidates;
    comm::all_succeed(comm_, "cannot look for checkpoints in " + checkpoints_.root().string(), [&] {
      if (comm_.rank() != 0) return;
      lock();
      candidates = resume_candidates(checkpoints_, {checkpoints_, exports_});
    });
    auto started = clock::now();
    auto resumed = load_newest(checkpoints_, std::move(candidates), state, comm_, options_.verify);
    if (!resumed) return resumed;
    last_checkpoint_ = resumed->iteration;
    start_ = resumed->iteration;
    report("loaded checkpoint", resumed->path,
           distributed_bytes(resumed->metadata.ranks, resumed->metadata.shard_names.size()), started, {});
    return resumed;
  }

  /// Checks, before step one, what would otherwise fail hours later: the config validates, the
  /// experiment directory is writable, its free space covers the checkpoints that `keep`
  /// retains (and the exports) at this state's size, and an external export has its exporter.
  /// An error naming the problem otherwise, on every rank. Collective.
  void preflight(model_state const& state) {
    {
      // Errors only: the warnings were emitted when the config was loaded.
      scoped_diagnostic_sink quiet([](severity, diagnostic const&) {});
      auto copy = config_;
      validate(copy);
    }
    auto checkpoint_bytes = distributed_bytes(all_rank_layouts(state, comm_), state.shard_names.size());
    auto export_bytes = whole_bytes(state.layout(), state.shard_names.size(), config_.export_.save_config({}));
    comm::all_succeed(comm_, "preflight failed", [&] {
      if (comm_.rank() != 0) return;
      if (config_.export_.enabled() && config_.export_.format == checkpoint_format::external && !exporter_)
        throw error("training.export.format is external: give the checkpoint manager an exporter (set_exporter)");
      if (!config_.checkpoint.enabled() && !config_.export_.enabled()) return; // nothing to save
      if (experiment_dir_.empty()) throw error("run.experiment_dir: required to save checkpoints or exports");
      if (config_.checkpoint.enabled()) probe_writable(checkpoints_.root());
      if (config_.export_.enabled()) probe_writable(exports_.root());
      lock();
      auto end = config_.train_iters;
      auto slots = [&](checkpoint_base_config const& schedule, save_directory const& dir) -> std::uint64_t {
        return schedule.enabled() ? saves_on_disk(schedule, start_, end, dir.complete().size()) : 0;
      };
      auto checkpoint_slots = slots(config_.checkpoint, checkpoints_), export_slots = slots(config_.export_, exports_);
      check_disk_space(experiment_dir_, {checkpoint_slots, checkpoint_bytes, export_slots, export_bytes});
    });
  }

  /// Called on every rank after iteration `iteration` (counted from 1) is trained: saves a
  /// checkpoint and an export when their schedules fire, and at the last iteration each one
  /// that is enabled;
  /// commits a background save that has finished. Returns true when the run must stop: a
  /// shutdown fired, or a stop signal reached any rank (`preempted()`; a checkpoint is then saved
  /// at this iteration when checkpoints are enabled). The checkpoint is complete on return and
  /// the caller should exit. A background save that failed is thrown here. Collective.
  bool step(std::int64_t iteration, model_state const& state, boost::json::value const& metadata = {}) {
    if (writer_.pending() && comm::all_of(comm_, writer_.ready())) commit_pending();
    preempted_ = signals_ && comm::any_of(comm_, signals_->received() != 0);
    bool last = config_.train_iters > 0 && iteration >= config_.train_iters;
    // The seed's rule: at a stop (the end, a shutdown, a signal), a checkpoint when checkpoints
    // are enabled at all, on the schedule or not; likewise an export at the end.
    bool stop = preempted_ || config_.shutdown.enabled(iteration);
    bool checkpoint = config_.checkpoint.enabled(iteration) || ((last || stop) && config_.checkpoint.enabled());
    if (checkpoint && last_checkpoint_ != iteration) save(iteration, state, metadata);
    if ((config_.export_.enabled(iteration) || (last && config_.export_.enabled())) && last_export_ != iteration)
      save_export(iteration, state, metadata);
    if (stop || last) finish();
    return stop;
  }

  /// Whether the last `step()` stopped the run because a stop signal reached a rank.
  [[nodiscard]] bool preempted() const noexcept { return preempted_; }

  /// Saves a checkpoint of `state` at `iteration` now (in the background when async), after
  /// committing the one in flight. Retention and the callback follow its commit. Collective.
  void save(std::int64_t iteration, model_state const& state, boost::json::value const& metadata = {}) {
    auto started = clock::now();
    if (writer_.pending()) commit_pending();
    stage(checkpoints_, iteration);
    auto save = config_.checkpoint.save_config(checkpoints_.staging(iteration));
    auto described = formats::distributed::describe(state, comm_, save, options_.program_config,
                                                    with_iteration(metadata, iteration));
    auto bytes = distributed_bytes(described.ranks, described.shard_names.size());
    last_checkpoint_ = iteration;
    if (!options_.async) {
      writer_.run(iteration, checkpoints_.staging(iteration), bytes, started,
                  [&, rank = comm_.rank()] { formats::distributed::write_files(state, rank, save, described); });
      commit_pending();
      return;
    }
    auto snapshot = writer_.copy_to_host(state, comm_.rank());
    auto paused = std::chrono::duration<double>(clock::now() - started).count();
    writer_.start(iteration, checkpoints_.staging(iteration), bytes, started, paused,
                  [snapshot = std::move(snapshot), save = std::move(save), described = std::move(described),
                   rank = comm_.rank()] { formats::distributed::write_files(snapshot, rank, save, described); });
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
        save_checkpoint(state, comm_, save, options_.program_config, with_iteration(metadata, iteration));
      }
    } catch (...) {
      abandon(exports_, iteration);
      throw;
    }
    last_export_ = iteration;
    auto bytes = whole_bytes(state.layout(), state.shard_names.size(), save);
    commit(exports_, config_.export_, iteration, "export", bytes, started, {});
  }

  /// Waits for the save in flight and commits it, then waits for the callbacks. Throws what a
  /// failed background save threw. Collective; call it before exiting.
  void finish() {
    if (writer_.pending()) commit_pending();
    callbacks_.wait_all();
  }

  /// The iteration the run resumed from (0 when it started fresh).
  [[nodiscard]] std::int64_t start_iteration() const noexcept { return start_; }

private:
  using clock = background_writer::clock;

  /// Waits for the save in flight on this rank, then commits it once every rank has written.
  void commit_pending() {
    writer_.wait();
    auto write = writer_.take();
    try {
      comm::all_succeed(comm_, "checkpoint " + std::to_string(write.iteration) + " was not saved",
                        [&] { write.done.get(); });
    } catch (...) {
      abandon(checkpoints_, write.iteration);
      throw;
    }
    commit(checkpoints_, config_.checkpoint, write.iteration, "checkpoint", write.bytes, write.started, write.paused);
  }

  /// Rank 0 prepares an empty staging directory; every rank learns whether it could.
  void stage(save_directory& dir, std::int64_t iteration) {
    comm::all_succeed(comm_, "cannot prepare " + dir.staging(iteration).string(), [&] {
      if (comm_.rank() != 0) return;
      if (experiment_dir_.empty()) throw error("run.experiment_dir: required to save checkpoints or exports");
      lock();
      dir.begin(iteration);
    });
  }

  /// Rank 0 takes the experiment directory, once: before it resumes, checks or saves anything.
  void lock() {
    if (!lock_ && !experiment_dir_.empty()) lock_.emplace(experiment_dir_);
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
    if (schedule.callback.enabled()) callbacks_.start(schedule.callback, dir.path(iteration).string(), iteration, kind);
    callbacks_.reap();
  }

  void report(std::string const& what, std::filesystem::path const& path, std::uint64_t bytes,
              clock::time_point started, std::optional<double> paused) {
    if (comm_.rank() == 0)
      report_progress(what, path, bytes, std::chrono::duration<double>(clock::now() - started).count(), paused);
  }

  training_config config_;
  std::filesystem::path experiment_dir_;
  save_directory checkpoints_;
  save_directory exports_;
  Comm& comm_;
  manager_options options_;
  exporter exporter_;
  std::optional<stop_signals> signals_;
  bool preempted_ = false;
  std::optional<experiment_lock> lock_; // released after the writer below has finished
  background_writer writer_;
  running_callbacks callbacks_;
  std::optional<std::int64_t> last_checkpoint_;
  std::optional<std::int64_t> last_export_;
  std::int64_t start_ = 0;
};

} // namespace cairn
