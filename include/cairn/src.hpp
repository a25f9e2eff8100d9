#pragma once
// cairn: libtorch parts with CAIRN_WITH_TORCH

/// The definitions of cairn's ordinary functions, compiled once for a program built with
/// CAIRN_SEPARATE_COMPILATION: what the CMake target cairn::compiled (cairn::core_compiled
/// without libtorch) is built from, or, without CMake, a translation unit of the program's own
/// that includes this header alone (see <cairn/detail/decl.hpp>). Every layer the build has:
/// configs, io, comm, checkpoints and training, their libtorch and NCCL parts where
/// CAIRN_WITH_TORCH and CAIRN_WITH_NCCL are defined, YAML where CAIRN_WITH_YAML is. In a
/// header-only build it adds nothing.

#include <cairn/config/impl/check.ipp>
#include <cairn/config/impl/command_line.ipp>
#include <cairn/config/impl/compare.ipp>
#include <cairn/config/impl/docs.ipp>
#include <cairn/config/impl/json.ipp>
#include <cairn/config/impl/legacy.ipp>
#include <cairn/config/impl/override.ipp>
#include <cairn/config/impl/pretty.ipp>
#include <cairn/config/impl/reflect.ipp>
#include <cairn/config/impl/schema.ipp>
#include <cairn/config/impl/show.ipp>
#include <cairn/config/impl/validate.ipp>
#include <cairn/config/impl/value.ipp>
#include <cairn/impl/diagnostics.ipp>
#include <cairn/impl/progress.ipp>
#ifdef CAIRN_WITH_YAML
#include <cairn/config/impl/yaml.ipp>
#endif

#include <cairn/checkpoint/converters/impl/llama_model.ipp>
#include <cairn/checkpoint/impl/config.ipp>
#include <cairn/checkpoint/impl/convert.ipp>
#include <cairn/checkpoint/impl/directory.ipp>
#include <cairn/checkpoint/impl/format_files.ipp>
#include <cairn/checkpoint/impl/identity.ipp>
#include <cairn/checkpoint/impl/layout.ipp>
#include <cairn/checkpoint/impl/layout_rules.ipp>
#include <cairn/checkpoint/impl/load_plan.ipp>
#include <cairn/checkpoint/impl/metadata.ipp>
#include <cairn/checkpoint/impl/plan.ipp>
#include <cairn/checkpoint/impl/save_files.ipp>
#include <cairn/checkpoint/impl/verify.ipp>
#include <cairn/comm/impl/environment.ipp>
#include <cairn/comm/impl/grid.ipp>
#include <cairn/comm/impl/launch.ipp>
#include <cairn/io/impl/backend.ipp>
#include <cairn/io/impl/file.ipp>
#include <cairn/io/impl/float_convert.ipp>
#include <cairn/io/impl/index.ipp>
#include <cairn/io/impl/safetensors.ipp>
#include <cairn/io/impl/safetensors_writer.ipp>
#include <cairn/io/impl/slice.ipp>
#include <cairn/io/impl/storage.ipp>
#ifdef CAIRN_WITH_S3
#include <cairn/io/impl/s3.ipp>
#endif
#include <cairn/training/impl/background_tasks.ipp>
#include <cairn/training/impl/callback.ipp>
#include <cairn/training/impl/interval.ipp>
#include <cairn/training/impl/lock.ipp>
#include <cairn/training/impl/parallel_config.ipp>
#include <cairn/training/impl/preemption.ipp>
#include <cairn/training/impl/preflight.ipp>
#include <cairn/training/impl/save_policy.ipp>
#include <cairn/training/impl/save_report.ipp>

#ifdef CAIRN_WITH_TORCH
#include <cairn/comm/impl/connect.ipp>
#include <cairn/comm/impl/gloo.ipp>
#include <cairn/comm/impl/store.ipp>
#ifdef CAIRN_WITH_NCCL
#include <cairn/comm/impl/nccl.ipp>
#endif

#include <cairn/checkpoint/converters/impl/llama.ipp>
#include <cairn/checkpoint/impl/distributed.ipp>
#include <cairn/checkpoint/impl/executor.ipp>
#include <cairn/checkpoint/impl/external.ipp>
#include <cairn/checkpoint/impl/generator.ipp>
#include <cairn/checkpoint/impl/module.ipp>
#include <cairn/checkpoint/impl/save_load.ipp>
#include <cairn/checkpoint/impl/state.ipp>
#include <cairn/checkpoint/impl/state_dict.ipp>
#include <cairn/checkpoint/impl/tensor.ipp>
#include <cairn/checkpoint/impl/weight_rule.ipp>
#include <cairn/training/impl/background_writer.ipp>
#include <cairn/training/impl/local_tier.ipp>
#include <cairn/training/impl/manager.ipp>
#include <cairn/training/impl/manager_local.ipp>
#include <cairn/training/impl/resume.ipp>
#include <cairn/training/impl/run.ipp>
#endif

// The field tables of cairn's own configs, which the headers declare made here.
#ifdef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/convert.hpp>
#include <cairn/checkpoint/load_plan.hpp>
#include <cairn/training/trainer_config.hpp>
template cairn::detail::config_ops const& cairn::detail::config_of<cairn::run_config>();
template cairn::detail::config_ops const& cairn::detail::config_of<cairn::training_config>();
template cairn::detail::config_ops const& cairn::detail::config_of<cairn::checkpoint_load_config>();
template cairn::detail::config_ops const& cairn::detail::config_of<cairn::convert_config>();
template cairn::detail::config_ops const& cairn::detail::config_of<cairn::run_layout>();
template cairn::detail::config_ops const& cairn::detail::config_of<cairn::load_plan>();
#endif

// The symbol a translation unit built with CAIRN_SEPARATE_COMPILATION needs from this one: a
// program that forgot it fails to link, naming it.
#ifdef CAIRN_SEPARATE_COMPILATION
namespace cairn::detail {
int separate_compilation_definitions_are_linked = 1;
} // namespace cairn::detail
#endif
