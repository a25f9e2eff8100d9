#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cairn {

// Every exception type cairn throws derives from cairn::error; the ones without a file path are
// here. cairn::io::io_error (a file that cannot be read, written or trusted; it carries the
// path) is in <cairn/io/error.hpp>, which needs <filesystem>.

/// The base of every exception cairn throws.
class error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// One problem found in a config or a file: where (a dotted key path, a file name) and what.
struct diagnostic {
  std::string path;
  std::string message;

  /// `path: message`, or the message alone when there is no path.
  [[nodiscard]] std::string to_string() const { return path.empty() ? message : path + ": " + message; }
  friend bool operator==(diagnostic const&, diagnostic const&) = default;
};

/// Every error of one config load, reported together.
class config_error : public error {
public:
  explicit config_error(std::vector<diagnostic> errors) : error(format(errors)), errors_(std::move(errors)) {}

  /// The individual errors, in the order they were found.
  [[nodiscard]] std::vector<diagnostic> const& errors() const noexcept { return errors_; }

private:
  static std::string format(std::vector<diagnostic> const& errors) {
    std::string text =
        errors.size() == 1 ? std::string("1 config error:") : std::to_string(errors.size()) + " config errors:";
    for (auto const& e : errors) {
      text += "\n  ";
      text += e.to_string();
    }
    return text;
  }

  std::vector<diagnostic> errors_;
};

/// A checkpoint that cannot be saved or loaded as asked: every problem of every rank, each
/// naming the file or parameter, reported together.
class checkpoint_error : public error {
public:
  checkpoint_error(std::string const& what, std::vector<diagnostic> problems)
      : error(format(what, problems)), problems_(std::move(problems)) {}

  [[nodiscard]] std::vector<diagnostic> const& problems() const noexcept { return problems_; }

private:
  static std::string format(std::string const& what, std::vector<diagnostic> const& problems) {
    std::string text =
        what + ": " + std::to_string(problems.size()) + (problems.size() == 1 ? " problem" : " problems");
    for (auto const& p : problems) text += "\n  " + p.to_string();
    return text;
  }

  std::vector<diagnostic> problems_;
};

} // namespace cairn
