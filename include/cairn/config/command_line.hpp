#pragma once

// The command line every trainer has: `--config FILE`, `key.path=value` overrides, `--help`,
// `--schema`, `--print-config`. No libtorch.

#include <cairn/config/docs.hpp>
#include <cairn/config/json.hpp>
#include <cairn/detail/decl.hpp>

#include <cstdio>
#include <exception>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace cairn {

/// How `parse_command_line` reads and answers.
struct command_line_options {
  std::string program;     ///< the name in usage and errors; empty: the base name of argv[0]
  std::string description; ///< a line or two that `--help` prints above the usage
  /// Flags that set one key: `{"--device", "device"}` makes `--device cuda` the override
  /// `device=cuda`.
  std::map<std::string, std::string> flags;
  std::FILE* out = stdout; ///< where --help, --schema and --print-config go
  std::FILE* err = stderr; ///< where errors go
};

/// What the command line asked for: a validated config to run with, or an exit status when the
/// request was answered already (`--help`, `--schema`, `--print-config`: 0) or refused (an
/// unknown argument, an unreadable file, an invalid config: 2, every error printed).
template <class T> class command_line_result {
public:
  explicit command_line_result(T config) : config_(std::move(config)) {}
  explicit command_line_result(int status) : status_(status) {}

  [[nodiscard]] explicit operator bool() const noexcept { return config_.has_value(); }
  T& operator*() { return *config_; }
  T const& operator*() const { return *config_; }
  T* operator->() { return &*config_; }
  T const* operator->() const { return &*config_; }
  /// The status to exit with when there is no config to run with.
  [[nodiscard]] int exit_status() const noexcept { return status_; }

private:
  std::optional<T> config_;
  int status_ = 0;
};

namespace detail {

/// What the arguments ask for, before any config is read.
struct command_line_request {
  enum class action { run, help, schema, print_config, refused } what = action::run;
  std::string program;
  std::optional<std::string> file;
  std::vector<std::string> overrides;
  std::string print_format = "json";
};

CAIRN_DECL command_line_request read_arguments(std::span<char const* const> arguments,
                                               command_line_options const& options);

/// Answers the request for the config type of `ops`: prints what was asked, or reads the config
/// into `config` (a `T{}`). Returns the exit status, or -1 when `config` is ready to run with.
CAIRN_DECL int answer(command_line_request const& request, command_line_options const& options, config_ops const& ops,
                      void* config);

} // namespace detail

/// Reads a trainer's command line:
///
///     int main(int argc, char** argv) {
///       auto cfg = cairn::parse_command_line<my_config>(argc, argv);
///       if (!cfg) return cfg.exit_status();
///       train(*cfg);
///     }
///
/// Accepted: `--config FILE` (JSON, or YAML when the program includes
/// <cairn/config/yaml.hpp>), then `key.path=value` overrides in order; `--help` (usage and the
/// documentation tree of T), `--schema` (its JSON Schema), `--print-config[=json|yaml]` (the
/// resolved, validated config, then exit); the flags of `options.flags`.
template <described_config T>
command_line_result<T> parse_command_line(int argc, char const* const* argv, command_line_options const& options = {}) {
  auto request = detail::read_arguments({argv, static_cast<std::size_t>(argc)}, options);
  T config{};
  int status = detail::answer(request, options, detail::config_of<T>(), &config);
  if (status >= 0) return command_line_result<T>(status);
  return command_line_result<T>(std::move(config));
}

template <described_config T>
command_line_result<T> parse_command_line(int argc, char** argv, command_line_options const& options = {}) {
  return parse_command_line<T>(argc, const_cast<char const* const*>(argv), options);
}

/// What `run()` returns, or the exit status of the error it threw, printed on stderr after
/// `program`: 2 for a config error (every error listed), 1 for any other. What a program's
/// `main` wraps its work in, so that no error ends it with an abort.
///
///     return cairn::exit_status("my-trainer", [&] { return train(std::move(*cfg)); });
template <class Run> int exit_status(char const* program, Run&& run) {
  try {
    return std::forward<Run>(run)();
  } catch (config_error const& e) {
    std::fprintf(stderr, "%s: invalid configuration: %s\n", program, e.what());
    return 2;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    return 1;
  }
}

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/config/impl/command_line.ipp>
#endif
