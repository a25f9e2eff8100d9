#pragma once

/// cairn's training layer, the policy: intervals, callbacks, the training-loop configs,
/// retention, the preflight estimate and progress reports. No libtorch: the checkpoint manager
/// and the run policy, which need it, are <cairn/training/manager.hpp> and
/// <cairn/training/run.hpp> (or <cairn/cairn.hpp> for everything).

#include <cairn/training/callback.hpp>
#include <cairn/training/checkpoint.hpp>
#include <cairn/training/interval.hpp>
#include <cairn/training/preflight.hpp>
#include <cairn/training/progress.hpp>
#include <cairn/training/schedule.hpp>
#include <cairn/training/trainer_config.hpp>
#include <cairn/training/training_config.hpp>
