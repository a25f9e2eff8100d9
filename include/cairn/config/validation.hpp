#pragma once

#include <cairn/config/read_context.hpp>
#include <cairn/error.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn {

/// Passed to a config's `void validate(cairn::validation&)`, which runs after its fields (and
/// its nested configs) passed their checks. Keys are relative to the config being validated.
class validation {
public:
  explicit validation(std::vector<diagnostic> errors = {}) : errors_(std::move(errors)) {}

  void error(std::string_view key, std::string message) { errors_.push_back({join(key), std::move(message)}); }
  void warning(std::string_view key, std::string message) { warnings_.push_back({join(key), std::move(message)}); }

  /// The full path of `key` of the config being validated.
  [[nodiscard]] std::string join(std::string_view key) const {
    if (key.empty()) return path_;
    return path_.empty() ? std::string(key) : path_ + '.' + std::string(key);
  }
  [[nodiscard]] std::string const& path() const noexcept { return path_; }
  [[nodiscard]] std::vector<diagnostic> const& errors() const noexcept { return errors_; }
  [[nodiscard]] std::vector<diagnostic> const& warnings() const noexcept { return warnings_; }

  /// Whether an error was recorded at `path` or below it.
  [[nodiscard]] bool has_errors_under(std::string_view path) const {
    for (auto const& e : errors_) {
      std::string_view p = e.path;
      if (path.empty() || p == path ||
          (p.size() > path.size() && p.starts_with(path) && (p[path.size()] == '.' || p[path.size()] == '[')))
        return true;
    }
    return false;
  }

  /// Descends into `key` (or `[index]`) until the returned guard goes out of scope.
  template <class Key> [[nodiscard]] detail::path_guard enter(Key const& key) { return {path_, key}; }

private:
  std::string path_;
  std::vector<diagnostic> errors_;
  std::vector<diagnostic> warnings_;
};

} // namespace cairn
