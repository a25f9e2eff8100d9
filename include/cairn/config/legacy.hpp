#pragma once

#include <cairn/config/detail/json_fwd.hpp>
#include <cairn/config/detail/show.hpp>
#include <cairn/config/read_context.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/diagnostics.hpp>

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn {

/// What a legacy rule sees besides the JSON object it rewrites: where it is, and whom to tell.
class legacy_context {
public:
  legacy_context(read_context& read, std::string_view config_name) : read_(read), config_name_(config_name) {}

  /// Emits a deprecation diagnostic for `old_key` of this config.
  void deprecated(std::string_view old_key, std::string const& advice) const {
    emit(severity::deprecation, {read_.join(old_key), "deprecated in " + std::string(config_name_) + "; " + advice});
  }
  void error(std::string_view key, std::string message) const { read_.error(key, std::move(message)); }

private:
  read_context& read_;
  std::string_view config_name_;
};

/// A rewrite of a config's JSON object from an old spelling to the current one, applied before
/// strict parsing wherever the owning struct (or a struct derived from it) is read. Rules are
/// idempotent: once applied, the old spelling is gone.
class legacy_rule {
public:
  using function = std::function<void(boost::json::object&, legacy_context const&)>;
  /// `old_keys`: the keys the rule accepts that the config no longer has (listed by its JSON
  /// Schema as deprecated properties, so that editors accept what cairn accepts).
  legacy_rule(std::string summary, function apply, std::vector<std::string> old_keys = {})
      : summary_(std::move(summary)), apply_(std::move(apply)), old_keys_(std::move(old_keys)) {}

  void apply(boost::json::object& object, legacy_context const& context) const { apply_(object, context); }
  /// "old → new", for documentation.
  [[nodiscard]] std::string const& summary() const noexcept { return summary_; }
  [[nodiscard]] std::vector<std::string> const& old_keys() const noexcept { return old_keys_; }

private:
  std::string summary_;
  function apply_;
  std::vector<std::string> old_keys_;
};

namespace legacy {

/// Key `old_key` is now called `new_key`.
CAIRN_DECL legacy_rule rename(std::string old_key, std::string new_key);

/// The string value `old_value` of `key` is now spelt `new_value`.
CAIRN_DECL legacy_rule rename_value(std::string key, std::string old_value, std::string new_value);

/// The keys `old_keys` are replaced by `new_key`, whose value `combine` computes from those
/// of them that are present (it may throw cairn::error for a combination that makes no sense).
CAIRN_DECL legacy_rule merge(std::vector<std::string> old_keys, std::string new_key,
                             std::function<boost::json::value(boost::json::object const&)> combine);

} // namespace legacy

/// Versioned migrations of stored documents (checkpoint metadata): each step brings a document
/// from one version to the next, and `migrate` follows the chain to the current version.
class migration_chain {
public:
  using step_function = std::function<void(boost::json::object&)>;

  explicit migration_chain(std::string current) : current_(std::move(current)) {}

  migration_chain& step(std::string from, std::string to, step_function apply) {
    steps_.push_back({std::move(from), std::move(to), std::move(apply)});
    return *this;
  }
  [[nodiscard]] std::string const& current() const noexcept { return current_; }

  /// Brings `document`, stored at `version`, to the current version. Throws config_error
  /// naming `where` (a file, say) when the version is unknown.
  void migrate(boost::json::object& document, std::string_view version, std::string_view where) const {
    std::string at(version);
    for (std::size_t hops = 0; at != current_; ++hops) {
      auto const* next = find(at);
      if (!next || hops > steps_.size()) {
        throw config_error({{std::string(where),
                             "unknown version " + detail::show(at) + " (this build reads " + known_versions() + ")"}});
      }
      next->apply(document);
      emit(severity::info, {std::string(where), "migrated from version " + next->from + " to " + next->to});
      at = next->to;
    }
  }

private:
  struct step_entry {
    std::string from, to;
    step_function apply;
  };
  [[nodiscard]] step_entry const* find(std::string const& from) const {
    for (auto const& s : steps_)
      if (s.from == from) return &s;
    return nullptr;
  }
  [[nodiscard]] std::string known_versions() const {
    std::string text;
    for (auto const& s : steps_) text += s.from + ", ";
    return text + current_;
  }

  std::string current_;
  std::vector<step_entry> steps_;
};

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/config/impl/legacy.ipp>
#endif
