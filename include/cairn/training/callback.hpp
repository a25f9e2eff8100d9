#pragma once

#include <cairn/config/field.hpp>
#include <cairn/config/read_context.hpp>
#include <cairn/config/value.hpp>
#include <cairn/detail/spawn.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/error.hpp>

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

/// A program and its arguments. In JSON either an argv list (`["sync.sh", "--fast"]`) or one
/// string split the way a POSIX shell splits words (`"sync.sh --dest 'a b'"`): quotes and
/// backslashes are honoured, but nothing is expanded and no shell ever runs.
struct command {
  std::vector<std::string> argv;

  [[nodiscard]] bool empty() const noexcept { return argv.empty(); }
  friend bool operator==(command const&, command const&) = default;
};

/// Splits `text` into words like a POSIX shell, without expansions. Throws cairn::error on an
/// unterminated quote or a trailing backslash.
inline std::vector<std::string> split_words(std::string_view text) {
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

template <> struct value_traits<command> {
  static void read(boost::json::value const& j, command& v, read_context& ctx) {
    if (j.is_string()) {
      try {
        v.argv = split_words(j.get_string());
      } catch (error const& e) {
        ctx.error(e.what());
      }
    } else if (j.is_array()) {
      value_traits<std::vector<std::string>>::read(j, v.argv, ctx);
    } else {
      ctx.error("expected a command (a string or a list of strings), got " + detail::describe_json(j));
    }
  }
  static boost::json::value write(command const& v) { return value_traits<std::vector<std::string>>::write(v.argv); }
  static std::string type_name() { return "command"; }
  static void schema(boost::json::object& s) {
    s["anyOf"] = boost::json::array{boost::json::object{{"type", "string"}},
                                    boost::json::object{{"type", "array"}, {"items", {{"type", "string"}}}}};
  }
};

/// A started child process. `wait()` collects it; a process never waited for is reaped if it
/// has finished when this object goes, and otherwise left to run.
class child_process {
public:
  explicit child_process(pid_t pid) : pid_(pid) {}
  child_process(child_process&& other) noexcept : pid_(std::exchange(other.pid_, -1)) {}
  child_process& operator=(child_process&& other) noexcept {
    std::swap(pid_, other.pid_);
    return *this;
  }
  child_process(child_process const&) = delete;
  child_process& operator=(child_process const&) = delete;
  ~child_process() {
    if (pid_ > 0) ::waitpid(pid_, nullptr, WNOHANG);
  }

  [[nodiscard]] pid_t pid() const noexcept { return pid_; }

  /// Its exit status (as `wait()` gives it) if it has ended, nothing while it runs.
  std::optional<int> try_wait() {
    int status = 0;
    pid_t done = 0;
    while ((done = ::waitpid(pid_, &status, WNOHANG)) < 0) {
      if (errno != EINTR) throw error("waiting for process " + std::to_string(pid_) + ": " + std::strerror(errno));
    }
    if (done == 0) return std::nullopt;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  /// Blocks until the process ends; its exit status, or 128 + the signal that ended it.
  int wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0) {
      if (errno != EINTR) throw error("waiting for process " + std::to_string(pid_) + ": " + std::strerror(errno));
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

private:
  pid_t pid_;
};

/// A program run after a save or export completes, with extra environment variables.
struct callback_config {
  command script;
  std::map<std::string, std::string> environment;

  [[nodiscard]] bool enabled() const noexcept { return !script.empty(); }

  /// Starts the script without a shell and without waiting for it, in the current environment
  /// plus `environment` plus `extra` (later ones win). Throws cairn::error naming the program
  /// when it cannot be started (not found, not executable).
  [[nodiscard]] child_process run(std::map<std::string, std::string> const& extra = {}) const {
    if (script.empty()) throw error("callback: no script to run");
    auto variables = environment;
    for (auto const& [key, value] : extra) variables[key] = value;
    pid_t pid = 0;
    int status = detail::spawn(script.argv, variables, nullptr, pid);
    if (status != 0) throw error("callback: cannot start '" + script.argv[0] + "': " + std::strerror(status));
    return child_process(pid);
  }
};
BOOST_DESCRIBE_STRUCT(callback_config, (), (script, environment))

/// The callbacks started after saves, each reported (as a warning) when it fails: they run
/// while training goes on and are collected as they end.
class running_callbacks {
public:
  /// Starts `callback` for the save at `path` with the CAIRN_CHECKPOINT_* variables set; a
  /// callback that cannot start is a warning, not an error (the save is complete).
  void start(callback_config const& callback, std::string const& path, std::int64_t iteration, char const* kind) {
    try {
      running_.push_back({path, callback.run({{"CAIRN_CHECKPOINT_PATH", path},
                                              {"CAIRN_CHECKPOINT_ITERATION", std::to_string(iteration)},
                                              {"CAIRN_CHECKPOINT_KIND", kind}})});
    } catch (std::exception const& e) {
      emit(severity::warning, {path, e.what()});
    }
  }

  /// Collects those that have ended.
  void reap() {
    std::erase_if(running_, [](running& c) {
      auto status = c.process.try_wait();
      if (status) check(c.path, *status);
      return status.has_value();
    });
  }

  /// Waits for every one still running.
  void wait_all() {
    for (auto& c : running_) check(c.path, c.process.wait());
    running_.clear();
  }

private:
  struct running {
    std::string path;
    child_process process;
  };
  static void check(std::string const& path, int status) {
    if (status != 0) emit(severity::warning, {path, "callback exited with status " + std::to_string(status)});
  }
  std::vector<running> running_;
};

constexpr auto cairn_fields(callback_config const*) {
  return fields(field(&callback_config::script,
                      "Program run after each save completes, as an argv list or one string split like a shell "
                      "would (no shell runs). Empty disables.",
                      hint::feature),
                field(&callback_config::environment, "Environment variables added for the script.", hint::feature));
}

} // namespace cairn
