#pragma once

#include <cairn/config/check.hpp>
#include <cairn/config/field.hpp>
#include <cairn/config/read_context.hpp>
#include <cairn/config/reflect.hpp> // value_traits of std::vector
#include <cairn/config/value.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/detail/spawn.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/error.hpp>

#include <boost/describe/class.hpp>
#include <boost/json/value.hpp>

#include <cerrno>
#include <chrono>
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
CAIRN_DECL std::vector<std::string> split_words(std::string_view text);

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

/// A started child process, the leader of a process group of its own (what it starts goes with
/// it when it is stopped). `wait()` collects it; a process never waited for is reaped if it has
/// finished when this object goes, and otherwise left to run.
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
  CAIRN_DECL std::optional<int> try_wait();

  /// Blocks until the process ends; its exit status, or 128 + the signal that ended it.
  CAIRN_DECL int wait();

  /// Waits at most `limit` for the process to end: its exit status, or nothing while it runs.
  CAIRN_DECL std::optional<int> wait_for(std::chrono::milliseconds limit);

  /// Stops the process and its group: SIGTERM, then SIGKILL when it has not ended within
  /// `grace`. Its exit status.
  CAIRN_DECL int stop(std::chrono::milliseconds grace = std::chrono::seconds(5));

private:
  pid_t pid_;
};

/// A program run after a save or export completes, with extra environment variables.
struct callback_config {
  command script;
  std::map<std::string, std::string> environment;
  /// Seconds a run of the script may take; one that takes longer is stopped (with a warning).
  std::optional<double> timeout = 3600.0;
  /// Runs of the script at once; a save that would start one more first waits for the oldest.
  std::int64_t max_running = 4;

  [[nodiscard]] bool enabled() const noexcept { return !script.empty(); }

  /// Starts the script without a shell and without waiting for it, in a process group of its
  /// own (it gets SIGTERM if the program ends without waiting for it), in the current
  /// environment plus `environment` plus `extra` (later ones win). Throws
  /// cairn::error naming the program when it cannot be started (not found, not executable).
  [[nodiscard]] CAIRN_DECL child_process run(std::map<std::string, std::string> const& extra = {}) const;
};
BOOST_DESCRIBE_STRUCT(callback_config, (), (script, environment, timeout, max_running))

/// The callbacks started after saves, each reported (as a warning) when it fails or overruns
/// its timeout: they run while training goes on and are collected as they end. None runs longer
/// than its timeout, and no more than its `max_running` at once.
class running_callbacks {
public:
  using clock = std::chrono::steady_clock;

  /// Starts `callback` for the save at `path` with the CAIRN_CHECKPOINT_* variables set, after
  /// waiting for the oldest while `max_running` are running; a callback that cannot start is a
  /// warning, not an error (the save is complete).
  CAIRN_DECL void start(callback_config const& callback, std::string const& path, std::int64_t iteration,
                        char const* kind);

  /// Collects those that have ended, and stops those past their timeout.
  CAIRN_DECL void reap();

  /// Waits for every one still running, each at most until its timeout.
  CAIRN_DECL void wait_all();

  [[nodiscard]] std::size_t size() const noexcept { return running_.size(); }

private:
  struct running {
    std::string path;
    child_process process;
    std::optional<clock::time_point> deadline;
    double timeout = 0;
  };
  static void check(std::string const& path, int status) {
    if (status != 0) emit(severity::warning, {path, "callback exited with status " + std::to_string(status)});
  }
  /// Waits for `c` until its deadline, then stops it; reports how it ended.
  CAIRN_DECL static void finish(running& c);
  std::vector<running> running_;
};

constexpr auto cairn_fields(callback_config const*) {
  return fields(field(&callback_config::script,
                      "Program run after each save completes, as an argv list or one string split like a shell "
                      "would (no shell runs). Empty disables.",
                      hint::feature),
                field(&callback_config::environment, "Environment variables added for the script.", hint::feature),
                field(&callback_config::timeout,
                      "Seconds a run of the script may take before it is stopped (SIGTERM to its process group, "
                      "then SIGKILL). Unset: no limit.",
                      hint::optional, check::positive),
                field(&callback_config::max_running,
                      "Runs of the script at once; a save that would start one more first waits for the oldest.",
                      hint::optional, check::positive));
}

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/training/impl/callback.ipp>
#endif
