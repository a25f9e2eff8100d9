#pragma once
// cairn: libtorch parts with CAIRN_WITH_TORCH

/// The definitions of the comm layer's ordinary functions, for a program built with
/// CAIRN_SEPARATE_COMPILATION: included by <cairn/src.hpp>, which a program includes in exactly
/// one of its translation units (see <cairn/detail/decl.hpp>). In a header-only build it adds
/// nothing. The backends are there when the build has them (CAIRN_WITH_TORCH, CAIRN_WITH_NCCL).

#include <cairn/comm/impl/environment.ipp>
#include <cairn/comm/impl/launch.ipp>
#ifdef CAIRN_WITH_TORCH
#include <cairn/comm/impl/connect.ipp>
#include <cairn/comm/impl/gloo.ipp>
#include <cairn/comm/impl/store.ipp>
#ifdef CAIRN_WITH_NCCL
#include <cairn/comm/impl/nccl.ipp>
#endif
#endif
