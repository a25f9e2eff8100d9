#pragma once

/// cairn's training layer: intervals, callbacks and the training-loop configs. No libtorch.

#include <cairn/training/callback.hpp>
#include <cairn/training/checkpoint.hpp>
#include <cairn/training/interval.hpp>
#include <cairn/training/schedule.hpp>
#include <cairn/training/trainer_config.hpp>
#include <cairn/training/training_config.hpp>
