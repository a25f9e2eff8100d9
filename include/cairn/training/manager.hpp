#pragma once
// cairn: requires libtorch

// The checkpoint manager: what a trainer calls every iteration. An orchestrator over the parts
// beside it (schedules and retention, the background writer, resume discovery, the preflight
// estimate, progress reports, the experiment lock). Saves go to <experiment_dir>/checkpoints/
// and export/, each committed durably (see save_directory).

#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/save_load.hpp>
#include <cairn/checkpoint/weight_rule.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/training/background_tasks.hpp>
#include <cairn/training/background_writer.hpp>
#include <cairn/training/callback.hpp>
#include <cairn/training/local_tier.hpp>
#include <cairn/training/lock.hpp>
#include <cairn/training/manager_options.hpp>
#include <cairn/training/preemption.hpp>
#include <cairn/training/preflight.hpp>
#include <cairn/training/resume.hpp>
#include <cairn/training/save_report.hpp>
#include <cairn/training/training_config.hpp>

#include <boost/json/value.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cairn {

/// Why a run stops after a step: it does not (`none`), a shutdown fired, a stop signal reached a
/// rank (a checkpoint was saved at that iteration when checkpoints are enabled), or the last
/// iteration was trained. Converts to true when the run must stop.
///
///     if (auto stop = run.step(iteration, state)) return stop.exit_status();
class stop_reason {
public:
  enum kind_type { none, shutdown, signal, finished };

  constexpr stop_reason(kind_type kind = none, int signal_number = 0) noexcept // NOLINT(google-explicit-constructor)
      : kind_(kind), signal_(kind == signal ? signal_number : 0) {}

  [[nodiscard]] constexpr kind_type kind() const noexcept { return kind_; }
  constexpr explicit operator bool() const noexcept { return kind_ != none; }
  /// The status to exit with: `preempted_exit_status` (75) after a signal, else 0.
  [[nodiscard]] constexpr int exit_status() const noexcept { return kind_ == signal ? preempted_exit_status : 0; }
  /// After a signal: the signal that stopped the run (the highest number any rank received, so
  /// alike on every rank); 0 otherwise.
  [[nodiscard]] constexpr int signal_number() const noexcept { return signal_; }
  friend constexpr bool operator==(stop_reason, stop_reason) = default;

private:
  kind_type kind_;
  int signal_;
};

/// "SIGTERM", "SIGINT", "SIGUSR1", … for the signals a run stops on; "signal N" for others.
CAIRN_DECL std::string signal_name(int number);

/// What every checkpoint_manager does, over any communicator: compiled once (with
/// CAIRN_SEPARATE_COMPILATION, in the translation unit of <cairn/src.hpp>). Use it through
/// checkpoint_manager, below.
class basic_checkpoint_manager {
public:
  /// Saves an export in the external format, typically through a converter.
  using exporter = std::function<void(model_state const&, comm::communicator_ref&, checkpoint_save_config const&)>;

  CAIRN_DECL basic_checkpoint_manager(training_config config, std::filesystem::path const& experiment_dir,
                                      comm::communicator_ref comm, manager_options options = {});

  basic_checkpoint_manager(basic_checkpoint_manager const&) = delete;
  basic_checkpoint_manager& operator=(basic_checkpoint_manager const&) = delete;
  /// In one process, commits a save still in flight when it is whole (an error of the program
  /// ended the run between two steps). Across ranks it cannot (committing takes every rank): the
  /// save stays uncommitted and the next resume removes it; call `finish()` before exiting.
  CAIRN_DECL ~basic_checkpoint_manager();

  /// Sets how exports in the external format are saved.
  void set_exporter(exporter save) { exporter_ = std::move(save); }

  [[nodiscard]] save_directory const& checkpoints() const noexcept { return checkpoints_; }
  [[nodiscard]] save_directory const& exports() const noexcept { return exports_; }
  /// This node's local checkpoints, where the local tier is enabled and has been used (found at
  /// the first resume, preflight or local save): `<directory>/cairn-<experiment id>/checkpoints`.
  [[nodiscard]] save_directory const* local_checkpoints() const noexcept { return local_ ? &*local_ : nullptr; }

  /// Sets the communicator of the local tier's background transfers (each rank's part copied to
  /// its peers on other nodes): every rank of the job again, in a group of its own, so that the
  /// transfers run beside training's collectives (`comm::connect(…, transfers)` makes one). A
  /// run of several nodes with `training.checkpoint.local.replicas` > 0 needs it. `comm` must
  /// outlive the manager.
  void set_transfer_communicator(comm::communicator_ref comm) { transfers_ = comm; }
  [[nodiscard]] training_config const& config() const noexcept { return config_; }

  /// Loads the newest complete checkpoint into `state` (any layout and world size) and returns
  /// it, or nothing when there is none (the caller starts fresh or from `pretrained`). What
  /// interrupted saves left is removed first, with a warning each. A checkpoint that does not
  /// load (a missing file, a bad checksum) is skipped with a warning for the next older one;
  /// when none loads, an error lists why. With the local tier, the newest iteration whole across
  /// the tiers is loaded, each rank's part from the nearest sound copy: its node's disk, else a
  /// peer's (sent to it, and kept on its disk again), else the persistent tier; every choice is
  /// reported (docs/tiers.md). Collective.
  CAIRN_DECL std::optional<resumed_checkpoint> resume(model_state& state);

  /// Checks, before step one, what would otherwise fail hours later: the config validates, the
  /// experiment directory is writable, its free space covers the checkpoints that `keep`
  /// retains (and the exports) at this state's size, and an external export has its exporter.
  /// An error naming the problem otherwise, on every rank. Collective.
  CAIRN_DECL void preflight(model_state const& state);

  /// Called on every rank after iteration `iteration` (counted from 1) is trained: saves a
  /// checkpoint and an export when their schedules fire, and at the last iteration each one
  /// that is enabled;
  /// commits a background save that has finished. Returns true when the run must stop: a
  /// shutdown fired, or a stop signal reached any rank (`preempted()`; a checkpoint is then saved
  /// at this iteration when checkpoints are enabled). The checkpoint is complete on return and
  /// the caller should exit. A background save that failed is thrown here. Collective.
  CAIRN_DECL bool step(std::int64_t iteration, model_state const& state, boost::json::value const& metadata = {});

  /// Whether the last `step()` stopped the run because a stop signal reached a rank.
  [[nodiscard]] bool preempted() const noexcept { return preempted_; }

  /// Why the last `step()` says the run must stop, `finished` at the last iteration included.
  [[nodiscard]] stop_reason last_stop() const noexcept { return last_stop_; }

  /// Sets the model's converter: exports in the external format are saved through it (a
  /// `checkpointer` bound to it), as any other format.
  CAIRN_DECL void set_converter(external::model_converter converter);

  /// Saves a checkpoint of `state` at `iteration` now (in the background when async), after
  /// committing the one in flight. Retention and the callback follow its commit. Collective.
  CAIRN_DECL void save(std::int64_t iteration, model_state const& state, boost::json::value const& metadata = {});

  /// Saves a local checkpoint of `state` at `iteration` now, on every node's own disk, each
  /// rank's part copied to its peers (in the background when async), after committing the save
  /// in flight. Retention follows its commit. Collective.
  CAIRN_DECL void save_local(std::int64_t iteration, model_state const& state, boost::json::value const& metadata = {});

  /// Saves an export of `state` at `iteration` now, as the export config says, in the
  /// foreground. Retention and the callback follow. When it fails, a checkpoint saving in the
  /// background meanwhile is committed (if whole) before the error propagates. Collective.
  CAIRN_DECL void save_export(std::int64_t iteration, model_state const& state,
                              boost::json::value const& metadata = {});

  /// Waits for the save in flight and commits it, then waits for the callbacks. Throws what a
  /// failed background save threw. Collective; call it before exiting.
  CAIRN_DECL void finish();

  /// The iteration the run resumed from (0 when it started fresh).
  [[nodiscard]] std::int64_t start_iteration() const noexcept { return start_; }

private:
  using clock = background_writer::clock;

  /// Waits for the save in flight on this rank, then commits it once every rank has written.
  CAIRN_DECL void commit_pending();

  /// commit_pending(), for when another error is on its way out: a save in flight that is whole
  /// is committed; one that is not is abandoned with a warning. Collective.
  CAIRN_DECL void commit_pending_quietly() noexcept;

  /// save_local, and with `promote` the persistent checkpoint of `iteration` too, copied from
  /// the local files in the background.
  CAIRN_DECL void save_local(std::int64_t iteration, model_state const& state, boost::json::value const& metadata,
                             bool promote);

  /// The nodes of the local tier, found once, and this node's local checkpoints (collective).
  CAIRN_DECL local_nodes const& nodes();

  /// The newest local checkpoint whole across the nodes, at an iteration not older than
  /// `persistent` (the newest persistent one), loaded into `state`; nothing (reported) when
  /// there is none or it does not load. Collective.
  CAIRN_DECL std::optional<resumed_checkpoint> recover_local(model_state& state,
                                                             std::optional<std::int64_t> persistent);

  /// The local save in flight, written on every rank: each node's leader commits its part.
  CAIRN_DECL void commit_local(background_writer::write& write);

  /// Rank 0 prepares an empty place for the save at `iteration`; every rank learns where it is,
  /// or that it could not.
  CAIRN_DECL std::filesystem::path stage(save_directory& dir, std::int64_t iteration);

  /// Rank 0 takes the experiment directory, once: before it resumes, checks or saves anything.
  /// The saves it writes on a store are named by the lock's holder from then on.
  CAIRN_DECL void lock();

  /// Rank 0 removes what a failed save left, as well as it can.
  CAIRN_DECL void abandon(save_directory& dir, std::int64_t iteration);

  /// Every rank has written its part: rank 0 makes the save complete, starts the callback and
  /// queues retention on the background thread.
  CAIRN_DECL void commit(save_directory& dir, checkpoint_base_config const& schedule, std::int64_t iteration,
                         char const* kind, std::uint64_t bytes, clock::time_point started, std::optional<double> paused,
                         bool finite);

  /// What retention knows of a directory of saves: listed once, then kept up to date by this
  /// run's commits and removals (one run writes an experiment), so that a retention needs no
  /// listing and reads no marker it read before.
  struct known_saves {
    std::optional<std::map<std::int64_t, std::optional<bool>>> finite; ///< iteration → finite values only
    std::mutex mutex;                                                  ///< over `committed`
    std::vector<std::pair<std::int64_t, bool>> committed;              ///< by commits the next retention has not seen
  };

  /// Retention after commits, on rank 0's background thread: `schedule`'s rule over the complete
  /// saves of `dir`, never deleting the newest finite one nor `iteration`, the newest committed.
  CAIRN_DECL void retain(save_directory& dir, known_saves& known, checkpoint_base_config const& schedule,
                         std::int64_t iteration);

  /// Whether every rank's `state` is finite (no NaN, no infinity). Collective.
  [[nodiscard]] CAIRN_DECL bool all_finite(model_state const& state);

  CAIRN_DECL void report(std::string const& what, std::filesystem::path const& path, std::uint64_t bytes,
                         clock::time_point started, std::optional<double> paused);

  training_config config_;
  std::filesystem::path experiment_dir_;
  save_directory checkpoints_;
  save_directory exports_;
  comm::communicator_ref comm_;
  manager_options options_;
  exporter exporter_;
  std::optional<stop_signals> signals_;
  bool preempted_ = false;
  stop_reason last_stop_;
  std::optional<external::model_converter> converter_;
  std::optional<experiment_lock> lock_; // released after the writer below has finished
  background_writer writer_;
  running_callbacks callbacks_;
  std::optional<std::int64_t> last_checkpoint_;
  bool pending_finite_ = true;                   // whether the checkpoint in flight holds finite values only (agreed)
  std::shared_ptr<bool> pending_written_finite_; // … what this rank writes of it, found by the write
  std::optional<std::int64_t> last_export_;
  std::int64_t start_ = 0;
  bool shared_checked_ = false;
  detail::layout_exchange layouts_;     // the ranks' layouts at the last checkpoint, reused while unchanged
  std::optional<save_directory> local_; // this node's local checkpoints
  std::optional<comm::communicator_ref> transfers_;
  std::optional<local_nodes> nodes_;
  std::string experiment_id_;      // the experiment's identity (its .cairn-experiment), for the local tier
  bool pending_local_ = false;     // the save in flight is a local one
  bool pending_promotion_ = false; // … and the persistent checkpoint of its iteration too
  std::optional<std::int64_t> last_local_;
  known_saves known_checkpoints_, known_exports_;
  background_tasks housekeeping_; // rank 0's retention: first to go, before the directories it works on
};

namespace detail {
/// Whether the parameters rank `rank` writes in `plan` are finite in `state` (no NaN, no
/// infinity): what the write of a checkpoint checks of what it writes, on its own thread.
CAIRN_DECL bool finite_written(save_plan const& plan, model_state const& state, int rank);
} // namespace detail

/// Checks that every rank sees `dir` as rank 0 does: rank 0 writes a probe file there that every
/// rank must read back, and every rank writes one that rank 0 must read (a shared filesystem,
/// mounted at the same path on every node). A training_error (kind storage) names each rank, and
/// its host, that does not. Collective; nothing to check in one process. The checkpoint manager
/// runs it before it looks for checkpoints or saves anything.
CAIRN_DECL void check_shared_directory(comm::communicator_ref comm, std::filesystem::path const& dir);

/// Saves, exports, retention, callbacks, shutdowns and resuming, as a training config says.
/// Every rank constructs one and makes the same calls in the same order (they are collective).
/// Only rank 0 touches the directories, which must be shared by all ranks. `comm` must outlive
/// the manager. Everything but the exporter's type is basic_checkpoint_manager's, compiled once
/// whatever `Comm`.
///
///     cairn::checkpoint_manager manager(cfg.training, cfg.run.experiment_dir, comm);
///     auto resumed = manager.resume(state);      // newest complete checkpoint, any layout
///     manager.preflight(state);                  // writable, enough space, before step one
///     for (auto it = resumed ? resumed->iteration + 1 : 1; it <= cfg.training.train_iters; ++it)
///       if (train(it), manager.step(it, state)) break;   // a shutdown or a stop signal
template <comm::communicator Comm> class checkpoint_manager : public basic_checkpoint_manager {
public:
  /// Saves an export in the external format, typically through a converter:
  ///     [&](auto const& state, auto& comm, auto const& config) {
  ///       cairn::external::save(state, comm, converter, model_config, config); }
  using exporter = std::function<void(model_state const&, Comm&, checkpoint_save_config const&)>;

  checkpoint_manager(training_config config, std::filesystem::path const& experiment_dir, Comm& comm,
                     manager_options options = {})
      : basic_checkpoint_manager(std::move(config), experiment_dir, comm, std::move(options)), comm_(comm) {}

  /// Sets how exports in the external format are saved.
  void set_exporter(exporter save) {
    basic_checkpoint_manager::set_exporter(
        [&comm = comm_, save = std::move(save)](model_state const& state, comm::communicator_ref&,
                                                checkpoint_save_config const& config) { save(state, comm, config); });
  }

private:
  Comm& comm_;
};

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/training/impl/manager.ipp>
#include <cairn/training/impl/manager_local.ipp>
#endif
