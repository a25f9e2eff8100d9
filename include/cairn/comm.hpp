#pragma once
// cairn: requires libtorch

/// cairn's communication layer: the communicator concept, any_communicator, connect (the
/// communicator a config asks for), one process, collectives, the environment and the launcher.
/// The backends over libtorch's process groups pull in c10d's headers (5-6 s a translation
/// unit): include them where they are used, <cairn/comm/c10d.hpp> (any c10d group),
/// <cairn/comm/gloo.hpp> (make_gloo) and, behind CAIRN_WITH_NCCL, <cairn/comm/nccl.hpp>.

#include <cairn/comm/any.hpp>
#include <cairn/comm/collectives.hpp>
#include <cairn/comm/communicator.hpp>
#include <cairn/comm/connect.hpp>
#include <cairn/comm/environment.hpp>
#include <cairn/comm/grid.hpp>
#include <cairn/comm/launch.hpp>
#include <cairn/comm/ref.hpp>
#include <cairn/comm/single_process.hpp>
