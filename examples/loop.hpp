#pragma once
// What both example trainers (cairn-train, cairn-llama) share around their model: the command
// line, and the training loop they run once their run has started (a step per iteration, its
// loss logged, saves, exports and stops as the run says).

#include <cairn/cairn.hpp>
#ifdef CAIRN_WITH_YAML
#include <cairn/config/yaml.hpp> // --config FILE.yaml, --print-config=yaml
#endif

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

namespace example {

/// Drops the `n` words after the program's name (a subcommand's own, `layout --world-size 4`
/// say), so that what follows parses as the config's command line.
inline void drop_arguments(int& argc, char**& argv, int n) {
  argv[n] = argv[0];
  argv += n;
  argc -= n;
}

/// The trainer's config from its command line: `--config FILE.json|FILE.yaml`, `key.path=value`
/// overrides, `--device`, `--help`, `--print-config`, `--schema`.
template <class Config> cairn::command_line_result<Config>
parse_trainer_command_line(int argc, char** argv, char const* program, std::string description) {
#ifdef CAIRN_WITH_YAML
  cairn::enable_yaml();
#endif
  cairn::command_line_options options;
  options.program = program;
  options.description = std::move(description);
  options.flags = {{"--device", "device"}};
  return cairn::parse_command_line<Config>(argc, argv, options);
}

/// Says on the leader how the run started: resumed, or initialised from `pretrained`.
inline void report_start(cairn::training_run const& run, std::int64_t start, bool leader) {
  if (leader && run.started().kind == cairn::start_kind::resumed)
    std::printf("resumed from %s at iteration %lld\n", run.started().path.c_str(), static_cast<long long>(start));
  if (leader && run.started().kind == cairn::start_kind::pretrained)
    std::printf("initialised from %s\n", run.started().path.c_str());
}

/// Trains iterations `start + 1` to `training.train_iters`: `step(iteration)` trains one and
/// returns its loss, `then(iteration)` runs after it is logged (validation, say); `run.step`
/// saves `state` on its schedules and says when to stop. The process's exit status; an error
/// when a loss is not finite, before that iteration is saved.
template <class Step, class Then> int train_loop(cairn::training_run& run, cairn::model_state const& state,
                                                 cairn::training_config const& training, std::int64_t start,
                                                 bool leader, Step step, Then then) {
  auto began = std::chrono::steady_clock::now();
  for (auto it = start + 1; it <= training.train_iters; ++it) {
    double loss = 0;
    try {
      loss = step(it);
      if (!std::isfinite(loss)) // before any save of it
        throw std::runtime_error("iteration " + std::to_string(it) +
                                 ": the loss is not finite; the run stops before saving it");
    } catch (std::exception const&) { // a step that fails (every rank alike): the saves in flight commit first
      run.finish();
      throw;
    }
    if (leader && (training.logs.enabled(it) || it == start + 1 || it == training.train_iters)) {
      auto ms = 1000 * std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
      std::printf("iteration %lld/%lld: loss %.6f (%.2f ms/iteration)\n", static_cast<long long>(it),
                  static_cast<long long>(training.train_iters), loss, ms / double(it - start));
      std::fflush(stdout);
    }
    then(it);
    if (auto stop = run.step(it, state, {{"loss", loss}})) {
      auto at = static_cast<long long>(it);
      if (leader && stop.kind() == cairn::stop_reason::signal)
        std::printf("stopped by a signal after iteration %lld\n", at);
      if (leader && stop.kind() == cairn::stop_reason::shutdown) std::printf("shutdown after iteration %lld\n", at);
      if (leader && stop.kind() == cairn::stop_reason::finished)
        std::printf("done: %lld iterations, final loss %.6f\n", at, loss);
      return stop.exit_status();
    }
  }
  run.finish();
  if (leader)
    std::printf("nothing to train: resumed at iteration %lld, training.train_iters is %lld\n",
                static_cast<long long>(start), static_cast<long long>(training.train_iters));
  return 0;
}

} // namespace example
