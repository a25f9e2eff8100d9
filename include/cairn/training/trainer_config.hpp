#pragma once

#include <cairn/checkpoint/config.hpp>
#include <cairn/training/training_config.hpp>

#include <boost/describe/class.hpp>

#include <filesystem>

namespace cairn {

/// Where a run keeps its files.
struct run_config {
  std::filesystem::path experiment_dir;
};
BOOST_DESCRIBE_STRUCT(run_config, (), (experiment_dir))

constexpr auto cairn_fields(run_config const*) {
  return fields(field(&run_config::experiment_dir,
                      "Directory of the run: checkpoints in checkpoints/<iteration>/, exports in "
                      "export/<iteration>/. Required when checkpoints or exports are enabled.",
                      hint::core));
}

/// What a trainer is configured with, less its model: derive from it and add the model config.
///
///     struct my_trainer_config : cairn::trainer_config { my_model_config model; };
///     BOOST_DESCRIBE_STRUCT(my_trainer_config, (cairn::trainer_config), (model))
struct trainer_config {
  run_config run;
  training_config training;
  checkpoint_load_config pretrained;

  /// Whether training initialises from `pretrained` when there is no checkpoint to resume.
  [[nodiscard]] bool has_pretrained() const noexcept { return !pretrained.path.empty(); }

  void validate(validation& v) {
    bool saves = training.checkpoint.enabled() || training.export_.enabled();
    if (saves && run.experiment_dir.empty())
      v.error("run.experiment_dir", "required: this run saves checkpoints or exports");
  }
};
BOOST_DESCRIBE_STRUCT(trainer_config, (), (run, training, pretrained))

constexpr auto cairn_fields(trainer_config const*) {
  return fields(field(&trainer_config::run, "Where the run keeps its files.", hint::core),
                field(&trainer_config::training, "The training loop.", hint::core),
                field(&trainer_config::pretrained,
                      "What to initialise from when there is no checkpoint to resume. Empty path: from scratch.",
                      hint::feature));
}

} // namespace cairn
