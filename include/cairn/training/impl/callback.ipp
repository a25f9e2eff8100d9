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

#include <cerrno>
#include <cstdint>
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
      if (end == std::string_view::npos) throw error("unterminated single quote");
      word.append(text.substr(i + 1, end - i - 1));
      i = end;
      in_word = true;
    } else if (c == '"') {
      for (++i;; ++i) {
        if (i >= text.size()) throw error("unterminated double quote");
        if (text[i] == '"') break;
        if (text[i] == '\\' && i + 1 < text.size() &&
            std::string_view("\"\\$`").find(text[i + 1]) != std::string_view::npos)
          ++i;
        word += text[i];
      }
      in_word = true;
    } else if (c == '\\') {
      if (++i >= text.size()) throw error("trailing backslash");
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
    if (errno != EINTR) throw error("waiting for process " + std::to_string(pid_) + ": " + std::strerror(errno));
  }
  if (done == 0) return std::nullopt;
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

CAIRN_DECL int child_process::wait() {
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0) {
    if (errno != EINTR) throw error("waiting for process " + std::to_string(pid_) + ": " + std::strerror(errno));
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

CAIRN_DECL child_process callback_config::run(std::map<std::string, std::string> const& extra) const {
  if (script.empty()) throw error("callback: no script to run");
  auto variables = environment;
  for (auto const& [key, value] : extra) variables[key] = value;
  pid_t pid = 0;
  int status = detail::spawn(script.argv, variables, nullptr, pid);
  if (status != 0) throw error("callback: cannot start '" + script.argv[0] + "': " + std::strerror(status));
  return child_process(pid);
}

CAIRN_DECL void running_callbacks::start(callback_config const& callback, std::string const& path,
                                         std::int64_t iteration, char const* kind) {
  try {
    running_.push_back({path, callback.run({{"CAIRN_CHECKPOINT_PATH", path},
                                            {"CAIRN_CHECKPOINT_ITERATION", std::to_string(iteration)},
                                            {"CAIRN_CHECKPOINT_KIND", kind}})});
  } catch (std::exception const& e) {
    emit(severity::warning, {path, e.what()});
  }
}

CAIRN_DECL void running_callbacks::reap() {
  std::erase_if(running_, [](running& c) {
    auto status = c.process.try_wait();
    if (status) check(c.path, *status);
    return status.has_value();
  });
}

CAIRN_DECL void running_callbacks::wait_all() {
  for (auto& c : running_) check(c.path, c.process.wait());
  running_.clear();
}

} // namespace cairn
