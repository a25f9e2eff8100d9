#pragma once
// cairn: libtorch parts with CAIRN_WITH_TORCH

/// The definitions of the checkpoint layer's ordinary functions, for a program built with
/// CAIRN_SEPARATE_COMPILATION: included by <cairn/src.hpp>, which a program includes in exactly
/// one of its translation units (see <cairn/detail/decl.hpp>). In a header-only build it adds
/// nothing. The parts that need libtorch are there when CAIRN_WITH_TORCH is defined.

#include <cairn/checkpoint/impl/config.ipp>
#include <cairn/checkpoint/impl/convert.ipp>
#include <cairn/checkpoint/impl/directory.ipp>
#include <cairn/checkpoint/impl/files.ipp>
#include <cairn/checkpoint/impl/layout.ipp>
#include <cairn/checkpoint/impl/metadata.ipp>
#include <cairn/checkpoint/impl/plan.ipp>
#include <cairn/checkpoint/impl/verify.ipp>
#ifdef CAIRN_WITH_TORCH
#include <cairn/checkpoint/impl/distributed.ipp>
#include <cairn/checkpoint/impl/executor.ipp>
#include <cairn/checkpoint/impl/external.ipp>
#include <cairn/checkpoint/impl/module.ipp>
#include <cairn/checkpoint/impl/save_load.ipp>
#include <cairn/checkpoint/impl/state.ipp>
#include <cairn/checkpoint/impl/state_dict.ipp>
#include <cairn/checkpoint/impl/tensor.ipp>
#include <cairn/checkpoint/impl/weight_rule.ipp>
#endif
