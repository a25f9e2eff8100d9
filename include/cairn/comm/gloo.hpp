#pragma once
// cairn: requires libtorch

#include <cairn/comm/c10d.hpp>
#include <cairn/comm/environment.hpp>
#include <cairn/comm/store.hpp>
#include <cairn/detail/decl.hpp>

// libtorch declares its Gloo process group only under USE_C10D_GLOO; cairn's CMake target
// defines it when CAIRN_WITH_TORCH is on.
#ifndef USE_C10D_GLOO
#error "cairn/comm/gloo.hpp needs USE_C10D_GLOO (link cairn::cairn with CAIRN_WITH_TORCH=ON)"
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <cstdlib>
#include <string>
#include <vector>

namespace cairn::comm {

using gloo_communicator = c10d_communicator<c10d::ProcessGroupGloo>;

/// A Gloo process group on CPU for the run described by `env`. Collectives that do not finish
/// within `timeout` (a rank that died, say) throw instead of hanging.
CAIRN_DECL gloo_communicator make_gloo(distributed_environment const& env,
                                       std::chrono::milliseconds timeout = std::chrono::minutes(5));

/// A Gloo process group of the ranks `members` (global ranks, in the order of their group ranks;
/// this rank among them), over `store`, the run's store (`make_store`), under the keys of
/// `name`: every group of a run has a name of its own ("tp/0", "dp/1", ...). Only the members
/// take part; the others of the job create their own groups meanwhile. A rank that is not a
/// member is an error.
CAIRN_DECL gloo_communicator make_gloo_group(c10::intrusive_ptr<c10d::Store> const& store,
                                             distributed_environment const& env, std::string const& name,
                                             std::vector<int> const& members,
                                             std::chrono::milliseconds timeout = std::chrono::minutes(5));

/// A Gloo process group for the run the torchrun variables describe (see read_environment).
inline gloo_communicator gloo_from_environment(std::chrono::milliseconds timeout = std::chrono::minutes(5)) {
  return make_gloo(read_environment(), timeout);
}

} // namespace cairn::comm

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/comm/impl/gloo.ipp>
#endif
