// Definitions of <cairn/training/run.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/save_load.hpp>
#include <cairn/comm/environment.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/training/manager.hpp>
#include <cairn/training/run.hpp>
#include <cairn/training/save_report.hpp>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace cairn {

namespace detail {

/// The signal named `name` (TERM, SIGTERM, KILL, INT, USR1, HUP), or 0.
inline int signal_named(std::string_view name) {
  if (name.starts_with("SIG")) name.remove_prefix(3);
  for (auto [text, number] : {std::pair{"TERM", SIGTERM},
                              {"KILL", SIGKILL},
                              {"INT", SIGINT},
                              {"USR1", SIGUSR1},
                              {"HUP", SIGHUP},
                              {"STOP", SIGSTOP}})
    if (name == text) return number;
  return 0;
}

/// The bytes of the files under `path`: what a load of the checkpoint there had to read.
inline std::uint64_t bytes_under(std::filesystem::path const& path) {
  std::uint64_t bytes = 0;
  std::error_code failed;
  for (std::filesystem::recursive_directory_iterator it(path, failed), end; !failed && it != end; it.increment(failed))
    if (it->is_regular_file(failed)) bytes += it->file_size(failed);
  return bytes;
}

} // namespace detail

CAIRN_DECL void training_run::finish_construction(manager_options options) {
  program_config_ = options.program_config;
  log_progress_ = options.log_progress;
  manager_ = std::make_unique<basic_checkpoint_manager>(config_.training, config_.run.experiment_dir, comm_,
                                                        std::move(options));
  if (converter_) manager_->set_converter(*converter_);
  if (auto const* hook = std::getenv("CAIRN_TEST_SIGNAL")) { // NAME@N[:R]: for tests of programs
    std::string_view text(hook);
    auto at = text.find('@'), colon = text.find(':');
    auto signal = detail::signal_named(text.substr(0, at));
    if (signal == 0 || at == std::string_view::npos)
      throw config_error(
          std::vector<diagnostic>{{"CAIRN_TEST_SIGNAL", "'" + std::string(text) + "' is not NAME@ITERATION[:RANK]"}});
    test_signal_ = {signal, std::stoll(std::string(text.substr(at + 1, colon - at - 1)))};
    if (colon != std::string_view::npos) test_signal_rank_ = std::stoi(std::string(text.substr(colon + 1)));
  }
}

CAIRN_DECL std::int64_t training_run::start(model_state& state) {
  if (auto resumed = manager_->resume(state)) {
    started_ = {start_kind::resumed, resumed->iteration, resumed->path};
  } else if (plan_.kind == start_kind::pretrained) {
    auto began = std::chrono::steady_clock::now();
    auto loaded = checkpoints().load(state, config_.pretrained);
    started_ = {start_kind::pretrained, 0, config_.pretrained.path};
    if (comm_.rank() == 0) // once, as a resume says what it loaded
      report_progress(std::string("loaded pretrained checkpoint (") + format_name(loaded.format) + " format)",
                      config_.pretrained.path, detail::bytes_under(config_.pretrained.path),
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
  } else {
    started_ = {};
  }
  manager_->preflight(state);
  logged_iteration_ = started_.iteration;
  logged_at_ = std::chrono::steady_clock::now();
  return started_.iteration;
}

CAIRN_DECL void training_run::log_progress(std::int64_t iteration, boost::json::value const& metrics) {
  auto now = std::chrono::steady_clock::now();
  auto done = iteration - logged_iteration_;
  if (done <= 0) return;
  auto seconds = std::chrono::duration<double>(now - logged_at_).count() / double(done);
  auto total = config_.training.train_iters;
  std::string text = "iteration " + std::to_string(iteration) + (total > 0 ? "/" + std::to_string(total) : "");
  char number[64];
  std::string values;
  if (auto const* object = metrics.if_object())
    for (auto const& [key, value] : *object)
      if (value.is_number()) {
        std::snprintf(number, sizeof number, "%.6g", value.to_number<double>());
        values += (values.empty() ? ": " : ", ") + std::string(key) + " " + number;
      }
  std::snprintf(number, sizeof number, "%.3g", 1000 * seconds);
  text += values + " (" + number + " ms/iteration";
  if (total > iteration) {
    auto left = static_cast<std::int64_t>(seconds * double(total - iteration) + 0.5);
    std::snprintf(number, sizeof number, "%lld:%02lld:%02lld", static_cast<long long>(left / 3600),
                  static_cast<long long>(left / 60 % 60), static_cast<long long>(left % 60));
    text += std::string(", ") + number + " left";
  }
  emit(severity::info, {"", text + ")"});
  logged_iteration_ = iteration;
  logged_at_ = now;
}

CAIRN_DECL stop_reason training_run::step(std::int64_t iteration, model_state const& state,
                                          boost::json::value const& metrics) {
  if (test_signal_ && test_signal_->second == iteration && (!test_signal_rank_ || *test_signal_rank_ == comm_.rank()))
    std::raise(test_signal_->first);
  manager_->step(iteration, state, metrics);
  if (log_progress_ && comm_.rank() == 0 && config_.training.logs.enabled(iteration))
    log_progress(iteration, metrics);
  return manager_->last_stop();
}

CAIRN_DECL checkpointer training_run::checkpoints() const { return checkpointer(comm_, program_config_, converter_); }

} // namespace cairn
