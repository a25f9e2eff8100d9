// Definitions of <cairn/comm/connect.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/comm/any.hpp>
#include <cairn/comm/connect.hpp>
#include <cairn/comm/environment.hpp>
#include <cairn/comm/gloo.hpp>
#include <cairn/comm/single_process.hpp>
#include <cairn/comm/store.hpp>
#ifdef CAIRN_WITH_NCCL
#include <cairn/comm/nccl.hpp>
#endif

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace cairn::comm {

namespace detail {

/// The backend `requested` resolves to, or a config_error on the key `comm`.
inline backend chosen_backend(backend requested, bool cuda) {
  try {
    return resolve_backend(requested, cuda, built_with_nccl);
  } catch (error const& e) {
    throw config_error(std::vector<diagnostic>{{"comm", e.what()}});
  }
}

} // namespace detail

CAIRN_DECL any_communicator connect(backend requested, bool cuda, std::chrono::milliseconds timeout) {
  [[maybe_unused]] auto chosen = detail::chosen_backend(requested, cuda);
  auto env = environment_or_single();
#ifdef CAIRN_WITH_NCCL
  if (chosen == backend::nccl) return any_communicator(make_nccl(env, timeout));
#endif
  if (env.world_size > 1) return any_communicator(make_gloo(env, timeout));
  return any_communicator(single_process());
}

CAIRN_DECL grid_communicators connect(backend requested, bool cuda, parallel_grid const& grid,
                                      std::chrono::milliseconds timeout, bool transfers) {
  [[maybe_unused]] auto chosen = detail::chosen_backend(requested, cuda);
  auto env = environment_or_single();
  if (grid.world_size() != env.world_size)
    throw comm_error(comm_errc::environment, "the grid " + grid.text() + " has " + std::to_string(grid.world_size()) +
                                                 " ranks; the job has " + std::to_string(env.world_size));
  auto at = grid.coordinates(env.rank);
  if (env.world_size == 1)
    return {grid,
            at,
            connect(requested, cuda, timeout),
            any_communicator(single_process()),
            any_communicator(single_process()),
            any_communicator(single_process()),
            {}};
  // Every rank's launcher and program must mean the same job: its size (in make_store), grid and backend.
  auto store =
      make_store(env, timeout, {{"backend", chosen == backend::nccl ? "nccl" : "gloo"}, {"grid", grid.text()}});
  auto group = [&](std::string const& name, std::vector<int> const& members) {
#ifdef CAIRN_WITH_NCCL
    if (chosen == backend::nccl) return any_communicator(make_nccl_group(store, env, name, members, timeout));
#endif
    if (members.size() == 1) return any_communicator(single_process());
    return any_communicator(make_gloo_group(store, env, name, members, timeout));
  };
  std::vector<int> everyone(static_cast<std::size_t>(env.world_size));
  for (int r = 0; r < env.world_size; ++r) everyone[static_cast<std::size_t>(r)] = r;
  auto world = group("world", everyone);
  auto along = [&](axis a, char const* name) {
    return group(std::string(name) + "/" + std::to_string(grid.group_index(a, env.rank)), grid.group(a, env.rank));
  };
  auto tensor = along(axis::tensor, "tp");
  auto pipeline = along(axis::pipeline, "pp");
  auto data = along(axis::data, "dp");
  std::optional<any_communicator> moves;
  if (transfers) moves.emplace(group("transfers", everyone));
  // Rank 0 serves the store: it stays until every rank has made every group (an NCCL group's
  // members read its id from the store; a Gloo group holds the store itself).
  world.barrier();
  return {grid, at, std::move(world), std::move(tensor), std::move(pipeline), std::move(data), std::move(moves)};
}

} // namespace cairn::comm
