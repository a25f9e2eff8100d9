#pragma once
// cairn: libtorch parts with CAIRN_WITH_TORCH

/// cairn's training layer, the policy: intervals, callbacks, the training-loop configs,
/// retention, the preflight estimate, progress reports, the experiment lock and preemption and,
/// where cairn is built with libtorch (CAIRN_WITH_TORCH, set by cairn::cairn), the checkpoint
/// manager and the run policy. Without libtorch it is the policy alone, as the tool uses it.

#include <cairn/training/background_tasks.hpp>
#include <cairn/training/callback.hpp>
#include <cairn/training/interval.hpp>
#include <cairn/training/learning_rate.hpp>
#include <cairn/training/lock.hpp>
#include <cairn/training/manager_options.hpp>
#include <cairn/training/parallel_config.hpp>
#include <cairn/training/preemption.hpp>
#include <cairn/training/preflight.hpp>
#include <cairn/training/save_policy.hpp>
#include <cairn/training/save_report.hpp>
#include <cairn/training/schedule.hpp>
#include <cairn/training/trainer_config.hpp>
#include <cairn/training/training_config.hpp>

#ifdef CAIRN_WITH_TORCH
#include <cairn/training/background_writer.hpp>
#include <cairn/training/local_tier.hpp>
#include <cairn/training/manager.hpp>
#include <cairn/training/resume.hpp>
#include <cairn/training/run.hpp>
#endif
