#pragma once
// cairn: requires libtorch

/// All of cairn: configs, files, communicators, checkpoints, and the training layer with the
/// checkpoint manager and the run policy.

#include <cairn/checkpoint.hpp>
#include <cairn/comm.hpp>
#include <cairn/config.hpp>
#include <cairn/io.hpp>
#include <cairn/training.hpp>
#include <cairn/training/manager.hpp>
#include <cairn/training/run.hpp>
