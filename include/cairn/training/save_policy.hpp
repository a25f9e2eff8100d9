#pragma once

#include <cairn/checkpoint/config.hpp>
#include <cairn/config/mixin.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/training/callback.hpp>
#include <cairn/training/interval.hpp>

#include <boost/describe/class.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace cairn {

/// What checkpoints and exports share: a schedule, a callback and retention.
struct checkpoint_base_config : interval_config {
  callback_config callback;
  std::optional<std::int64_t> keep;
  std::optional<std::int64_t> keep_every;

  /// Whether the save at `iteration` is one of the every-`keep_every`-th kept forever: a firing
  /// whose count (`count(iteration)`, the seed's `get_count`) is a multiple of `keep_every`.
  [[nodiscard]] bool kept_forever(std::int64_t iteration) const noexcept {
    return keep_every && enabled(iteration) && count(iteration) % *keep_every == 0;
  }

  /// Which of the saves at `iterations` to delete, oldest first, as the seed's `to_delete`:
  /// saves off the schedule (a final save at a stop) are never counted nor deleted, those kept
  /// forever neither, and of the rest all but the `keep` newest go. Unset `keep` deletes nothing.
  [[nodiscard]] CAIRN_DECL std::vector<std::int64_t> to_delete(std::vector<std::int64_t> iterations) const;
};
BOOST_DESCRIBE_STRUCT(checkpoint_base_config, (interval_config), (callback, keep, keep_every))

constexpr auto cairn_fields(checkpoint_base_config const*) {
  return fields(field(&checkpoint_base_config::callback, "Program run after each completed save.", hint::feature),
                field(&checkpoint_base_config::keep,
                      "Saves to keep; older ones are deleted once a new one is complete. Unset keeps all.",
                      hint::feature, check::positive),
                field(&checkpoint_base_config::keep_every,
                      "Keep every n-th save forever, not counted in `keep`. Unset keeps none forever.", hint::feature,
                      check::positive));
}

/// The local tier of checkpoints: saves on each node's own disk (`<directory>/checkpoints/<iteration>/`
/// on every node, holding its ranks' parts and the replicas it keeps of other nodes' parts),
/// frequent and fast, beside the persistent checkpoints of the experiment directory. Each rank's
/// part is also written by `replicas` peers on other nodes, so that a lost node's parts survive
/// on its peers. See docs/tiers.md.
struct local_checkpoint_config : interval_config {
  /// The node's own directory: the same path on every node, a different disk behind it.
  std::filesystem::path directory;
  std::int64_t keep = 2;
  std::int64_t replicas = 1;
  bool promote = false;

  /// Whether local saves are made: an interval is set.
  [[nodiscard]] bool saves() const noexcept { return interval.has_value(); }
  /// Whether local saves are copied to peers: what `comm::connect(…, transfers)` is asked for.
  [[nodiscard]] bool copies() const noexcept { return saves() && replicas > 0; }

  void validate(validation& v) {
    if (interval && directory.empty())
      v.error("directory", "required: local checkpoints are enabled (interval is set)");
  }
};
BOOST_DESCRIBE_STRUCT(local_checkpoint_config, (interval_config), (directory, keep, replicas, promote))

constexpr auto cairn_fields(local_checkpoint_config const*) {
  return fields(update(&local_checkpoint_config::interval)
                    .description("Iterations between local checkpoints. Unset disables the local tier."),
                field(&local_checkpoint_config::directory,
                      "Directory on each node's own disk (e.g. /local/nvme/run), the same path on every node; "
                      "it must not be shared between nodes.",
                      hint::feature),
                field(&local_checkpoint_config::keep, "Local checkpoints each node keeps; older ones are deleted.",
                      hint::feature, check::positive),
                field(&local_checkpoint_config::replicas,
                      "Peers on other nodes that keep a copy of each rank's part (at most the nodes but one).",
                      hint::feature, check::non_negative),
                field(&local_checkpoint_config::promote,
                      "Make each persistent checkpoint by copying a local one in the background: training pauses "
                      "only for the local save, and its files hold each rank's replicated parameters too.",
                      hint::feature));
}

/// Checkpoints for resuming: `<experiment_dir>/checkpoints/<iteration>/`, always the
/// distributed format with model weights and optimizer state; and their local tier.
struct checkpoint_config : checkpoint_base_config {
  checkpoint_config() { keep = 5; }

  local_checkpoint_config local;

  /// The save config of the checkpoint at `path`.
  [[nodiscard]] CAIRN_DECL checkpoint_save_config save_config(std::filesystem::path path) const;
};
BOOST_DESCRIBE_STRUCT(checkpoint_config, (checkpoint_base_config), (local))

constexpr auto cairn_fields(checkpoint_config const*) {
  return fields(
      update(&checkpoint_config::interval)
          .description("Iterations between checkpoints. Unset disables checkpoints, the final one included."),
      update(&checkpoint_config::keep).description("Checkpoints to keep; older ones are deleted. Unset keeps all."),
      field(&checkpoint_config::local, "Local checkpoints on each node's own disk, replicated to peers.",
            hint::feature));
}

/// Exports for keeping or sharing: `<experiment_dir>/export/<iteration>/`, independent of
/// checkpoints, in any format. The trainer supplies the path.
struct export_config : checkpoint_base_config,
                       checkpoint_format_mixin,
                       checkpoint_state_mixin,
                       checkpoint_save_options_mixin {
  /// The full save config of the export at `path`.
  [[nodiscard]] checkpoint_save_config save_config(std::filesystem::path path) const;

  void validate(validation& v) { detail::check_save_fits_format(format, model_weights, optimizer_state, v); }
};
BOOST_DESCRIBE_STRUCT(export_config,
                      (checkpoint_base_config, checkpoint_format_mixin, checkpoint_state_mixin,
                       checkpoint_save_options_mixin),
                      ())

constexpr auto cairn_fields(export_config const*) {
  return fields(update(&export_config::interval).description("Iterations between exports. Unset disables exports."),
                update(&export_config::keep).description("Exports to keep; older ones are deleted. Unset keeps all."));
}

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/training/impl/save_policy.ipp>
#endif
