// Definitions of <cairn/training/callback.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/config/field.hpp>
#include <cairn/config/read_context.hpp>
#include <cairn/config/value.hpp>
#include <cairn/detail/spawn.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/error.hpp>
#include <cairn/training/callback.hpp>

#include <boost/describe/class.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace cairn {

CAIRN_DECL std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::exchange(word, {}));
      in_word = false;
    } else if (c == '\'') {
      auto end = text.find('\'', i + 1);
      if (end == std::string_view::npos) throw training_error(training_errc::callback, "unterminated single quote");
      word.append(text.substr(i + 1, end - i - 1));
      i = end;
      in_word = true;
    } else if (c == '"') {
      for (++i;; ++i) {
        if (i >= text.size()) throw training_error(training_errc::callback, "unterminated double quote");
        if (text[i] == '"') break;
        if (text[i] == '\\' && i + 1 < text.size() &&
            std::string_view("\"\\$`").find(text[i + 1]) != std::string_view::npos)
          ++i;
        word += text[i];
      }
      in_word = true;
    } else if (c == '\\') {
      if (++i >= text.size()) throw training_error(training_errc::callback, "trailing backslash");
      if (text[i] != '\n') word += text[i];
      in_word = true;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

CAIRN_DECL std::optional<int> child_process::try_wait() {
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(pid_, &status, WNOHANG)) < 0) {
    if (errno != EINTR)
      throw training_error(training_errc::callback,
                           "waiting for process " + std::to_string(pid_) + ": " + std::strerror(errno));
  }
  if (done == 0) return std::nullopt;
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

CAIRN_DECL int child_process::wait() {
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0) {
    if (errno != EINTR)
      throw training_error(training_errc::callback,
                           "waiting for process " + std::to_string(pid_) + ": " + std::strerror(errno));
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

CAIRN_DECL std::optional<int> child_process::wait_for(std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (auto pause = std::chrono::milliseconds(1);; pause = std::min(pause * 2, std::chrono::milliseconds(50))) {
    if (auto status = try_wait()) return status;
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return std::nullopt;
    ::usleep(static_cast<useconds_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                         std::min<std::chrono::steady_clock::duration>(left, pause))
                                         .count()));
  }
}

CAIRN_DECL int child_process::stop(std::chrono::milliseconds grace) {
  ::kill(-pid_, SIGTERM);
  if (auto status = wait_for(grace)) return *status;
  ::kill(-pid_, SIGKILL);
  return wait();
}

CAIRN_DECL child_process callback_config::run(std::map<std::string, std::string> const& extra) const {
  if (script.empty()) throw training_error(training_errc::callback, "callback: no script to run");
  auto variables = environment;
  for (auto const& [key, value] : extra) variables[key] = value;
  pid_t pid = 0;
  detail::process_options how;
  how.own_group = true;              // stopped with what it starts
  how.parent_death_signal = SIGTERM; // and told to stop when the program ends without waiting for it
  int status = detail::start_process(script.argv, variables, how, pid);
  if (status != 0)
    throw training_error(training_errc::callback,
                         "callback: cannot start '" + script.argv[0] + "': " + std::strerror(status));
  return child_process(pid);
}

CAIRN_DECL void running_callbacks::finish(running& c) {
  std::optional<int> status;
  if (!c.deadline) {
    status = c.process.wait();
  } else {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*c.deadline - clock::now());
    status = c.process.wait_for(std::max(left, std::chrono::milliseconds(0)));
  }
  if (status) {
    check(c.path, *status);
    return;
  }
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", c.timeout);
  emit(severity::warning, {c.path, std::string("callback still running after its timeout of ") + seconds +
                                       " s: stopped (with its process group)"});
  c.process.stop();
}

CAIRN_DECL void running_callbacks::start(callback_config const& callback, std::string const& path,
                                         std::int64_t iteration, char const* kind) {
  reap();
  while (!running_.empty() && static_cast<std::int64_t>(running_.size()) >= callback.max_running) {
    emit(severity::warning, {path, std::to_string(running_.size()) +
                                       " callbacks of earlier saves still run (max_running): waiting for the "
                                       "oldest before starting this one"});
    finish(running_.front());
    running_.erase(running_.begin());
  }
  try {
    auto process = callback.run({{"CAIRN_CHECKPOINT_PATH", path},
                                 {"CAIRN_CHECKPOINT_ITERATION", std::to_string(iteration)},
                                 {"CAIRN_CHECKPOINT_KIND", kind}});
    std::optional<clock::time_point> deadline;
    if (callback.timeout)
      deadline =
          clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(*callback.timeout));
    running_.push_back({path, std::move(process), deadline, callback.timeout.value_or(0)});
  } catch (std::exception const& e) {
    emit(severity::warning, {path, e.what()});
  }
}

CAIRN_DECL void running_callbacks::reap() {
  auto now = clock::now();
  std::erase_if(running_, [&](running& c) {
    auto status = c.process.try_wait();
    if (status) {
      check(c.path, *status);
      return true;
    }
    if (c.deadline && now >= *c.deadline) {
      finish(c);
      return true;
    }
    return false;
  });
}

CAIRN_DECL void running_callbacks::wait_all() {
  for (auto& c : running_) finish(c);
  running_.clear();
}

} // namespace cairn
