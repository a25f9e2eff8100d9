// The local tier of checkpoints across forked ranks grouped into "nodes" by their local
// directories (the ranks of a node share one; each node has its own): saves on every node with
// each rank's part copied to a peer on another node, and recovery after a node is replaced,
// after both copies of a part are lost, with a copy corrupted, beside a torn save. The state's
// every element is a known function of the iteration, so a loaded state proves which iteration
// it came from. File transfers between ranks, in chunks, are tested on their own first.
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/verify.hpp>
#include <cairn/comm/connect.hpp>
#include <cairn/config/json.hpp>
#include <cairn/io/error.hpp>
#include <cairn/io/file.hpp>
#include <cairn/training/local_tier.hpp>
#include <cairn/training/manager.hpp>

#include <ATen/Parallel.h>

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/manager_state.hpp"
#include "forked_ranks.hpp"
#include "io/temp_dir.hpp"

namespace {

std::string read_text(std::filesystem::path const& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_text(std::filesystem::path const& file, std::string const& text) {
  std::ofstream(file, std::ios::binary) << text;
}

/// Every diagnostic of this process, appended to `file` (a rank's log the test reads after).
void log_diagnostics(std::filesystem::path const& file) {
  cairn::set_diagnostic_sink([file](cairn::severity, cairn::diagnostic const& d) {
    std::ofstream(file, std::ios::app) << d.to_string() << "\n";
  });
}

/// In a rank whose local disk filled up: that directory, where every write of a save fails with
/// ENOSPC (the run's start, its node check included, found it writable).
std::string full_disk;

void disk_full(char const* operation, std::filesystem::path const& path) {
  if (!full_disk.empty() && std::string_view(operation) == "write" && path.string().starts_with(full_disk + "/cairn-"))
    throw cairn::io::system_error(path, "write failed", ENOSPC);
}

/// The job's communicators, over a grid of `size` data-parallel ranks, with one for transfers.
cairn::comm::grid_communicators connect(int size) {
  return cairn::comm::connect(cairn::comm::backend::gloo, false, cairn::comm::parallel_grid(1, 1, size, size),
                              std::chrono::seconds(60), true);
}

/// The manager test's state, plus a parameter every rank holds whole (replicated, the same
/// values on every rank): its elements too are the iteration's.
cairn::model_state make_state(int rank, int size, std::int64_t iteration) {
  auto state = manager_test::make(rank, size, iteration);
  cairn::parameter_state norm;
  norm.layout = {"norm", {7}, cairn::io::dtype::F32, true, cairn::shard_layout::whole({7})};
  for (std::size_t k = 0; k < state.shard_names.size(); ++k) norm.shards.push_back(at::zeros({7}, at::kFloat));
  state.parameters.push_back(std::move(norm));
  manager_test::fill(state, iteration);
  return state;
}

bool holds(cairn::model_state const& state, std::int64_t iteration) {
  return manager_test::mismatches(state, iteration) == 0;
}

/// A run's files: the shared experiment directory and each node's own local directory.
struct cluster {
  temp_dir root;
  int ranks = 4;
  int per_node = 2;
  bool promote = false;
  int full_disk_node = -1; ///< a node whose local disk is full: every write there fails

  [[nodiscard]] std::filesystem::path experiment() const { return root / "experiment"; }
  [[nodiscard]] std::filesystem::path local(int node) const { return root / ("node-" + std::to_string(node)); }
  /// The experiment's local checkpoints on `node`: under its identity, in its experiment directory.
  [[nodiscard]] std::filesystem::path checkpoints(int node) const {
    auto id = read_text(experiment() / ".cairn-experiment");
    return local(node) / ("cairn-" + id.substr(0, id.find('\n'))) / "checkpoints";
  }
  [[nodiscard]] std::filesystem::path local_save(int node, std::int64_t iteration) const {
    return checkpoints(node) / std::to_string(iteration);
  }
  [[nodiscard]] std::filesystem::path log(int rank) const { return root / ("log-" + std::to_string(rank)); }
  void clear_logs() const {
    for (int r = 0; r < ranks; ++r) std::filesystem::remove(log(r));
  }
  /// Whether every rank logged `line` ("resumed 8 local").
  [[nodiscard]] bool all_logged(std::string const& line) const {
    for (int r = 0; r < ranks; ++r)
      if (read_text(log(r)).find(line) == std::string::npos) return false;
    return true;
  }
  [[nodiscard]] std::string logs() const {
    std::string all;
    for (int r = 0; r < ranks; ++r) all += read_text(log(r));
    return all;
  }

  [[nodiscard]] cairn::training_config config(std::int64_t iterations, int node) const {
    return cairn::from_string<cairn::training_config>(
        R"({"train_iters": )" + std::to_string(iterations) +
        R"(, "checkpoint": {"interval": 5, "keep": 2, "local": {"interval": 2, "keep": 2, "replicas": 1, "promote": )" +
        (promote ? "true" : "false") + R"(, "directory": )" +
        boost::json::serialize(boost::json::value(local(node).string())) + "}}}");
  }

  /// Trains iterations 1 … `stop_after` of a run of `iterations` (resuming first), every rank's
  /// state a function of the iteration; each rank writes "resumed N local|persistent|fresh" to
  /// its log, then what it found wrong. Returns the first failed rank's status.
  int train(std::int64_t iterations, std::int64_t stop_after, bool async = true) const {
    return forked_ranks::run(ranks, [&](int rank) {
      try {
        log_diagnostics(log(rank));
        if (rank / per_node == full_disk_node) full_disk = local(full_disk_node).string();
        cairn::io::scoped_fault_injection faults(disk_full);
        auto comms = connect(ranks);
        auto state = make_state(rank, ranks, 0);
        cairn::manager_options options;
        options.async = async;
        cairn::checkpoint_manager manager(config(iterations, rank / per_node), experiment(), comms.world, options);
        manager.set_transfer_communicator(*comms.transfers);
        auto resumed = manager.resume(state);
        auto start = resumed ? resumed->iteration : 0;
        std::ofstream(log(rank), std::ios::app)
            << "resumed " << start << " " << (resumed ? (resumed->local ? "local" : "persistent") : "fresh") << "\n";
        if (!holds(state, start)) {
          std::fprintf(stderr, "rank %d: the state resumed from %lld is not that iteration's\n", rank,
                       static_cast<long long>(start));
          return 3;
        }
        manager.preflight(state);
        for (auto it = start + 1; it <= stop_after; ++it) {
          manager_test::fill(state, it);
          manager.step(it, state);
        }
        manager.finish();
        return 0;
      } catch (std::exception const& e) { // into the log, for the test to read
        std::ofstream(log(rank), std::ios::app) << "error: " << e.what() << "\n";
        return 1;
      }
    });
  }
};

} // namespace

TEST_CASE("files move between ranks in chunks, each rank sending one and receiving one at a time") {
  temp_dir dir;
  // Rank r's files in dir/r/: "a" of 2500 bytes + r (three chunks of 1000 and a part), "empty"
  // of none, "big" only on rank 0. Rank 2 has no "a" at all: its transfer fails on both ends.
  for (int r = 0; r < 3; ++r) {
    std::filesystem::create_directories(dir / std::to_string(r));
    std::string bytes(2500 + static_cast<std::size_t>(r), '\0');
    for (std::size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<char>((i * 7 + static_cast<std::size_t>(r)) % 251);
    if (r != 2) write_text(dir / std::to_string(r) / "a", bytes);
    write_text(dir / std::to_string(r) / "empty", "");
  }
  write_text(dir / "0" / "big", std::string(10000, 'x'));
  std::vector<cairn::detail::file_transfer> transfers{
      {0, 1, "a"}, {1, 2, "a"}, {2, 0, "a"}, {0, 2, "empty"}, {0, 1, "big"}};
  auto status = forked_ranks::run(3, [&](int rank) {
    auto comm = connect(3);
    auto mine = dir / std::to_string(rank);
    auto received = dir / ("in-" + std::to_string(rank));
    std::filesystem::create_directories(received);
    auto outcomes = cairn::detail::run_transfers(comm.world, transfers, mine, received, 1000);
    std::string report;
    for (auto const& o : outcomes)
      report += std::to_string(o.index) + (o.received ? " in " : " out ") + std::to_string(o.bytes) + " " +
                (o.problem.empty() ? "ok" : "failed") + "\n";
    write_text(dir / ("report-" + std::to_string(rank)), report);
    return 0;
  });
  REQUIRE(status == 0);
  // Whole files arrive where they were sent, byte for byte.
  CHECK(read_text(dir / "in-1" / "a") == read_text(dir / "0" / "a"));
  CHECK(read_text(dir / "in-2" / "a") == read_text(dir / "1" / "a"));
  CHECK(read_text(dir / "in-1" / "big") == std::string(10000, 'x'));
  CHECK(std::filesystem::exists(dir / "in-2" / "empty"));
  CHECK(std::filesystem::file_size(dir / "in-2" / "empty") == 0);
  // Rank 2 had nothing to send: rank 0 received nothing, and both ends say so.
  CHECK_FALSE(std::filesystem::exists(dir / "in-0" / "a"));
  CHECK(read_text(dir / "report-0") == "0 out 2500 ok\n2 in 0 failed\n3 out 0 ok\n4 out 10000 ok\n");
  CHECK(read_text(dir / "report-1") == "1 out 2501 ok\n0 in 2500 ok\n4 in 10000 ok\n");
  CHECK(read_text(dir / "report-2") == "2 out 0 failed\n1 in 2501 ok\n3 in 0 ok\n");
}

TEST_CASE("a replaced node resumes from the newest local checkpoint, its parts sent back by its peer") {
  cluster run;
  // Local checkpoints at 2, 4, 6, 8 (kept: 6 and 8), persistent ones at 5 only.
  REQUIRE(run.train(20, 8) == 0);
  for (int node = 0; node < 2; ++node)
    for (std::int64_t it : {6, 8}) {
      auto save = run.local_save(node, it);
      CHECK(std::filesystem::exists(save / cairn::completion_marker));
      CHECK(std::filesystem::exists(save / "metadata.json"));
      for (int r = 0; r < 4; ++r) CHECK(std::filesystem::exists(cairn::formats::rank_file(save, r))); // own + peer's
    }
  CHECK_FALSE(std::filesystem::exists(run.local_save(0, 4))); // keep: 2
  CHECK(cairn::save_directory(run.experiment() / "checkpoints").complete() == std::vector<std::int64_t>{5});
  // Node 1 is replaced: its disk comes back empty.
  std::filesystem::remove_all(run.local(1));
  run.clear_logs();
  REQUIRE(run.train(20, 10) == 0);
  auto logs = run.logs();
  CHECK(run.all_logged("resumed 8 local"));
  CHECK(logs.find("ranks 0, 1 from their node's disk") != std::string::npos);
  CHECK(logs.find("rank 2 from rank 0 on node 0") != std::string::npos);
  CHECK(logs.find("rank 3 from rank 1 on node 0") != std::string::npos);
  // The replaced node holds its parts of 8 again, committed.
  CHECK(std::filesystem::exists(run.local_save(1, 8) / cairn::completion_marker));
  CHECK(std::filesystem::exists(cairn::formats::rank_file(run.local_save(1, 8), 2)));
}

TEST_CASE("a full local disk on one node: every rank warned, no copy attempted, training goes on") {
  cluster run;
  run.full_disk_node = 1; // ranks 2 and 3 cannot write their local parts; their peers' copies wait for nothing
  REQUIRE(run.train(20, 8) == 0);
  for (int r = 0; r < run.ranks; ++r) {
    auto log = read_text(run.log(r));
    CAPTURE(r);
    CAPTURE(log);
    CHECK(log.find("local checkpoint not saved") != std::string::npos);
    CHECK(log.find("No space left on device") != std::string::npos);
    CHECK(log.find("error:") == std::string::npos);
  }
  // No local checkpoint anywhere (each was abandoned on every node); the persistent one stands.
  for (int node = 0; node < 2; ++node) CHECK(cairn::save_directory(run.checkpoints(node)).complete().empty());
  CHECK(cairn::save_directory(run.experiment() / "checkpoints").complete() == std::vector<std::int64_t>{5});
  // Restarted with the disk still full: resumed from the persistent tier, and on again.
  run.clear_logs();
  REQUIRE(run.train(20, 12) == 0);
  CHECK(run.all_logged("resumed 5 persistent"));
  CHECK(cairn::save_directory(run.experiment() / "checkpoints").complete() == std::vector<std::int64_t>{5, 10});
}

TEST_CASE("with both copies of a part lost, the run resumes from the persistent tier and says so") {
  cluster run;
  run.ranks = 3;
  run.per_node = 1; // three nodes of one rank: rank r's part is kept by node r + 1
  REQUIRE(run.train(20, 8) == 0);
  // Node 1 and node 2 (which keeps node 1's part) are lost.
  std::filesystem::remove_all(run.local(1));
  std::filesystem::remove_all(run.local(2));
  run.clear_logs();
  REQUIRE(run.train(20, 9) == 0);
  CHECK(run.all_logged("resumed 5 persistent"));
  auto logs = run.logs();
  CHECK(logs.find("not whole: no node holds a copy of the parts of rank 1") != std::string::npos);
  CHECK(logs.find("resuming from the persistent tier's checkpoint 5") != std::string::npos);
}

TEST_CASE("a corrupted copy is refused by its checksums and the other copy is used") {
  cluster run;
  REQUIRE(run.train(20, 8) == 0);
  // One byte of rank 2's own copy on node 1 flipped, in its tensors' data (the file's end).
  auto file = cairn::formats::rank_file(run.local_save(1, 8), 2);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-3, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    f.seekp(-3, std::ios::end);
    c = static_cast<char>(c ^ 0x10);
    f.write(&c, 1);
  }
  run.clear_logs();
  REQUIRE(run.train(20, 9) == 0);
  CHECK(run.all_logged("resumed 8 local"));
  auto logs = run.logs();
  CHECK(logs.find("refused: rank 2's part on node 1") != std::string::npos);
  CHECK(logs.find("rank 2 from rank 0 on node 0") != std::string::npos);
}

TEST_CASE("a local checkpoint whose parts do not all check gives way to an older one; none at all is an error") {
  cluster run;
  REQUIRE(run.train(20, 8) == 0);
  // Both copies of rank 2's part of 8 damaged: 6 is the newest whole one (newer than persistent 5).
  for (int node = 0; node < 2; ++node) {
    auto file = cairn::formats::rank_file(run.local_save(node, 8), 2);
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.write("XXXX", 4);
  }
  run.clear_logs();
  REQUIRE(run.train(20, 7) == 0);
  CHECK(run.all_logged("resumed 6 local"));
  CHECK(run.logs().find("not whole: no copy of the parts of rank 2 checks") != std::string::npos);
  // Three one-rank nodes, no persistent checkpoint yet, two nodes lost: the run stops, and
  // deletes nothing, rather than start over beside the local checkpoints it could not recover.
  cluster young;
  young.ranks = 3;
  young.per_node = 1;
  REQUIRE(young.train(20, 4) == 0);
  std::filesystem::remove_all(young.local(1));
  std::filesystem::remove_all(young.local(2));
  young.clear_logs();
  CHECK(young.train(20, 6) != 0);
  CHECK(young.logs().find("no local checkpoint in") != std::string::npos);
  CHECK(young.logs().find("no persistent checkpoint either") != std::string::npos);
  CHECK(std::filesystem::exists(young.local_save(0, 4)));
}

TEST_CASE("a local save torn by a crash is never used") {
  cluster run;
  REQUIRE(run.train(20, 8) == 0);
  // What a crash while saving 10 leaves on node 1: a staging directory, and on node 0 a save
  // renamed into place whose marker was never written.
  std::filesystem::copy(run.local_save(1, 8), run.checkpoints(1) / ".partial-10");
  std::filesystem::copy(run.local_save(0, 8), run.local_save(0, 10));
  std::filesystem::remove(run.local_save(0, 10) / cairn::completion_marker);
  run.clear_logs();
  REQUIRE(run.train(20, 9) == 0);
  CHECK(run.all_logged("resumed 8 local"));
  CHECK_FALSE(std::filesystem::exists(run.local_save(0, 10)));
  CHECK_FALSE(std::filesystem::exists(run.checkpoints(1) / ".partial-10"));
}

TEST_CASE("local checkpoints of another experiment, or of another number of ranks, are not resumed from") {
  cluster run;
  REQUIRE(run.train(20, 8) == 0);
  // A new experiment given the same local directories (the experiment directory deleted and
  // made again, or another one): it starts fresh, and its saves go beside the first's.
  cluster other;
  for (int node = 0; node < 2; ++node)
    std::filesystem::copy(run.local(node), other.local(node), std::filesystem::copy_options::recursive);
  REQUIRE(other.train(20, 2) == 0);
  CHECK(other.all_logged("resumed 0 fresh"));
  CHECK(std::filesystem::exists(other.local_save(1, 2)));
  CHECK(std::filesystem::exists(other.local(1) / run.checkpoints(1).parent_path().filename() / "checkpoints" / "8"));
  // The first's saves moved under the second's name: their markers say whose they are.
  for (int node = 0; node < 2; ++node) {
    std::filesystem::remove_all(other.checkpoints(node));
    std::filesystem::copy(run.checkpoints(node), other.checkpoints(node), std::filesystem::copy_options::recursive);
  }
  other.clear_logs();
  REQUIRE(other.train(20, 1) == 0);
  CHECK(other.all_logged("resumed 0 fresh"));
  CHECK(other.logs().find("a local checkpoint of another experiment") != std::string::npos);
  // The same experiment on two ranks: the local parts are four ranks', it reshards from the
  // persistent tier.
  run.clear_logs();
  run.ranks = 2;
  run.per_node = 1;
  REQUIRE(run.train(20, 6) == 0);
  CHECK(run.all_logged("resumed 5 persistent"));
  CHECK(run.logs().find("saved by another number of ranks") != std::string::npos);
}

TEST_CASE("promoted, a persistent checkpoint is a copy of the local files, and loads on another world size") {
  cluster run;
  run.promote = true;
  REQUIRE(run.train(10, 10) == 0); // persistent 5 and 10, each a local checkpoint first
  auto persistent = run.experiment() / "checkpoints" / "10";
  REQUIRE(std::filesystem::exists(persistent / cairn::completion_marker));
  for (int r = 0; r < 4; ++r)
    CHECK(read_text(cairn::formats::rank_file(persistent, r)) ==
          read_text(cairn::formats::rank_file(run.local_save(r / 2, 10), r)));
  CHECK(read_text(persistent / "metadata.json") == read_text(run.local_save(1, 10) / "metadata.json"));
  auto report = cairn::verify_checkpoint(persistent);
  CHECK_MESSAGE(report.ok(), (report.problems.empty() ? "" : report.problems.front()));
  CHECK(cairn::save_directory(run.experiment() / "checkpoints").complete() == std::vector<std::int64_t>{5, 10});
  // Three ranks read it, resharded (every rank's file holds its replicated parameters too).
  run.clear_logs();
  run.ranks = 3;
  run.per_node = 1;
  REQUIRE(run.train(12, 11) == 0);
  CHECK(run.all_logged("resumed 10 persistent"));
}

int main(int argc, char** argv) {
  // Ranks are forked from this process: no thread pools to inherit.
  at::set_num_threads(1);
  doctest::Context context(argc, argv);
  return context.run();
}
