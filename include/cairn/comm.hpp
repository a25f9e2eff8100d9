#pragma once
// cairn: requires libtorch

/// cairn's communication layer: the communicator concept and its backends. The raw NCCL
/// backend is in cairn/comm/nccl.hpp, behind CAIRN_WITH_NCCL.

#include <cairn/comm/any.hpp>
#include <cairn/comm/c10d.hpp>
#include <cairn/comm/collectives.hpp>
#include <cairn/comm/communicator.hpp>
#include <cairn/comm/connect.hpp>
#include <cairn/comm/environment.hpp>
#include <cairn/comm/gloo.hpp>
#include <cairn/comm/launch.hpp>
#include <cairn/comm/ref.hpp>
#include <cairn/comm/single_process.hpp>
