// One rank of the multi-process Gloo tests, started by `cairn launch -n N`. Checks every
// collective against values computed locally; exits non-zero on the first mismatch.
//
//     comm_gloo_worker            all collectives
//     comm_gloo_worker die        rank 1 leaves; the others must fail within a bounded time
//     comm_gloo_worker grid       a TP=2 x DP=N/2 grid: collectives within each rank's groups
//     comm_gloo_worker connect    cairn::comm::connect on a TP=2 x PP=2 x DP=N/4 grid
#include <cairn/checkpoint/detail/transfer.hpp>
#include <cairn/comm.hpp>
#include <cairn/comm/gloo.hpp>
#include <cairn/io/error.hpp>

#include <ATen/ATen.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace {

int failures = 0;

void expect(bool ok, char const* what, int rank) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what);
    ++failures;
  }
}

int collectives() {
  auto comm = cairn::comm::gloo_from_environment(std::chrono::seconds(30));
  static_assert(cairn::comm::communicator<decltype(comm)>);
  int rank = comm.rank(), size = comm.size();
  comm.barrier();

  for (int root = 0; root < size; ++root) {
    auto t = rank == root ? at::arange(5, at::kFloat) + root : at::zeros({5});
    comm.broadcast(t, root);
    expect(t.equal(at::arange(5, at::kFloat) + root), "broadcast", rank);
  }

  auto sum = at::full({3}, double(rank + 1), at::kDouble);
  comm.all_reduce(sum, cairn::comm::reduce_op::sum);
  expect(sum.equal(at::full({3}, double(size * (size + 1) / 2), at::kDouble)), "all_reduce sum", rank);
  auto max = at::full({2}, std::int64_t(rank * 10), at::kLong);
  comm.all_reduce(max, cairn::comm::reduce_op::max);
  expect(max.equal(at::full({2}, std::int64_t((size - 1) * 10), at::kLong)), "all_reduce max", rank);

  auto equal = comm.all_gather(at::full({2, 2}, float(rank)));
  expect(int(equal.size()) == size, "all_gather count", rank);
  for (int r = 0; r < size; ++r) expect(equal[r].equal(at::full({4}, float(r))), "all_gather equal sizes", rank);

  // Rank r contributes r + 1 elements (rank 0 one, …), and an empty tensor from the last rank.
  auto mine = rank == size - 1 ? at::empty({0}, at::kInt) : at::full({rank + 1}, rank, at::kInt);
  auto unequal = comm.all_gather(mine);
  for (int r = 0; r < size; ++r) {
    auto expected = r == size - 1 ? at::empty({0}, at::kInt) : at::full({r + 1}, r, at::kInt);
    expect(unequal[r].equal(expected), "all_gather unequal sizes", rank);
  }

  // gather: every rank's part on the root only, in rank order, sizes differing (rank 0's empty).
  struct without_gather { // a user's communicator that has no gather of its own
    decltype(comm)& inner;
    c10::Device device() const { return inner.device(); }
    int rank() const { return inner.rank(); }
    int size() const { return inner.size(); }
    void barrier() { inner.barrier(); }
    void broadcast(at::Tensor& t, int root) { inner.broadcast(t, root); }
    void all_reduce(at::Tensor& t, cairn::comm::reduce_op op) { inner.all_reduce(t, op); }
    std::vector<at::Tensor> all_gather(at::Tensor const& t) { return inner.all_gather(t); }
  } plain{comm};
  // Each through the communicator itself, the one without gathers, and a communicator_ref of
  // each (what saves and loads take): the same parts wherever they went.
  cairn::comm::communicator_ref ref(comm), plain_ref(plain);
  auto gather_by = [&](int how, at::Tensor const& part, int root) {
    return how == 0   ? cairn::comm::gather(comm, part, root)
           : how == 1 ? cairn::comm::gather(plain, part, root)
           : how == 2 ? cairn::comm::gather(ref, part, root)
                      : cairn::comm::gather(plain_ref, part, root);
  };
  auto gather_into_by = [&](int how, at::Tensor const& part, int root, std::vector<at::Tensor>& places) {
    if (how == 0)
      cairn::comm::gather_into(comm, part, root, places);
    else if (how == 1)
      cairn::comm::gather_into(plain, part, root, places);
    else if (how == 2)
      cairn::comm::gather_into(ref, part, root, places);
    else
      cairn::comm::gather_into(plain_ref, part, root, places);
  };
  expect(ref.rank() == rank && ref.size() == size && plain_ref.device().is_cpu(), "communicator_ref forwards", rank);
  for (int root = 0; root < size; ++root)
    for (int how = 0; how < 4; ++how) {
      auto part = at::arange(rank * 3, at::kInt) + 100 * rank;
      auto parts = gather_by(how, part, root);
      if (rank != root) {
        expect(parts.empty(), "gather: nothing off the root", rank);
        continue;
      }
      expect(int(parts.size()) == size, "gather count", rank);
      for (int r = 0; r < size && r < int(parts.size()); ++r)
        expect(parts[r].equal(at::arange(r * 3, at::kInt) + 100 * r), "gather parts in rank order", rank);
    }

  // gather_into: every part straight into its place on the root, here the halves of one tensor.
  for (int root = 0; root < size; ++root)
    for (int how = 0; how < 4; ++how) {
      auto part = at::arange(rank * 3, at::kInt) + 100 * rank;
      auto whole = at::full({3 * size * (size - 1) / 2}, -1, at::kInt);
      std::vector<at::Tensor> places;
      for (int r = 0, offset = 0; r < size; offset += 3 * r, ++r) places.push_back(whole.narrow(0, offset, 3 * r));
      gather_into_by(how, part, root, places);
      if (rank != root) continue;
      for (int r = 0; r < size; ++r)
        expect(places[std::size_t(r)].equal(at::arange(r * 3, at::kInt) + 100 * r), "gather_into: in place", rank);
      expect(whole.ge(0).all().item<bool>(), "gather_into: every element written", rank);
    }

  auto strings = cairn::comm::all_gather_strings(comm, "rank-" + std::to_string(rank) + (rank % 2 ? "-odd" : ""));
  for (int r = 0; r < size; ++r)
    expect(strings[r] == "rank-" + std::to_string(r) + (r % 2 ? "-odd" : ""), "all_gather_strings", rank);
  expect(cairn::comm::broadcast_string(comm, rank == 0 ? "/exp/checkpoints/100" : "") == "/exp/checkpoints/100",
         "broadcast_string", rank);
  // Nothing from every rank (an agreement where no rank failed): no collective of zero bytes.
  auto nothing = cairn::comm::all_gather_strings(comm, "");
  expect(nothing.size() == static_cast<std::size_t>(size) && nothing[0].empty() && nothing.back().empty(),
         "all_gather_strings of empty strings", rank);
  bool agreed_failure = false;
  try {
    cairn::comm::all_succeed(comm, "step", [&] {
      if (rank == size - 1) throw cairn::error("disk full");
    });
  } catch (cairn::error const& e) {
    agreed_failure =
        rank == size - 1
            ? std::string(e.what()) == "disk full"
            : std::string(e.what()).find("rank " + std::to_string(size - 1) + ": disk full") != std::string::npos;
  }
  expect(agreed_failure, "all_succeed: one rank's failure on every rank", rank);
  // The kind crosses ranks: every rank sees the failed rank's kind (a full disk's errno here),
  // and a kind of the lowest failed rank when several fail.
  auto kind_of_step = [&](auto&& f) {
    try {
      cairn::comm::all_succeed(comm, "step", f);
    } catch (cairn::error const& e) {
      return e.kind();
    } catch (std::exception const&) {
      return std::error_code(); // a rank's own failure, rethrown as it was
    }
    return std::error_code();
  };
  expect(kind_of_step([&] {
           if (rank == size - 1)
             throw cairn::io::system_error("/exp/checkpoints/4/rank_1.safetensors", "write", ENOSPC);
         }) == std::errc::no_space_on_device,
         "all_succeed: the kind of a failed write on every rank", rank);
  expect(kind_of_step([&] {
           if (rank == 0) throw cairn::training_error(cairn::training_errc::in_use, "held");
           if (rank == size - 1) throw std::runtime_error("not one of cairn's");
         }) == (rank == size - 1 && size > 1 ? std::error_code() : std::error_code(cairn::training_errc::in_use)),
         "all_succeed: the kind of the lowest failed rank", rank);
  if (size > 1)
    expect(kind_of_step([&] {
             if (rank == 1) throw std::runtime_error("not one of cairn's");
           }) == (rank == 1 ? std::error_code() : std::error_code(cairn::comm_errc::other_rank)),
           "all_succeed: another rank's failure outside cairn", rank);
  cairn::comm::all_succeed(comm, "step", [] {});

  // Agreement on booleans, sums and lists of integers, as the checkpoint code uses them.
  expect(cairn::comm::all_of(comm, true) && !cairn::comm::all_of(comm, rank != size - 1), "all_of", rank);
  expect(cairn::comm::any_of(comm, rank == size - 1) && !cairn::comm::any_of(comm, false), "any_of", rank);
  expect(cairn::comm::sum(comm, rank + 1) == std::int64_t{size} * (size + 1) / 2, "sum", rank);
  std::vector<std::int64_t> iterations{400, 300, std::int64_t{1} << 40};
  expect(cairn::comm::broadcast_integers(comm, rank == 0 ? iterations : std::vector<std::int64_t>{7}) == iterations,
         "broadcast_integers", rank);
  expect(cairn::comm::broadcast_integers(comm, {}).empty(), "broadcast_integers of nothing", rank);

  // A load's problems on one rank reach every rank, with that rank's file and reason.
  cairn::detail::load_report report;
  if (rank == size - 1) report.add("rank_1.safetensors: tensor 'w/weights'", "is corrupt");
  std::string reported;
  try {
    report.agree(comm, "cannot load checkpoint c");
  } catch (cairn::checkpoint_error const& e) {
    reported = e.what();
  }
  auto expected = (rank == size - 1 ? std::string() : "rank " + std::to_string(size - 1) + ": ") +
                  "rank_1.safetensors: tensor 'w/weights': is corrupt";
  expect(reported.find(expected) != std::string::npos, "load_report: another rank's problem, named", rank);
  comm.barrier();
  if (failures == 0) std::printf("rank %d of %d: all collectives agree\n", rank, size);
  return failures == 0 ? 0 : 1;
}

int rank_dies() {
  auto comm = cairn::comm::gloo_from_environment(std::chrono::seconds(20));
  comm.barrier();
  if (comm.rank() == 1) {
    std::printf("rank 1 leaves\n");
    std::_Exit(0);
  }
  auto start = std::chrono::steady_clock::now();
  try {
    auto t = at::ones({4});
    comm.all_reduce(t, cairn::comm::reduce_op::sum);
  } catch (std::exception const& e) {
    auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("rank %d: the collective failed after %.1f s: %s\n", comm.rank(), seconds,
                std::string(e.what()).substr(0, 120).c_str());
    // A comm_error naming this rank and the collective, its kind the backend's failure.
    auto const* failure = dynamic_cast<cairn::error const*>(&e);
    bool named = failure &&
                 (failure->kind() == cairn::comm_errc::backend || failure->kind() == cairn::comm_errc::timeout) &&
                 std::string(e.what()).find("rank " + std::to_string(comm.rank()) + " of 3: all_reduce failed") !=
                     std::string::npos;
    if (!named) std::fprintf(stderr, "rank %d: the failure does not name the rank and the collective\n", comm.rank());
    return seconds < 25 && named ? 0 : 1;
  }
  std::fprintf(stderr, "rank %d: the collective succeeded without rank 1\n", comm.rank());
  return 1;
}

/// Checks that `comm` is the group of `members` with this rank at `index`: its size, and that
/// sums, broadcasts and gathers stay among its members.
template <class Communicator>
void check_group(Communicator& comm, std::vector<int> const& members, int index, int rank) {
  expect(comm.size() == static_cast<int>(members.size()), "group size", rank);
  expect(comm.rank() == index, "a rank's index in its group is its coordinate", rank);
  // The sum of the members' global ranks: each group's own.
  auto t = at::full({3}, static_cast<double>(rank), at::kDouble);
  comm.all_reduce(t, cairn::comm::reduce_op::sum);
  double expected = 0;
  for (int m : members) expected += m;
  expect(t.eq(expected).all().item<bool>(), "all_reduce within the group", rank);
  // The group's first member's rank, broadcast to the group.
  auto b = at::full({1}, static_cast<double>(rank), at::kDouble);
  comm.broadcast(b, 0);
  expect(b.item<double>() == members.front(), "broadcast within the group", rank);
  auto all = comm.all_gather(at::full({1}, static_cast<double>(rank), at::kDouble));
  for (std::size_t i = 0; i < members.size(); ++i)
    expect(all.at(i).template item<double>() == members[i], "all_gather in group order", rank);
}

/// A TP=2 x DP=size/2 grid over one store: each rank's TP and DP groups sum, broadcast and
/// gather among their members only, whatever the other groups do at the same time.
int grid() {
  auto env = cairn::comm::read_environment();
  auto store = cairn::comm::make_store(env, std::chrono::seconds(30));
  cairn::comm::parallel_grid layout(2, 1, env.world_size / 2, env.world_size);
  auto rank = env.rank;
  auto at = layout.coordinates(rank);
  for (auto a : {cairn::comm::axis::tensor, cairn::comm::axis::data}) {
    auto members = layout.group(a, rank);
    auto name =
        std::string(a == cairn::comm::axis::tensor ? "tp/" : "dp/") + std::to_string(layout.group_index(a, rank));
    auto comm = cairn::comm::make_gloo_group(store, env, name, members, std::chrono::seconds(30));
    check_group(comm, members, at.at(a), rank);
  }
  try { // a rank outside a group cannot join it
    (void)cairn::comm::make_gloo_group(store, env, "nobody", {rank == 0 ? 1 : 0}, std::chrono::seconds(1));
    expect(false, "a non-member refused", rank);
  } catch (cairn::error const& e) {
    expect(e.kind() == cairn::comm_errc::environment, "a non-member refused with kind environment", rank);
  }
  // Every rank stays until all are done with the store rank 0 serves.
  std::vector<int> everyone(static_cast<std::size_t>(env.world_size));
  std::iota(everyone.begin(), everyone.end(), 0);
  auto world = cairn::comm::make_gloo_group(store, env, "world", everyone, std::chrono::seconds(30));
  world.barrier();
  if (failures == 0) std::printf("rank %d (tp %d, dp %d): every group agrees\n", rank, at.tensor, at.data);
  return failures == 0 ? 0 : 1;
}

/// `connect` on a TP=2 x PP=2 x DP=size/4 grid: the world and each axis's group of every rank,
/// made in one call over one store.
int connected() {
  auto env = cairn::comm::read_environment();
  cairn::comm::parallel_grid layout(2, 2, env.world_size / 4, env.world_size);
  auto comms = cairn::comm::connect(cairn::comm::backend::gloo, false, layout, std::chrono::seconds(30));
  auto rank = env.rank;
  expect(comms.at == layout.coordinates(rank), "the rank's coordinates", rank);
  std::vector<int> everyone(static_cast<std::size_t>(env.world_size));
  std::iota(everyone.begin(), everyone.end(), 0);
  check_group(comms.world, everyone, rank, rank);
  for (auto a : {cairn::comm::axis::tensor, cairn::comm::axis::pipeline, cairn::comm::axis::data})
    check_group(comms.along(a), layout.group(a, rank), comms.at.at(a), rank);
  try { // a grid of another size than the job is refused before any rank waits
    (void)cairn::comm::connect(cairn::comm::backend::gloo, false, cairn::comm::parallel_grid(2, 1, 1, 2));
    expect(false, "a grid of another size refused", rank);
  } catch (cairn::error const& e) {
    expect(e.kind() == cairn::comm_errc::environment, "a grid of another size refused with kind environment", rank);
  }
  comms.world.barrier();
  if (failures == 0) std::printf("rank %d: every group of the grid agrees\n", rank);
  return failures == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  try {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "grid") return grid();
    if (mode == "connect") return connected();
    return mode == "die" ? rank_dies() : collectives();
  } catch (std::exception const& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
