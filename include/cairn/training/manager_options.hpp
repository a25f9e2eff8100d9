#pragma once

// How a checkpoint_manager saves, resumes and stops. No libtorch.

#include <cairn/checkpoint/verify.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/training/preemption.hpp>

#include <boost/json/value.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace cairn {

/// How a checkpoint_manager saves, resumes and stops.
struct manager_options {
  /// Write checkpoints on a background thread. Training then pauses only while the state is
  /// copied to host memory (pinned, for GPU state); the copy costs host memory of the size of
  /// this rank's state. Exports are always written in the foreground.
  bool async = true;
  /// Whether resuming checks the checksums of what it reads.
  verification verify = verification::checksums;
  /// The program's whole config, stored with every save.
  boost::json::value program_config;
  /// What differs in the model's architecture between a checkpoint's stored program config and
  /// this run's, as config errors (`model.hidden: 32 in the checkpoint …, 64 here`): a resume
  /// asks before it loads each checkpoint, and refuses at once where it is not empty, instead of
  /// a shape problem per parameter per checkpoint. `training_run` sets it; empty: not asked.
  std::function<std::vector<diagnostic>(boost::json::value const& stored, std::string const& path)> architecture_check;
  /// Signals on which `step()` stops the run after the current iteration, saving a checkpoint
  /// there when checkpoints are enabled. Any of them within `stop_signal_window` of the first is
  /// the same request; one after that ends the process at once. Empty: signals are left as they
  /// are.
  std::vector<int> stop_signals = default_stop_signals();
  std::chrono::milliseconds stop_signal_window = default_stop_signal_window;
  /// Whether `preflight()` also checks, on the experiment directory's filesystem, what saves
  /// rely on (`cairn::io::check_storage`: fsync, rename, flock, read-after-write, mmap) and
  /// refuses to start where any does not hold. A few milliseconds on a local disk.
  bool check_storage = false;
  /// Whether `training_run::step` says, on rank 0, how training goes at `training.logs.interval`:
  /// the iteration, the metrics handed to `step` and the time per iteration and left (`cairn:
  /// info: iteration 40/100: loss 0.0123 (12.5 ms/iteration, 0:00:08 left)`). Off for a trainer
  /// that prints its own (the example trainers).
  bool log_progress = true;
};

} // namespace cairn
