#pragma once
// cairn: requires libtorch

// Saving and loading sharded model state in any format, chosen at run time by the config's
// `format` and compiled once per format.

#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/checkpoint/plan.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/checkpoint/verify.hpp>
#include <cairn/checkpoint/weight_rule.hpp>
#include <cairn/comm/ref.hpp>
#include <cairn/detail/decl.hpp>

#include <boost/json/value.hpp>

#include <optional>
#include <string>

namespace cairn {

/// Saves `state` as `config` says (path, format, which state, file size, element type).
/// `program_config` (the caller's whole config) and `metadata` (iteration, optimizer step…)
/// are stored with it. Collective: every rank calls it, with its communicator (any: Gloo,
/// NCCL, one process…).
///
///     cairn::save_checkpoint(state, comm, cfg.training.checkpoint.save_config(dir), cairn::to_json(cfg), {});
CAIRN_DECL void save_checkpoint(model_state const& state, comm::communicator_ref comm,
                                checkpoint_save_config const& config, boost::json::value const& program_config = {},
                                boost::json::value const& metadata = {});

/// Loads into `state` (any layout, any world size) what `config` asks for, and returns the
/// checkpoint's metadata. Every element of every requested shard is accounted for: anything
/// missing, unexpected, duplicated or mismatched is a checkpoint_error on every rank, listing
/// all problems. Optimizer state not loaded is zeroed. Collective.
/// Checksums are verified unless `verify` is verification::none.
CAIRN_DECL checkpoint_metadata load_checkpoint(model_state& state, comm::communicator_ref comm,
                                               checkpoint_load_config const& config,
                                               verification verify = verification::checksums);

/// Saves, loads and plans in every format with what stays the same from one call to the next
/// bound once: the communicator, the program's config stored with every save, and the model's
/// converter, which the external format takes (`cairn::external::bind(converter, model)`) and
/// the others ignore.
///
///     cairn::checkpointer checkpoints(comm, cairn::to_json(cfg), cairn::external::bind(llama, cfg.model));
///     checkpoints.save(state, export_config);          // distributed, state_dict or external
///     checkpoints.load(state, cfg.pretrained);
class checkpointer {
public:
  explicit checkpointer(comm::communicator_ref comm, boost::json::value program_config = {},
                        std::optional<external::model_converter> converter = std::nullopt)
      : comm_(comm), program_config_(std::move(program_config)), converter_(std::move(converter)) {}

  /// Saves `state` as `config` says, with `metadata`. Collective.
  CAIRN_DECL void save(model_state const& state, checkpoint_save_config const& config,
                       boost::json::value const& metadata = {}) const;

  /// Loads into `state` what `config` asks for (see `load_checkpoint`). For the external format,
  /// the metadata returned holds its config.json as `config`. Collective.
  CAIRN_DECL checkpoint_metadata load(model_state& state, checkpoint_load_config const& config,
                                      verification verify = verification::checksums) const;

  /// What a save of `state` as `config` says would write, decided before any byte moves: files,
  /// writers, tensors and where each comes from. Collective.
  [[nodiscard]] CAIRN_DECL save_plan plan(model_state const& state, checkpoint_save_config const& config,
                                          boost::json::value const& metadata = {}) const;

  [[nodiscard]] comm::communicator_ref communicator() const noexcept { return comm_; }
  [[nodiscard]] std::optional<external::model_converter> const& converter() const noexcept { return converter_; }

private:
  /// The converter, for the external format; a config_error when there is none or it converts
  /// another model type than `model_type` asks for.
  CAIRN_DECL external::model_converter const& converter_for(std::string const& model_type) const;

  comm::communicator_ref comm_;
  boost::json::value program_config_;
  std::optional<external::model_converter> converter_;
};

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/save_load.ipp>
#endif
