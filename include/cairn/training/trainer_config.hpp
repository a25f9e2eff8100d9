#pragma once

#include <cairn/checkpoint/config.hpp>
#include <cairn/comm/environment.hpp>
#include <cairn/config/check.hpp>
#include <cairn/training/training_config.hpp>

#include <boost/describe/class.hpp>
#include <boost/describe/enum.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>

namespace cairn {

/// Where a run keeps its files, and how long its ranks wait for each other.
struct run_config {
  std::filesystem::path experiment_dir;
  double collective_timeout = 300;

  /// `collective_timeout` as communicators take it.
  [[nodiscard]] std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(static_cast<std::int64_t>(collective_timeout * 1000));
  }
};
BOOST_DESCRIBE_STRUCT(run_config, (), (experiment_dir, collective_timeout))

constexpr auto cairn_fields(run_config const*) {
  return fields(field(&run_config::experiment_dir,
                      "Directory of the run: checkpoints in checkpoints/<iteration>/, exports in "
                      "export/<iteration>/. Required when checkpoints or exports are enabled.",
                      hint::core),
                field(&run_config::collective_timeout,
                      "Seconds a collective (and the start of the job) waits for every rank before it fails: a "
                      "dead or stuck rank ends the job within it instead of hanging it.",
                      hint::optional, check::in_range(0.001, 1e7)));
}

/// Where a run's tensors live.
BOOST_DEFINE_ENUM_CLASS(device_type, cpu, cuda)

/// What a trainer is configured with, less its model: derive from it and add the model config.
///
///     struct my_trainer_config : cairn::trainer_config { my_model_config model; };
///     BOOST_DESCRIBE_STRUCT(my_trainer_config, (cairn::trainer_config), (model))
struct trainer_config {
  run_config run;
  training_config training;
  checkpoint_load_config pretrained;
  device_type device = device_type::cpu;
  comm::backend comm = comm::backend::auto_;

  /// Whether training initialises from `pretrained` when there is no checkpoint to resume.
  [[nodiscard]] bool has_pretrained() const noexcept { return !pretrained.path.empty(); }

  void validate(validation& v) {
    bool saves = training.checkpoint.enabled() || training.export_.enabled();
    if (saves && run.experiment_dir.empty())
      v.error("run.experiment_dir", "required: this run saves checkpoints or exports");
  }
};
BOOST_DESCRIBE_STRUCT(trainer_config, (), (run, training, pretrained, device, comm))

constexpr auto cairn_fields(trainer_config const*) {
  return fields(field(&trainer_config::run, "Where the run keeps its files.", hint::core),
                field(&trainer_config::training, "The training loop.", hint::core),
                field(&trainer_config::pretrained,
                      "What to initialise from when there is no checkpoint to resume. Empty path: from scratch.",
                      hint::feature),
                field(&trainer_config::device, "Where to train: cpu or cuda.", hint::core),
                field(&trainer_config::comm,
                      "Collectives between ranks: auto (NCCL when device=cuda and cairn was built with NCCL, else "
                      "Gloo), gloo or nccl.",
                      hint::core));
}

} // namespace cairn

#ifdef CAIRN_SEPARATE_COMPILATION
// The field tables of cairn's own configs are made once, in cairn::compiled (src.hpp): a
// trainer's translation unit instantiates those of its own configs only.
#include <cairn/config/detail/reflect.hpp>
namespace cairn::detail {
extern template config_ops const& config_of<run_config>();
extern template config_ops const& config_of<training_config>();
extern template config_ops const& config_of<checkpoint_load_config>();
} // namespace cairn::detail
#endif
