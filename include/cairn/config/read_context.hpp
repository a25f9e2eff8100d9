#pragma once

#include <cairn/error.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn {

namespace detail {

/// Appends `.key` or `[index]` to a dotted path, and takes it off again when destroyed.
class path_guard {
public:
  path_guard(std::string& path, std::string_view key) : path_(path), size_(path.size()) {
    if (!path_.empty()) path_ += '.';
    path_ += key;
  }
  path_guard(std::string& path, std::size_t index) : path_(path), size_(path.size()) {
    path_ += '[';
    path_ += std::to_string(index);
    path_ += ']';
  }
  path_guard(path_guard const&) = delete;
  path_guard& operator=(path_guard const&) = delete;
  ~path_guard() { path_.resize(size_); }

private:
  std::string& path_;
  std::size_t size_;
};

} // namespace detail

/// What to do with a key that no field of the config matches.
enum class unknown_keys { error, collect };

/// The state of one read: the key path being read, and the errors and unknown keys found so far.
/// User-defined `value_traits` report problems through `error()`; the path is added for them.
class read_context {
public:
  explicit read_context(unknown_keys policy = unknown_keys::error) : policy_(policy) {}

  /// Records an error at the current path.
  void error(std::string message) { errors_.push_back({path_, std::move(message)}); }
  /// Records an error at `key` below the current path.
  void error(std::string_view key, std::string message) { errors_.push_back({join(key), std::move(message)}); }
  /// Records a key no field matched: an error, or collected, as the policy says.
  void unknown_key(std::string_view key, std::string message) {
    if (policy_ == unknown_keys::error)
      error(key, std::move(message));
    else
      unknown_.push_back(join(key));
  }

  [[nodiscard]] std::string const& path() const noexcept { return path_; }
  [[nodiscard]] std::string join(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + '.' + std::string(key);
  }
  [[nodiscard]] std::vector<diagnostic> const& errors() const noexcept { return errors_; }
  [[nodiscard]] std::vector<diagnostic>& errors() noexcept { return errors_; }
  [[nodiscard]] std::vector<std::string> const& unknown() const noexcept { return unknown_; }

  /// Descends into `key` (or `[index]`) until the returned guard goes out of scope.
  template <class Key> [[nodiscard]] detail::path_guard enter(Key const& key) { return {path_, key}; }

private:
  unknown_keys policy_;
  std::string path_;
  std::vector<diagnostic> errors_;
  std::vector<std::string> unknown_;
};

} // namespace cairn
