// Definitions of <cairn/training/manager.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/detail/executor.hpp>
#include <cairn/checkpoint/detail/identity.hpp>
#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/formats/distributed.hpp>
#include <cairn/checkpoint/save_load.hpp>
#include <cairn/comm/collectives.hpp>
#include <cairn/config/json.hpp>
#include <cairn/detail/host.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/storage.hpp>
#include <cairn/training/background_writer.hpp>
#include <cairn/training/callback.hpp>
#include <cairn/training/lock.hpp>
#include <cairn/training/manager.hpp>
#include <cairn/training/manager_options.hpp>
#include <cairn/training/preemption.hpp>
#include <cairn/training/preflight.hpp>
#include <cairn/training/resume.hpp>
#include <cairn/training/save_report.hpp>
#include <cairn/training/training_config.hpp>

#include <ATen/ops/full.h>
#include <ATen/ops/isfinite.h>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

namespace cairn {

CAIRN_DECL basic_checkpoint_manager::basic_checkpoint_manager(training_config config,
                                                              std::filesystem::path const& experiment_dir,
                                                              comm::communicator_ref comm, manager_options options)
    : config_(std::move(config)), experiment_dir_(experiment_dir),
      checkpoints_(experiment_layout{experiment_dir}.checkpoints()),
      exports_(experiment_layout{experiment_dir}.exports()), comm_(comm), options_(std::move(options)) {
  if (!options_.stop_signals.empty()) signals_.emplace(options_.stop_signals, options_.stop_signal_window);
}

namespace detail {

/// What is in the probe file `path`, or why it cannot be read.
inline std::string probe_text(std::filesystem::path const& path) {
  try {
    auto where = io::open_location(path.string());
    return where.backend->read_all(where.key, 4096);
  } catch (std::exception const&) {
    return "<missing>";
  }
}

inline void write_probe(std::filesystem::path const& path, std::string const& text) {
  auto where = io::open_location(path.string());
  where.backend->write(where.key, std::as_bytes(std::span(text.data(), text.size())));
}

inline void remove_probe(std::filesystem::path const& path) noexcept {
  try {
    auto where = io::open_location(path.string());
    where.backend->remove(where.key);
  } catch (std::exception const&) {
    // a probe left behind is harmless: its name is no save's
  }
}

} // namespace detail

CAIRN_DECL void check_shared_directory(comm::communicator_ref comm, std::filesystem::path const& dir) {
  if (comm.size() == 1) return;
  auto what = "run.experiment_dir " + dir.string() + " is not shared by every rank";
  auto host = detail::this_host();
  std::string probe_name;
  comm::all_succeed(comm, what, [&] {
    if (comm.rank() != 0) return;
    io::make_folder(dir.string());
    probe_name = ".cairn-shared-" + cairn::detail::new_save_id();
    detail::write_probe(dir / probe_name, "rank 0 on " + host);
  });
  probe_name = comm::broadcast_string(comm, probe_name);
  auto probe = dir / probe_name;
  auto mine = probe;
  mine += "." + std::to_string(comm.rank());
  auto remove_probes = [&] { // rank 0, whatever the outcome: a check leaves nothing behind
    if (comm.rank() != 0) return;
    detail::remove_probe(probe);
    for (int r = 1; r < comm.size(); ++r) {
      auto theirs = probe;
      theirs += "." + std::to_string(r);
      detail::remove_probe(theirs);
    }
  };
  try {
    comm::all_succeed(comm, what, [&] {
      if (comm.rank() == 0) return;
      if (!detail::probe_text(probe).starts_with("rank 0 on "))
        throw training_error(training_errc::storage, "rank " + std::to_string(comm.rank()) + " on " + host +
                                                         " does not see the file " + probe.string() +
                                                         " that rank 0 wrote there: mount one shared filesystem at "
                                                         "the same path on every node");
      detail::write_probe(mine, "rank " + std::to_string(comm.rank()) + " on " + host);
    });
    comm::all_succeed(comm, what, [&] {
      if (comm.rank() != 0) return;
      std::string missing;
      for (int r = 1; r < comm.size(); ++r) {
        auto theirs = probe;
        theirs += "." + std::to_string(r);
        if (!detail::probe_text(theirs).starts_with("rank " + std::to_string(r) + " on "))
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      if (!missing.empty())
        throw training_error(training_errc::storage,
                             "rank 0 on " + host + " does not see the files ranks " + missing + " wrote in " +
                                 dir.string() + ": mount one shared filesystem at the same path on every node");
    });
  } catch (...) {
    remove_probes();
    throw;
  }
  remove_probes();
}

CAIRN_DECL std::optional<resumed_checkpoint> basic_checkpoint_manager::resume(model_state& state) {
  finish();
  if (experiment_dir_.empty()) return std::nullopt; // a run that saves nothing
  if (!std::exchange(shared_checked_, true)) check_shared_directory(comm_, experiment_dir_);
  resume_candidates_found found;
  comm::all_succeed(comm_, "cannot look for checkpoints in " + checkpoints_.root().string(), [&] {
    if (comm_.rank() != 0) return;
    lock();
    found = resume_candidates(checkpoints_, {checkpoints_, exports_});
  });
  auto started = clock::now();
  if (config_.checkpoint.local.saves()) {
    auto loadable = comm::broadcast_integers(comm_, found.loadable); // rank 0's, newest first
    auto newest = loadable.empty() ? std::nullopt : std::optional<std::int64_t>(loadable.front());
    if (auto recovered = recover_local(state, newest)) {
      last_local_ = start_ = recovered->iteration;
      return recovered;
    }
  }
  auto resumed = load_newest(checkpoints_, std::move(found), state, comm_, options_.verify, options_.architecture_check);
  if (!resumed) return resumed;
  last_checkpoint_ = resumed->iteration;
  start_ = resumed->iteration;
  report("loaded checkpoint", resumed->path, distributed_bytes(resumed->metadata), started, {});
  return resumed;
}

CAIRN_DECL void basic_checkpoint_manager::preflight(model_state const& state) {
  {
    // Errors only: the warnings were emitted when the config was loaded.
    scoped_diagnostic_sink quiet([](severity, diagnostic const&) {});
    auto copy = config_;
    validate(copy);
  }
  // The layouts agreed now, as the first save would (and kept for it); on rank 0 they are every
  // rank's, or the rules of every stage.
  auto agreed = cairn::detail::agree_layouts(state, comm_, &layouts_);
  // Layouts that do not tile a parameter (two ranks holding one part, not marked replicated)
  // are refused now, before step one, not at the first save. Every rank has every layout.
  if (!agreed.checked && (config_.checkpoint.enabled() || config_.export_.enabled())) {
    std::string problems;
    for (auto const& problem : tiling_problems(agreed.ranks)) problems += "\n  " + problem;
    if (!problems.empty())
      throw checkpoint_error(checkpoint_errc::invalid_state,
                             "the ranks' layouts do not describe the model exactly, which every save needs:" +
                                 problems);
    layouts_.checked = true;
  }
  auto checkpoint_bytes = agreed.rules ? distributed_bytes(*agreed.rules, state.shard_names.size())
                                       : distributed_bytes(agreed.ranks, state.shard_names.size());
  auto export_bytes = whole_bytes(state.layout(), state.shard_names.size(), config_.export_.save_config({}));
  bool saves = config_.checkpoint.enabled() || config_.export_.enabled();
  if (saves && !experiment_dir_.empty() && !std::exchange(shared_checked_, true))
    check_shared_directory(comm_, experiment_dir_);
  if (config_.checkpoint.local.saves()) nodes(); // its directory: each node's own, writable
  comm::all_succeed(comm_, "preflight failed", [&] {
    if (comm_.rank() != 0) return;
    if (config_.export_.enabled() && config_.export_.format == checkpoint_format::external && !exporter_ && !converter_)
      throw checkpoint_error(checkpoint_errc::needs_converter,
                             "training.export.format is external: give the checkpoint manager the model's converter "
                             "(set_converter) or an exporter (set_exporter)");
    if (!config_.checkpoint.enabled() && !config_.export_.enabled()) return; // nothing to save
    if (experiment_dir_.empty())
      throw training_error(training_errc::no_experiment_dir,
                           "run.experiment_dir: required to save checkpoints or exports");
    if (config_.checkpoint.enabled()) probe_writable(checkpoints_.root());
    if (config_.export_.enabled()) probe_writable(exports_.root());
    if (options_.check_storage) {
      auto report = io::check_storage(experiment_dir_);
      if (!report.ok())
        throw training_error(training_errc::storage,
                             "run.experiment_dir: its filesystem does not give what checkpoints rely on:\n" +
                                 io::to_string(report));
    }
    lock();
    auto end = config_.train_iters;
    auto slots = [&](checkpoint_base_config const& schedule, save_directory const& dir) -> std::uint64_t {
      return schedule.enabled() ? saves_on_disk(schedule, start_, end, dir.complete().size()) : 0;
    };
    auto checkpoint_slots = slots(config_.checkpoint, checkpoints_), export_slots = slots(config_.export_, exports_);
    check_disk_space(experiment_dir_, {checkpoint_slots, checkpoint_bytes, export_slots, export_bytes});
  });
}

CAIRN_DECL bool basic_checkpoint_manager::step(std::int64_t iteration, model_state const& state,
                                               boost::json::value const& metadata) {
  if (writer_.pending() && comm::all_of(comm_, writer_.ready())) commit_pending();
  callbacks_.reap(); // collects those that ended, stops those past their timeout
  int stop_signal = 0;
  if (signals_) { // the signal, alike on every rank (a stop on one rank is a stop on all)
    auto received = at::full({1}, std::int64_t{signals_->received()}, at::TensorOptions().dtype(at::kLong).device(comm_.device()));
    comm_.all_reduce(received, comm::reduce_op::max);
    stop_signal = static_cast<int>(received.to(c10::Device(c10::kCPU)).item<std::int64_t>());
  }
  preempted_ = stop_signal != 0;
  bool last = config_.train_iters > 0 && iteration >= config_.train_iters;
  // The seed's rule: at a stop (the end, a shutdown, a signal), a checkpoint when checkpoints
  // are enabled at all, on the schedule or not; likewise an export at the end.
  bool stop = preempted_ || config_.shutdown.enabled(iteration);
  bool checkpoint = config_.checkpoint.enabled(iteration) || ((last || stop) && config_.checkpoint.enabled());
  bool const local = config_.checkpoint.local.saves();
  if (checkpoint && last_checkpoint_ != iteration && local && config_.checkpoint.local.promote)
    save_local(iteration, state, metadata, true); // the persistent one copied from the local files
  else if (checkpoint && last_checkpoint_ != iteration)
    save(iteration, state, metadata);
  else if (!checkpoint && local && config_.checkpoint.local.enabled(iteration) && last_local_ != iteration)
    save_local(iteration, state, metadata); // a persistent save at the same iteration covers it
  if ((config_.export_.enabled(iteration) || (last && config_.export_.enabled())) && last_export_ != iteration)
    save_export(iteration, state, metadata);
  if (stop || last) finish();
  if (preempted_ && comm_.rank() == 0)
    emit(severity::info,
         {experiment_dir_.string(),
          "stopped by " + signal_name(stop_signal) + " after iteration " + std::to_string(iteration) +
              (!config_.checkpoint.enabled()
                   ? "; checkpoints are disabled (training.checkpoint.interval): a new run starts over"
               : last ? ", the last, its checkpoint saved: training is done"
                      : ", its checkpoint saved: run the same command again to resume (exit status " +
                            std::to_string(preempted_exit_status) + ")")});
  // A shutdown at the last iteration is the run's end.
  last_stop_ = preempted_                            ? stop_reason(stop_reason::signal, stop_signal)
               : last                                ? stop_reason::finished
               : config_.shutdown.enabled(iteration) ? stop_reason::shutdown
                                                     : stop_reason::none;
  return stop;
}

CAIRN_DECL std::string signal_name(int number) {
  for (auto [name, value] : {std::pair{"SIGTERM", SIGTERM},
                             {"SIGINT", SIGINT},
                             {"SIGUSR1", SIGUSR1},
                             {"SIGUSR2", SIGUSR2},
                             {"SIGHUP", SIGHUP},
                             {"SIGQUIT", SIGQUIT},
                             {"SIGXCPU", SIGXCPU}})
    if (number == value) return name;
  return "signal " + std::to_string(number);
}

CAIRN_DECL void basic_checkpoint_manager::set_converter(external::model_converter converter) {
  converter_ = std::move(converter);
}

CAIRN_DECL void basic_checkpoint_manager::save(std::int64_t iteration, model_state const& state,
                                               boost::json::value const& metadata) {
  auto started = clock::now();
  if (writer_.pending()) commit_pending();
  auto dir = stage(checkpoints_, iteration);
  auto save = config_.checkpoint.save_config(dir);
  // The plan is agreed now; its files need no communication: this rank writes its own, in the
  // background from a copy of the state when async, and every rank commits them together later.
  auto plan = formats::distributed::plan(state, comm_, save, options_.program_config,
                                         cairn::detail::with_iteration(metadata, iteration), &layouts_);
  // Every rank's bytes: each plans its own file at least (all of them without rules).
  auto mine = plan.bytes_per_rank(comm_.size())[static_cast<std::size_t>(comm_.rank())];
  auto bytes = static_cast<std::uint64_t>(comm::sum(comm_, static_cast<std::int64_t>(mine)));
  last_checkpoint_ = iteration;
  // Whether what this rank writes is finite: found by the write itself (in the background, from
  // the host copy, when async), agreed at the commit.
  auto finite = pending_written_finite_ = std::make_shared<bool>(true);
  if (!options_.async) {
    writer_.run(iteration, dir, bytes, started, [&, rank = comm_.rank()] {
      *finite = detail::finite_written(plan, state, rank);
      detail::execute_alone(plan, dir, state, rank);
    });
    commit_pending();
    return;
  }
  auto snapshot = writer_.copy_to_host(state, plan, comm_.rank());
  auto paused = std::chrono::duration<double>(clock::now() - started).count();
  writer_.start(iteration, dir, bytes, started, paused,
                [snapshot = std::move(snapshot), plan = std::move(plan), dir, rank = comm_.rank(), finite] {
                  *finite = detail::finite_written(plan, snapshot, rank);
                  detail::execute_alone(plan, dir, snapshot, rank);
                });
}

CAIRN_DECL void basic_checkpoint_manager::save_export(std::int64_t iteration, model_state const& state,
                                                      boost::json::value const& metadata) {
  auto started = clock::now();
  // Every step below fails on every rank together (each is agreed). When one does, a checkpoint
  // written in the background meanwhile (at this iteration, say) is whole or not on its own:
  // committed when it is, before the error goes.
  try {
    auto save = config_.export_.save_config(stage(exports_, iteration));
    try {
      if (save.format == checkpoint_format::external && exporter_)
        exporter_(state, comm_, save);
      else if (save.format == checkpoint_format::external && !converter_)
        throw checkpoint_error(checkpoint_errc::needs_converter,
                               "training.export.format is external: give the checkpoint manager the model's converter "
                               "(set_converter) or an exporter (set_exporter)");
      else
        checkpointer(comm_, options_.program_config, converter_)
            .save(state, save, cairn::detail::with_iteration(metadata, iteration));
    } catch (...) {
      abandon(exports_, iteration);
      throw;
    }
    last_export_ = iteration;
    auto bytes = whole_bytes(state.layout(), state.shard_names.size(), save);
    commit(exports_, config_.export_, iteration, "export", bytes, started, {}, // abandons it when it fails
           all_finite(state));
  } catch (...) {
    commit_pending_quietly();
    throw;
  }
}

CAIRN_DECL basic_checkpoint_manager::~basic_checkpoint_manager() {
  // A save in flight, left by an error of the program's own: one process needs no other to
  // commit it. Across ranks committing takes them all (they may not be here): it stays
  // uncommitted, and the next resume removes it.
  if (writer_.pending() && comm_.size() == 1) commit_pending_quietly();
}

CAIRN_DECL void basic_checkpoint_manager::commit_pending_quietly() noexcept {
  try {
    if (writer_.pending()) commit_pending();
  } catch (std::exception const& e) {
    emit(severity::warning, {checkpoints_.root().string(), e.what()});
  }
}

CAIRN_DECL void basic_checkpoint_manager::finish() {
  if (writer_.pending()) commit_pending();
  housekeeping_.wait();
  callbacks_.wait_all();
}

CAIRN_DECL void basic_checkpoint_manager::commit_pending() {
  writer_.wait();
  auto write = writer_.take();
  if (std::exchange(pending_local_, false)) return commit_local(write);
  try {
    comm::all_succeed(comm_, "checkpoint " + std::to_string(write.iteration) + " was not saved",
                      [&] { write.done.get(); });
  } catch (...) {
    abandon(checkpoints_, write.iteration);
    throw;
  }
  pending_finite_ = comm::all_of(comm_, *pending_written_finite_);
  commit(checkpoints_, config_.checkpoint, write.iteration, "checkpoint", write.bytes, write.started, write.paused,
         pending_finite_);
}

CAIRN_DECL void basic_checkpoint_manager::lock() {
  if (lock_ || experiment_dir_.empty()) return;
  lock_.emplace(experiment_dir_);
  for (auto* dir : {&checkpoints_, &exports_}) {
    dir->set_writer(lock_->since(), lock_->holder_name());
    if (auto moved = dir->pass_future_generations()) emit(severity::warning, {dir->root().string(), *moved});
  }
}

CAIRN_DECL std::filesystem::path basic_checkpoint_manager::stage(save_directory& dir, std::int64_t iteration) {
  std::string staged;
  comm::all_succeed(comm_, "cannot prepare the save of " + dir.path(iteration).string(), [&] {
    if (comm_.rank() != 0) return;
    if (experiment_dir_.empty())
      throw training_error(training_errc::no_experiment_dir,
                           "run.experiment_dir: required to save checkpoints or exports");
    lock();
    if (lock_) lock_->check(); // a lease taken over: this run must not touch the saves again
    staged = dir.begin(iteration).string();
  });
  return comm::broadcast_string(comm_, staged);
}

CAIRN_DECL void basic_checkpoint_manager::abandon(save_directory& dir, std::int64_t iteration) {
  if (comm_.rank() != 0) return;
  // What this run staged is its own, even after its lease was taken over: on a store, a
  // generation no other run writes.
  auto staged = dir.staging(iteration);
  try {
    dir.abandon(iteration);
  } catch (std::exception const& e) {
    emit(severity::warning, {staged.string(), e.what()});
  }
}

CAIRN_DECL void basic_checkpoint_manager::commit(save_directory& dir, checkpoint_base_config const& schedule,
                                                 std::int64_t iteration, char const* kind, std::uint64_t bytes,
                                                 clock::time_point started, std::optional<double> paused, bool finite) {
  std::filesystem::path committed;
  try {
    comm::all_succeed(comm_, std::string("cannot commit ") + kind + " " + std::to_string(iteration), [&] {
      if (comm_.rank() != 0) return;
      boost::json::object info{{"kind", kind}, {"world_size", comm_.size()}};
      if (!finite) info["finite"] = false;
      if (lock_) lock_->check(); // a lease taken over: nothing more is committed
      committed = dir.commit(iteration, std::move(info));
    });
  } catch (...) {
    abandon(dir, iteration);
    throw;
  }
  if (comm_.rank() != 0) return;
  report(std::string("saved ") + kind, dir.path(iteration), bytes, started, paused);
  if (!finite)
    emit(severity::warning,
         {dir.path(iteration).string(), std::string("the ") + kind +
                                            " holds values that are not finite (NaN or infinity); its marker says so "
                                            "(\"finite\": false), and retention never deletes the newest finite save"});
  // The callback gets the folder that holds the save (on a store, its generation).
  if (schedule.callback.enabled()) callbacks_.start(schedule.callback, committed.string(), iteration, kind);
  callbacks_.reap();
  // Retention lists the saves and reads their markers: on the background thread, so that the
  // pause of a save does not grow with the saves kept. Two waiting for one directory are one.
  auto& known = &dir == &exports_ ? known_exports_ : known_checkpoints_;
  {
    std::lock_guard lock(known.mutex);
    known.committed.emplace_back(iteration, finite);
  }
  housekeeping_.post(dir.root().string(),
                     [this, &dir, &known, &schedule, iteration] { retain(dir, known, schedule, iteration); });
}

CAIRN_DECL void basic_checkpoint_manager::retain(save_directory& dir, known_saves& known,
                                                 checkpoint_base_config const& schedule, std::int64_t iteration) {
  try {
    if (!known.finite) { // the first retention of the run lists the saves; the next ones know them
      known.finite.emplace();
      for (auto it : dir.complete()) known.finite->emplace(it, std::nullopt);
    }
    auto& saves = *known.finite;
    {
      std::lock_guard lock(known.mutex);
      for (auto [it, finite] : known.committed) saves[it] = finite;
      known.committed.clear();
    }
    std::vector<std::int64_t> complete;
    for (auto const& entry : saves) complete.push_back(entry.first);
    // Retention never deletes the newest save of finite values: a run that diverged keeps the
    // last state it can go back to, however many saves of NaN come after it.
    std::optional<std::int64_t> newest_finite;
    for (auto it = saves.rbegin(); it != saves.rend() && !newest_finite; ++it) {
      if (!it->second) it->second = dir.finite(it->first); // a marker read once
      if (*it->second) newest_finite = it->first;
    }
    if (!complete.empty() && newest_finite != complete.back())
      emit(severity::warning,
           {dir.path(complete.back()).string(),
            "holds values that are not finite: " +
                (newest_finite ? "retention keeps " + dir.path(*newest_finite).string() + ", the newest finite save"
                               : std::string("no finite save is left"))});
    for (auto old : schedule.to_delete(complete)) {
      if (old == iteration || old == newest_finite) continue;
      try {
        dir.remove(old);
        saves.erase(old);
      } catch (std::exception const& e) {
        emit(severity::warning, {dir.path(old).string(), std::string("retention could not remove it: ") + e.what()});
      }
    }
  } catch (std::exception const& e) {
    // A listing or a marker that cannot be read (a store that does not answer) says nothing of
    // which saves to keep: nothing is removed this time, and the next retention lists again.
    known.finite.reset();
    emit(severity::warning, {dir.root().string(), std::string("retention skipped, nothing removed: ") + e.what()});
  }
}

namespace detail {

/// Whether the tensor is finite (no NaN, no infinity), as far as its type can say.
inline bool finite(at::Tensor const& shard) {
  return !shard.defined() || !shard.is_floating_point() || shard.numel() == 0 || at::isfinite(shard).all().item<bool>();
}

} // namespace detail

CAIRN_DECL bool detail::finite_written(save_plan const& plan, model_state const& state, int rank) {
  std::set<std::string, std::less<>> written;
  for (auto const& file : plan.files)
    if (file.writer == rank)
      for (auto const& item : file.items) written.insert(item.parameter);
  for (auto const& p : state.parameters)
    if (written.contains(p.layout.name))
      for (auto const& shard : p.shards)
        if (!finite(shard)) return false;
  return true;
}

CAIRN_DECL bool basic_checkpoint_manager::all_finite(model_state const& state) {
  bool finite = true;
  for (auto const& p : state.parameters)
    for (auto const& shard : p.shards) finite = finite && detail::finite(shard);
  return comm::all_of(comm_, finite);
}

CAIRN_DECL void basic_checkpoint_manager::report(std::string const& what, std::filesystem::path const& path,
                                                 std::uint64_t bytes, clock::time_point started,
                                                 std::optional<double> paused) {
  if (comm_.rank() == 0)
    report_progress(what, path, bytes, std::chrono::duration<double>(clock::now() - started).count(), paused);
}

} // namespace cairn
