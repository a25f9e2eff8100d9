#pragma once
// cairn: requires libtorch

/// All of cairn, for a trainer: configs, files, communicators, checkpoints, the training layer
/// with the checkpoint manager and the run policy, and the state of a torch::nn::Module with its
/// Adam optimizer (<cairn/checkpoint/module.hpp>, which the checkpoint layer's umbrella leaves
/// out for the seconds torch::nn costs a translation unit that does not use it).

#include <cairn/checkpoint.hpp>
#include <cairn/checkpoint/module.hpp>
#include <cairn/comm.hpp>
#include <cairn/config.hpp>
#include <cairn/io.hpp>
#include <cairn/training.hpp>
