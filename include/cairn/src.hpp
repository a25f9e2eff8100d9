#pragma once

/// The definitions of cairn's ordinary functions, for a program built with
/// CAIRN_SEPARATE_COMPILATION: include this header in exactly one of its translation units
/// (see <cairn/detail/decl.hpp>), and none of the layers' own src.hpp. It holds every layer
/// this build has: configs, io, comm, checkpoints and training, with their libtorch and NCCL parts where
/// CAIRN_WITH_TORCH and CAIRN_WITH_NCCL are defined (as cairn::cairn does). In a header-only
/// build it adds nothing.

#include <cairn/checkpoint/src.hpp>
#include <cairn/comm/src.hpp>
#include <cairn/config/src.hpp>
#include <cairn/io/src.hpp>
#include <cairn/training/src.hpp>
