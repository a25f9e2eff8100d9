#pragma once
// cairn: libtorch parts with CAIRN_WITH_TORCH

/// The definitions of the training layer's ordinary functions, for a program built with
/// CAIRN_SEPARATE_COMPILATION: included by <cairn/src.hpp>, which a program includes in exactly
/// one of its translation units (see <cairn/detail/decl.hpp>). In a header-only build it adds
/// nothing. The parts that need libtorch (the manager) are there when CAIRN_WITH_TORCH is defined.

#include <cairn/training/impl/callback.ipp>
#include <cairn/training/impl/checkpoint.ipp>
#include <cairn/training/impl/interval.ipp>
#include <cairn/training/impl/lock.ipp>
#include <cairn/training/impl/preemption.ipp>
#include <cairn/training/impl/preflight.ipp>
#include <cairn/training/impl/progress.ipp>
#ifdef CAIRN_WITH_TORCH
#include <cairn/training/impl/background_writer.ipp>
#include <cairn/training/impl/manager.ipp>
#include <cairn/training/impl/resume.ipp>
#include <cairn/training/impl/run.ipp>
#endif
