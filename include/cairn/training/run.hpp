#pragma once
// cairn: requires libtorch

// The run policy every trainer needs: resume from the run's own newest good checkpoint, else
// start from `pretrained` as its config says, else start fresh. In two steps, because a
// pretrained checkpoint's stored config may change the model before it is built:
//
//     auto plan = cairn::plan_start(cfg, &my_config::model);       // may apply pretrained's config
//     my_model model(cfg);                                         // built from the final config
//     auto start = cairn::start_run(manager, model.state(), comm, plan, cfg.pretrained);
//     for (auto it = start.iteration + 1; it <= cfg.training.train_iters; ++it) …

#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/files.hpp>
#include <cairn/checkpoint/save_load.hpp>
#include <cairn/checkpoint/stored_config.hpp>
#include <cairn/config/json.hpp>
#include <cairn/training/manager.hpp>
#include <cairn/training/trainer_config.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <type_traits>

namespace cairn {

/// How a run starts.
enum class start_kind {
  fresh,      ///< from the model's own initialisation
  resumed,    ///< from the newest good checkpoint of its experiment directory
  pretrained, ///< from the checkpoint `pretrained` names
};

/// Where a run starts: decided by `plan_start`, carried out by `start_run`.
struct start_plan {
  start_kind kind = start_kind::fresh;
};

/// Decides, before the model is built, where the run `cfg` starts: resumed when its experiment
/// directory holds a complete checkpoint, else from `pretrained` when it names a path and asks
/// for the model weights, else fresh. When `pretrained` names a path, the config its checkpoint
/// stores is applied to `cfg` as `pretrained.load_config` says on every start, resumed or not
/// (as the seed applies it at validation), so a resumed run has the architecture it was
/// started with. `model` names the program's model config. For the external format,
/// `external_model` reads the model config of the checkpoint (through the program's converter,
/// e.g. `cairn::external::load_config`). Every rank calls it on the shared directory.
template <class Program, class Model> start_plan
plan_start(Program& cfg, Model Program::*model,
           std::type_identity_t<std::function<Model(std::filesystem::path const&)>> const& external_model = {}) {
  trainer_config const& run = cfg;
  if (run.has_pretrained()) {
    auto const& pretrained = run.pretrained;
    boost::json::value stored;
    if (pretrained.format == checkpoint_format::external) {
      if (!external_model) throw error("pretrained.format is external: plan_start needs the model's converter");
      auto as_stored = cfg;
      as_stored.*model = external_model(pretrained.path);
      stored = to_json(as_stored);
    } else {
      stored = read_stored_metadata(pretrained.path, pretrained.format).config;
    }
    apply_stored_config(cfg, stored, model, pretrained.load_config, pretrained.path.string());
  }
  if (!run.run.experiment_dir.empty() &&
      !save_directory(experiment_layout{run.run.experiment_dir}.checkpoints()).complete().empty())
    return {start_kind::resumed};
  if (run.has_pretrained() && run.pretrained.model_weights) return {start_kind::pretrained};
  return {start_kind::fresh};
}

/// Where a run started: how, from which iteration (0 unless resumed) and which checkpoint.
struct run_start {
  start_kind kind = start_kind::fresh;
  std::int64_t iteration = 0;
  std::filesystem::path path;
};

/// Carries out `plan` on the built model's `state`: resumes through `manager` (which also
/// removes what interrupted saves left), or loads `pretrained` (its weights, and its optimizer
/// state when `optimizer_state` asks; the external format through `load_external`, typically
/// `cairn::external::load` with the program's converter), or leaves the state as it is (a
/// pretrained config without `model_weights` initialises, as in the seed). Collective.
template <comm::communicator Comm>
run_start start_run(checkpoint_manager<Comm>& manager, model_state& state, Comm& comm, start_plan plan,
                    checkpoint_load_config const& pretrained,
                    std::type_identity_t<std::function<void(model_state&, Comm&, checkpoint_load_config const&)>> const&
                        load_external = {}) {
  if (auto resumed = manager.resume(state)) return {start_kind::resumed, resumed->iteration, resumed->path};
  if (plan.kind != start_kind::pretrained) return {};
  if (pretrained.format == checkpoint_format::external) {
    if (!load_external) throw error("pretrained.format is external: start_run needs the model's converter");
    load_external(state, comm, pretrained);
  } else {
    load_checkpoint(state, comm, pretrained);
  }
  return {start_kind::pretrained, 0, pretrained.path};
}

} // namespace cairn
