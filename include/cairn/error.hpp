#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace cairn {

// Every exception cairn throws derives from cairn::error and carries a kind: a std::error_code
// whose category names the layer (cairn.config, cairn.io, cairn.comm, cairn.checkpoint,
// cairn.training) and whose value says what went wrong, so that a caller (or a test) matches
// the kind and leaves the message, which is for people, alone:
//
//   catch (cairn::error const& e) { if (e.kind() == cairn::training_errc::in_use) ...; }
//
// Messages read `where: what`, where names the file, key, parameter or rank. A system call's
// failure carries errno's std::errc (compare with std::errc::no_space_on_device, ...).
// cairn::io::io_error (a file that cannot be read, written or trusted; it carries the path) is
// in <cairn/io/error.hpp>, which needs <filesystem>.

/// What is wrong with a config: its keys, values or the relations between them.
enum class config_errc {
  invalid = 1, ///< one or more keys are unknown, malformed or inconsistent (see config_error)
};

/// What is wrong with a file's bytes or a buffer handed to the file layer.
enum class io_errc {
  malformed = 1,     ///< the file is not what it claims: truncated, unparsable, inconsistent
  too_large,         ///< a header, a file or a dimension exceeds what cairn reads
  unsupported,       ///< a well-formed file uses something cairn does not read (a dtype, a kind)
  invalid_argument,  ///< a box, buffer or conversion that the caller got wrong
  checksum_mismatch, ///< the bytes differ from the checksum recorded when they were written
  storage,           ///< the storage refused or failed a request (an object store's HTTP error)
};

/// What went wrong between ranks: their environment, their launch, their collectives.
enum class comm_errc {
  environment = 1, ///< RANK, WORLD_SIZE, LOCAL_RANK or the visible devices are missing or wrong
  launch,          ///< the launcher cannot start the ranks (sockets, pipes, ports, file limits)
  unreachable,     ///< no rendezvous store answers
  backend,         ///< the collective library (NCCL, CUDA, Gloo) failed or was aborted
  timeout,         ///< a collective did not finish within the run's collective_timeout
  other_rank,      ///< another rank failed; its kind was not one of cairn's
};

/// Why a checkpoint cannot be saved, loaded or converted as asked.
enum class checkpoint_errc {
  invalid_request = 1, ///< the call's own arguments: a format, a load option, nothing to convert
  needs_converter,     ///< the external format needs the model's converter, and none was given
  invalid_state,       ///< the state handed to save or load is inconsistent (shards, shapes, Adam)
  missing_tensor,      ///< the checkpoint or the model lacks a tensor the other names
  incomplete,          ///< the save is partial or does not cover every element
  mismatch,            ///< the checkpoint was written for another model, layout or iteration
  refused,             ///< one or more problems, listed by checkpoint_error::problems()
};

/// Why a training run cannot go on: its directory, its storage, its checkpoints, its callbacks.
enum class training_errc {
  no_experiment_dir = 1, ///< run.experiment_dir is needed and empty
  in_use,                ///< another run holds the experiment directory
  storage,               ///< the filesystem lacks space or what checkpoints rely on
  no_checkpoint,         ///< resume finds no checkpoint it can load
  callback,              ///< a callback command cannot be parsed, started or waited for
};

namespace detail {

template <class E> struct errc_names;
template <> struct errc_names<config_errc> {
  static constexpr char const* category = "cairn.config";
  static char const* message(config_errc) { return "invalid config"; }
};
template <> struct errc_names<io_errc> {
  static constexpr char const* category = "cairn.io";
  static char const* message(io_errc e) {
    switch (e) {
    case io_errc::malformed:
      return "malformed file";
    case io_errc::too_large:
      return "too large";
    case io_errc::unsupported:
      return "unsupported content";
    case io_errc::invalid_argument:
      return "invalid argument";
    case io_errc::checksum_mismatch:
      return "checksum mismatch";
    case io_errc::storage:
      return "storage request failed";
    }
    return "unknown io error";
  }
};
template <> struct errc_names<comm_errc> {
  static constexpr char const* category = "cairn.comm";
  static char const* message(comm_errc e) {
    switch (e) {
    case comm_errc::environment:
      return "bad rank environment";
    case comm_errc::launch:
      return "cannot launch the ranks";
    case comm_errc::unreachable:
      return "rendezvous unreachable";
    case comm_errc::backend:
      return "collective backend failed";
    case comm_errc::timeout:
      return "collective timed out";
    case comm_errc::other_rank:
      return "another rank failed";
    }
    return "unknown comm error";
  }
};
template <> struct errc_names<checkpoint_errc> {
  static constexpr char const* category = "cairn.checkpoint";
  static char const* message(checkpoint_errc e) {
    switch (e) {
    case checkpoint_errc::invalid_request:
      return "invalid checkpoint request";
    case checkpoint_errc::needs_converter:
      return "the external format needs a converter";
    case checkpoint_errc::invalid_state:
      return "inconsistent model state";
    case checkpoint_errc::missing_tensor:
      return "missing tensor";
    case checkpoint_errc::incomplete:
      return "incomplete checkpoint";
    case checkpoint_errc::mismatch:
      return "checkpoint does not match";
    case checkpoint_errc::refused:
      return "checkpoint refused";
    }
    return "unknown checkpoint error";
  }
};
template <> struct errc_names<training_errc> {
  static constexpr char const* category = "cairn.training";
  static char const* message(training_errc e) {
    switch (e) {
    case training_errc::no_experiment_dir:
      return "no experiment directory";
    case training_errc::in_use:
      return "experiment directory in use";
    case training_errc::storage:
      return "unfit storage";
    case training_errc::no_checkpoint:
      return "no checkpoint to resume from";
    case training_errc::callback:
      return "callback failed";
    }
    return "unknown training error";
  }
};

template <class E> class errc_category final : public std::error_category {
public:
  [[nodiscard]] char const* name() const noexcept override { return errc_names<E>::category; }
  [[nodiscard]] std::string message(int value) const override { return errc_names<E>::message(static_cast<E>(value)); }
};

template <class E> std::error_category const& category_of() noexcept {
  static errc_category<E> const category;
  return category;
}

/// The category of cairn's (or the standard library's) named `name`: how a kind crosses ranks.
inline std::error_category const* category_named(std::string_view name) noexcept {
  for (auto const* c : {&category_of<config_errc>(), &category_of<io_errc>(), &category_of<comm_errc>(),
                        &category_of<checkpoint_errc>(), &category_of<training_errc>(), &std::generic_category(),
                        &std::system_category()})
    if (name == c->name()) return c;
  return nullptr;
}

} // namespace detail

inline std::error_code make_error_code(config_errc e) noexcept {
  return {static_cast<int>(e), detail::category_of<config_errc>()};
}
inline std::error_code make_error_code(io_errc e) noexcept {
  return {static_cast<int>(e), detail::category_of<io_errc>()};
}
inline std::error_code make_error_code(comm_errc e) noexcept {
  return {static_cast<int>(e), detail::category_of<comm_errc>()};
}
inline std::error_code make_error_code(checkpoint_errc e) noexcept {
  return {static_cast<int>(e), detail::category_of<checkpoint_errc>()};
}
inline std::error_code make_error_code(training_errc e) noexcept {
  return {static_cast<int>(e), detail::category_of<training_errc>()};
}

} // namespace cairn

template <> struct std::is_error_code_enum<cairn::config_errc> : std::true_type {};
template <> struct std::is_error_code_enum<cairn::io_errc> : std::true_type {};
template <> struct std::is_error_code_enum<cairn::comm_errc> : std::true_type {};
template <> struct std::is_error_code_enum<cairn::checkpoint_errc> : std::true_type {};
template <> struct std::is_error_code_enum<cairn::training_errc> : std::true_type {};

namespace cairn {

/// The base of every exception cairn throws: a message for people and a kind for programs.
class error : public std::runtime_error {
public:
  error(std::error_code kind, std::string const& what) : std::runtime_error(what), kind_(kind) {}
  /// An error without a kind, for code outside cairn (a legacy-key conversion, a converter)
  /// that reports through cairn; cairn itself always names the kind.
  explicit error(std::string const& what) : std::runtime_error(what) {}

  /// What went wrong, as a code of one of cairn's categories (or errno's for a system call).
  /// Empty (false) only for an error raised by code outside cairn.
  [[nodiscard]] std::error_code kind() const noexcept { return kind_; }

private:
  std::error_code kind_;
};

/// An error between ranks; kind is a comm_errc.
class comm_error : public error {
public:
  comm_error(comm_errc kind, std::string const& what) : error(kind, what) {}
};

/// An error of a training run; kind is a training_errc.
class training_error : public error {
public:
  training_error(training_errc kind, std::string const& what) : error(kind, what) {}
};

/// One problem found in a config or a file: where (a dotted key path, a file name) and what.
struct diagnostic {
  std::string path;
  std::string message;

  /// `path: message`, or the message alone when there is no path.
  [[nodiscard]] std::string to_string() const { return path.empty() ? message : path + ": " + message; }
  friend bool operator==(diagnostic const&, diagnostic const&) = default;
};

/// Every error of one config load, reported together; kind is config_errc::invalid.
class config_error : public error {
public:
  explicit config_error(std::vector<diagnostic> errors)
      : error(config_errc::invalid, format(errors)), errors_(std::move(errors)) {}

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

/// A checkpoint that cannot be saved or loaded as asked. Either one problem of a given kind, or
/// (kind checkpoint_errc::refused) every problem of every rank, each naming the file or
/// parameter, reported together.
class checkpoint_error : public error {
public:
  checkpoint_error(checkpoint_errc kind, std::string const& what) : error(kind, what) {}
  checkpoint_error(std::string const& what, std::vector<diagnostic> problems)
      : error(checkpoint_errc::refused, format(what, problems)), problems_(std::move(problems)) {}

  /// The problems of a refused checkpoint; empty for a single error of another kind.
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
