// The checkpoint manager in one process: schedules, retention, exports, callbacks, shutdowns,
// resuming from the newest good checkpoint, async saves, failures and preflight.
#include <cairn/checkpoint/verify.hpp>
#include <cairn/comm/single_process.hpp>
#include <cairn/config/json.hpp>
#include <cairn/training/manager.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <limits>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "../error_kind.hpp"
#include "checkpoint/manager_state.hpp"
#include "io/temp_dir.hpp"

using namespace cairn;
using manager = checkpoint_manager<comm::single_process>;
using list = std::vector<std::int64_t>;

namespace {

training_config schedule(std::string const& overrides_json) { return from_string<training_config>(overrides_json); }

/// Trains iterations first..last (filling the state with each one's values) through `m`;
/// returns the iteration at which a shutdown stopped it, or `last`.
std::int64_t train(manager& m, model_state& state, std::int64_t first, std::int64_t last) {
  for (auto it = first; it <= last; ++it) {
    manager_test::fill(state, it);
    if (m.step(it, state)) return it;
  }
  return last;
}

/// Collects the diagnostics emitted while it lives.
struct captured {
  std::vector<std::pair<severity, std::string>> messages;
  scoped_diagnostic_sink sink{[this](severity s, diagnostic const& d) { messages.emplace_back(s, d.to_string()); }};
  [[nodiscard]] bool has(severity s, std::string const& text) const {
    for (auto const& [level, message] : messages)
      if (level == s && message.find(text) != std::string::npos) return true;
    return false;
  }
};

std::string read_text(std::filesystem::path const& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

manager_options sync_options() {
  manager_options o;
  o.async = false;
  return o;
}

/// A run of `iterations` in `dir` with a checkpoint every 2 iterations, all kept, saved
/// synchronously and finished; its training config.
training_config finished_run(std::filesystem::path const& dir, comm::single_process& comm, model_state& state,
                             std::int64_t iterations) {
  auto cfg = schedule(R"({"checkpoint": {"interval": 2, "keep": null}})");
  cfg.train_iters = iterations;
  manager m(cfg, dir, comm, sync_options());
  train(m, state, 1, iterations);
  m.finish();
  return cfg;
}

} // namespace

TEST_CASE("checkpoints follow their interval, the last iteration, keep and keep_every") {
  temp_dir tmp;
  comm::single_process comm;
  captured log;
  auto cfg = schedule(R"({"train_iters": 9, "checkpoint": {"interval": 2, "keep": 2, "keep_every": 2}})");
  manager m(cfg, tmp.path, comm);
  auto state = manager_test::make(0, 1, 0);
  CHECK_FALSE(m.resume(state));
  train(m, state, 1, 9);
  // Saves at 2, 4, 6, 8 and the last iteration 9. The seed's counts: (iteration - offset) //
  // interval + 1, so 2, 4, 6, 8 are counts 2, 3, 4, 5, and those at 2 and 6 are kept forever;
  // of the others (4, 8) the newest two stay; 9 is off the schedule: never counted or deleted.
  CHECK(m.checkpoints().complete() == list{2, 4, 6, 8, 9});
  CHECK(log.has(severity::info, "saved checkpoint"));
  CHECK_FALSE(std::filesystem::exists(tmp / "export"));
}

TEST_CASE("the end saves a checkpoint and an export only when they are enabled (the seed's rule)") {
  temp_dir tmp;
  comm::single_process comm;
  auto state = manager_test::make(0, 1, 0);
  {
    manager m(schedule(R"({"train_iters": 5})"), tmp / "none", comm);
    m.preflight(state);
    train(m, state, 1, 5);
    m.finish();
    CHECK_FALSE(std::filesystem::exists(tmp / "none" / "checkpoints"));
  }
  {
    // Nothing to save: no experiment directory needed.
    manager m(schedule(R"({"train_iters": 5})"), {}, comm);
    m.preflight(state);
    CHECK_FALSE(m.resume(state));
    train(m, state, 1, 5);
    m.finish();
  }
  manager m(schedule(R"({"train_iters": 5, "export": {"interval": 10, "format": "state_dict"}})"), tmp / "export",
            comm);
  train(m, state, 1, 5);
  m.finish();
  CHECK(m.exports().complete() == list{5});
  CHECK_FALSE(std::filesystem::exists(tmp / "export" / "checkpoints"));
}

TEST_CASE("exports have their own schedule, directory, format and retention") {
  temp_dir tmp;
  comm::single_process comm;
  auto cfg = schedule(R"({"train_iters": 7, "checkpoint": {"interval": 2},
                          "export": {"interval": 3, "format": "state_dict", "keep": 2}})");
  manager m(cfg, tmp.path, comm);
  auto state = manager_test::make(0, 1, 0);
  train(m, state, 1, 7);
  CHECK(m.checkpoints().complete() == list{2, 4, 6, 7});
  // 3, 6 and the last; keep 2 counts 3 and 6 only: 7 is off the schedule (the seed's rule).
  CHECK(m.exports().complete() == list{3, 6, 7});
  CHECK(std::filesystem::exists(tmp / "export" / "7" / "state_dict.safetensors.index.json"));
  CHECK_FALSE(std::filesystem::exists(tmp / "export" / "7" / "rank_0.safetensors"));

  // The export holds the weights of its iteration, loadable on its own.
  auto loaded = manager_test::make(0, 1, 0);
  checkpoint_load_config load;
  load.path = tmp / "export" / "6";
  load.format = checkpoint_format::state_dict;
  auto metadata = load_checkpoint(loaded, comm, load);
  CHECK(metadata.metadata.at("iteration").as_int64() == 6);
  CHECK(metadata.iteration == 6); // typed, for every reader
  CHECK(loaded.parameters[0].shards[0].equal([&] {
    auto s = manager_test::make(0, 1, 0);
    manager_test::fill(s, 6);
    return s.parameters[0].shards[0];
  }()));
}

TEST_CASE("a shutdown stops training after a complete checkpoint") {
  temp_dir tmp;
  comm::single_process comm;
  auto cfg = schedule(R"({"train_iters": 20, "checkpoint": {"interval": 2}, "shutdown": {"interval": 6}})");
  auto state = manager_test::make(0, 1, 0);
  {
    manager m(cfg, tmp.path, comm);
    CHECK(train(m, state, 1, 20) == 6);
    CHECK(m.checkpoints().complete() == list{2, 4, 6});
  }
  // The next run resumes there and goes on to the next shutdown.
  manager m(cfg, tmp.path, comm);
  auto resumed = m.resume(state);
  REQUIRE(resumed);
  CHECK(resumed->iteration == 6);
  CHECK(train(m, state, 7, 20) == 12);
}

TEST_CASE("resume loads the newest complete checkpoint, bit for bit") {
  temp_dir tmp;
  comm::single_process comm;
  auto cfg = schedule(R"({"train_iters": 5, "checkpoint": {"interval": 1}})");
  {
    manager m(cfg, tmp.path, comm);
    auto state = manager_test::make(0, 1, 0);
    train(m, state, 1, 5);
  }
  manager m(cfg, tmp.path, comm);
  auto state = manager_test::make(0, 1, 0);
  captured log;

  SUBCASE("the newest") {
    auto resumed = m.resume(state);
    REQUIRE(resumed);
    CHECK(resumed->iteration == 5);
    CHECK(resumed->metadata.metadata.at("iteration").as_int64() == 5);
    CHECK(manager_test::mismatches(state, 5) == 0);
    CHECK(m.start_iteration() == 5);
    CHECK(log.has(severity::info, "loaded checkpoint"));
  }
  SUBCASE("a newer partial one is skipped and removed") {
    std::filesystem::create_directories(tmp / "checkpoints" / "6");
    std::filesystem::create_directories(tmp / "checkpoints" / ".partial-7");
    auto resumed = m.resume(state);
    REQUIRE(resumed);
    CHECK(resumed->iteration == 5);
    CHECK_FALSE(std::filesystem::exists(tmp / "checkpoints" / "6"));
    CHECK_FALSE(std::filesystem::exists(tmp / "checkpoints" / ".partial-7"));
    CHECK(log.has(severity::warning, "no completion marker"));
  }
  SUBCASE("a truncated newest one is skipped for the one before") {
    std::filesystem::resize_file(tmp / "checkpoints" / "5" / "rank_0.safetensors", 100);
    auto resumed = m.resume(state);
    REQUIRE(resumed);
    CHECK(resumed->iteration == 4);
    CHECK(manager_test::mismatches(state, 4) == 0);
    CHECK(log.has(severity::warning, "skipped"));
    CHECK(std::filesystem::exists(tmp / "checkpoints" / "5")); // kept for inspection
  }
  SUBCASE("a newest one whose bytes changed fails its checksums and is skipped") {
    auto file = tmp / "checkpoints" / "5" / "rank_0.safetensors";
    auto size = std::filesystem::file_size(file);
    {
      std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(size - 3));
      f.put('\x7f');
    }
    auto resumed = m.resume(state);
    REQUIRE(resumed);
    CHECK(resumed->iteration == 4);
    CHECK(log.has(severity::warning, "does not load"));
  }
  SUBCASE("when none loads, an error says why") {
    for (auto it : m.checkpoints().complete())
      std::filesystem::resize_file(tmp / "checkpoints" / std::to_string(it) / "metadata.json", 2);
    // The markers list the old sizes: every checkpoint is skipped before loading. Make the
    // markers agree, so that the loads themselves fail.
    for (auto it : m.checkpoints().complete()) {
      auto dir = tmp / "checkpoints" / std::to_string(it);
      auto marker = read_json_file(dir / completion_marker).as_object();
      marker["files"].as_object()["metadata.json"] = 2;
      std::ofstream(dir / completion_marker) << serialize(marker);
    }
    CHECK_KIND(m.resume(state), cairn::training_errc::no_checkpoint);
  }
}

TEST_CASE("an async save is bitwise identical to a synchronous one and stalls only for a copy") {
  temp_dir tmp;
  comm::single_process comm;
  auto cfg = schedule(R"({"train_iters": 3, "checkpoint": {"interval": 1}})");
  auto state = manager_test::make(0, 1, 0);
  {
    manager m(cfg, tmp / "sync", comm, sync_options());
    train(m, state, 1, 3);
  }
  {
    manager m(cfg, tmp / "async", comm);
    for (std::int64_t it = 1; it <= 3; ++it) {
      manager_test::fill(state, it);
      m.step(it, state);
      // Training goes on at once; what is being saved is the copy taken in step().
      for (auto& p : state.parameters)
        for (auto& s : p.shards) s.fill_(-1);
    }
  }
  // Bitwise the same files, but for each save's own identity.
  for (auto it : {1, 2, 3}) {
    CAPTURE(it);
    auto sync_dir = tmp / "sync" / "checkpoints" / std::to_string(it);
    auto async_dir = tmp / "async" / "checkpoints" / std::to_string(it);
    auto sync_id = read_checkpoint_metadata(sync_dir / "metadata.json").save_id;
    auto async_id = read_checkpoint_metadata(async_dir / "metadata.json").save_id;
    REQUIRE(sync_id.size() == 32);
    CHECK(sync_id != async_id);
    for (auto name : {"rank_0.safetensors", "metadata.json"}) {
      CAPTURE(name);
      auto sync = read_text(sync_dir / name);
      auto async = read_text(async_dir / name);
      CHECK(!sync.empty());
      auto at = async.find(async_id);
      REQUIRE(at != std::string::npos);
      async.replace(at, async_id.size(), sync_id);
      CHECK(sync == async);
    }
    auto sync_marker = read_json_file(sync_dir / completion_marker).as_object();
    auto async_marker = read_json_file(async_dir / completion_marker).as_object();
    CHECK(sync_marker.at("iteration") == async_marker.at("iteration"));
    for (auto const& [name, entry] : sync_marker.at("files").as_object())
      CHECK(entry.at("size") == async_marker.at("files").at(name).at("size"));
  }
}

namespace {
std::string fail_path_containing;
void fail_matching(char const* operation, std::filesystem::path const& path) {
  if (!fail_path_containing.empty() && std::string(operation) == "write" &&
      path.string().find(fail_path_containing) != std::string::npos)
    throw io::io_error(path, "write failed: No space left on device");
}
} // namespace

TEST_CASE("a failed background save is an error at the next call, and earlier checkpoints stay") {
  temp_dir tmp;
  comm::single_process comm;
  auto cfg = schedule(R"({"train_iters": 10, "checkpoint": {"interval": 1, "keep": 1}})");
  manager m(cfg, tmp.path, comm);
  auto state = manager_test::make(0, 1, 0);
  train(m, state, 1, 2);
  m.finish();
  CHECK(m.checkpoints().complete() == list{2});

  fail_path_containing = ".partial-3";
  bool failed = false;
  {
    io::scoped_fault_injection failing(fail_matching);
    manager_test::fill(state, 3);
    m.step(3, state); // starts writing in the background
    manager_test::fill(state, 4);
    try {
      m.step(4, state);
      m.finish();
    } catch (error const& e) {
      failed = true;
      CHECK(std::string(e.what()).find("No space left on device") != std::string::npos);
      CHECK(std::string(e.what()).find((tmp / "checkpoints" / ".partial-3").string()) != std::string::npos);
    }
  }
  fail_path_containing.clear();
  CHECK(failed);
  CHECK(m.checkpoints().complete() == list{2});
  CHECK_FALSE(std::filesystem::exists(tmp / "checkpoints" / ".partial-3"));

  // The run can go on, and the next save is complete.
  train(m, state, 4, 4);
  m.finish();
  CHECK(m.checkpoints().complete() == list{4});
}

namespace {
int fail_at = 0;
std::atomic<int> operations{0}; // saves write on a thread of their own too
int error_code = ENOSPC;
void fail_nth(char const* operation, std::filesystem::path const& path) {
  if (++operations == fail_at) throw io::system_error(path, std::string(operation) + " failed", error_code);
}
} // namespace

TEST_CASE("disk-full and permission errors at every file operation of a save name a path and lose nothing") {
  comm::single_process comm;
  auto cfg = schedule(R"({"train_iters": 10, "checkpoint": {"interval": 1, "keep": 1},
                          "export": {"interval": 2, "format": "state_dict"}})");
  // Count the operations of iteration 2 (a checkpoint, an export, retention of checkpoint 1).
  int total = 0;
  {
    temp_dir tmp;
    manager m(cfg, tmp.path, comm, sync_options());
    auto state = manager_test::make(0, 1, 0);
    train(m, state, 1, 1);
    operations = 0;
    fail_at = 0;
    io::scoped_fault_injection counting(fail_nth);
    train(m, state, 2, 2);
    total = operations;
  }
  REQUIRE(total > 20);
  for (auto code : {ENOSPC, EACCES}) {
    error_code = code;
    for (fail_at = 1; fail_at <= total; ++fail_at) {
      CAPTURE(fail_at);
      temp_dir tmp;
      auto state = manager_test::make(0, 1, 0);
      captured log;
      {
        manager m(cfg, tmp.path, comm, sync_options());
        train(m, state, 1, 1);
        operations = 0;
        io::scoped_fault_injection failing(fail_nth);
        try {
          train(m, state, 2, 2);
        } catch (error const& e) {
          CHECK(std::string(e.what()).find(tmp.path.string()) != std::string::npos);
          CHECK(std::string(e.what()).find(std::strerror(code)) != std::string::npos);
        }
      }
      // Whatever failed, a resume finds checkpoint 1 or 2 whole; a failure that only hit
      // retention leaves a warning, not an error.
      manager m(cfg, tmp.path, comm, sync_options());
      auto resumed = m.resume(state);
      REQUIRE(resumed);
      CHECK(manager_test::mismatches(state, resumed->iteration) == 0);
      for (auto it : m.checkpoints().complete()) CHECK_FALSE(m.checkpoints().problem(it));
      for (auto it : m.exports().complete()) CHECK_FALSE(m.exports().problem(it));
    }
  }
}

TEST_CASE("callbacks run after each complete save with its path, iteration and kind") {
  temp_dir tmp;
  comm::single_process comm;
  auto out = tmp / "callbacks.txt";
  auto script =
      R"(["sh", "-c", "echo $CAIRN_CHECKPOINT_KIND $CAIRN_CHECKPOINT_ITERATION $CAIRN_CHECKPOINT_PATH $EXTRA >> )" +
      out.string() + "\"]";
  auto cfg = schedule(R"({"train_iters": 4, "checkpoint": {"interval": 2, "callback": {"script": )" + script +
                      R"(, "environment": {"EXTRA": "x"}}}, "export": {"interval": 4, "format": "state_dict",
                      "callback": {"script": )" +
                      script + "}}}");
  {
    manager m(cfg, tmp / "run", comm);
    auto state = manager_test::make(0, 1, 0);
    train(m, state, 1, 4);
  }
  auto text = read_text(out);
  auto run = (tmp / "run").string();
  CHECK(text.find("checkpoint 2 " + run + "/checkpoints/2 x\n") != std::string::npos);
  CHECK(text.find("checkpoint 4 " + run + "/checkpoints/4 x\n") != std::string::npos);
  CHECK(text.find("export 4 " + run + "/export/4\n") !=
        std::string::npos); // no EXTRA: the export has its own environment
}

TEST_CASE("a callback that cannot start or fails is a warning: the save stands") {
  temp_dir tmp;
  comm::single_process comm;
  captured log;
  auto cfg = schedule(R"({"train_iters": 2, "checkpoint": {"interval": 1, "callback": {"script": "false"}},
                          "export": {"interval": 2, "callback": {"script": "/nonexistent/upload"}}})");
  manager m(cfg, tmp.path, comm);
  auto state = manager_test::make(0, 1, 0);
  train(m, state, 1, 2);
  CHECK(m.checkpoints().complete() == list{1, 2});
  CHECK(m.exports().complete() == list{2});
  CHECK(log.has(severity::warning, "callback exited with status 1"));
  CHECK(log.has(severity::warning, "/nonexistent/upload"));
}

TEST_CASE("preflight refuses, before step one, what would fail later") {
  temp_dir tmp;
  comm::single_process comm;
  auto state = manager_test::make(0, 1, 0);

  SUBCASE("with check_storage, the filesystem's guarantees are checked too, and nothing is left behind") {
    manager_options options;
    options.check_storage = true;
    manager m(schedule(R"({"train_iters": 4, "checkpoint": {"interval": 2}})"), tmp / "run", comm, options);
    CHECK_NOTHROW(m.preflight(state));
    for (auto const& entry : std::filesystem::recursive_directory_iterator(tmp / "run"))
      CHECK_MESSAGE(entry.path().filename().string().find("check-storage") == std::string::npos, entry.path());
  }
  SUBCASE("a sound run passes and leaves nothing behind") {
    manager m(schedule(R"({"train_iters": 10, "checkpoint": {"interval": 1}})"), tmp / "run", comm);
    m.preflight(state);
    CHECK(std::filesystem::is_empty(tmp / "run" / "checkpoints"));
  }
  SUBCASE("more checkpoints kept than the disk holds") {
    // No `keep`: every one of a trillion checkpoints is kept.
    manager m(schedule(R"({"train_iters": 1000000000000, "checkpoint": {"interval": 1, "keep": null}})"), tmp / "run",
              comm);
    CHECK_KIND(m.preflight(state), cairn::training_errc::storage);
  }
  SUBCASE("an experiment directory that cannot be created") {
    std::ofstream(tmp / "file") << "x";
    manager m(schedule(R"({"train_iters": 10, "checkpoint": {"interval": 1}})"), tmp / "file" / "run", comm);
    auto path = (tmp / "file" / "run" / "checkpoints").string();
    CHECK_THROWS_WITH_AS(m.preflight(state), doctest::Contains(path.c_str()), error);
    CHECK_KIND(m.preflight(state), std::errc::not_a_directory);
  }
  SUBCASE("an external export without an exporter") {
    manager m(schedule(R"({"train_iters": 10, "export": {"interval": 5, "format": "external", "model_type": "x"}})"),
              tmp / "run", comm);
    CHECK_KIND(m.preflight(state), cairn::checkpoint_errc::needs_converter);
  }
  SUBCASE("a config that does not validate") {
    auto cfg = schedule(R"({"train_iters": 10})");
    cfg.checkpoint.keep = -1;
    manager m(cfg, tmp / "run", comm);
    CHECK_THROWS_WITH_AS(m.preflight(state), doctest::Contains("checkpoint.keep"), config_error);
    CHECK_KIND(m.preflight(state), cairn::config_errc::invalid);
  }
}

TEST_CASE("the lock is a file of its own: never a symbolic or hard link, whose target it would overwrite") {
  temp_dir tmp;
  comm::single_process comm;
  auto state = manager_test::make(0, 1, 0);
  std::ofstream(tmp / "precious") << "keep me";
  std::filesystem::create_directories(tmp / "run");
  SUBCASE("a hard link") {
    std::filesystem::create_hard_link(tmp / "precious", tmp / "run" / ".cairn.lock");
    manager m(schedule(R"({"train_iters": 2, "checkpoint": {"interval": 1}})"), tmp / "run", comm);
    CHECK_THROWS_WITH_AS(m.resume(state), doctest::Contains("has other names (hard links)"), error);
  }
  SUBCASE("a symbolic link") {
    std::filesystem::create_symlink(tmp / "precious", tmp / "run" / ".cairn.lock");
    manager m(schedule(R"({"train_iters": 2, "checkpoint": {"interval": 1}})"), tmp / "run", comm);
    CHECK_THROWS_WITH_AS(m.resume(state), doctest::Contains("is a symbolic link"), error);
  }
  CHECK(read_text(tmp / "precious") == "keep me");
}

TEST_CASE("one run at a time: a second manager on the directory fails before it resumes, saying who holds it") {
  temp_dir tmp;
  comm::single_process comm;
  auto cfg = schedule(R"({"train_iters": 4, "checkpoint": {"interval": 2}})");
  auto state = manager_test::make(0, 1, 0);
  {
    manager first(cfg, tmp.path, comm);
    first.resume(state);
    manager second(cfg, tmp.path, comm);
    auto other = manager_test::make(0, 1, 0);
    CHECK_THROWS_WITH_AS(second.resume(other), doctest::Contains("in use by another run (host "), error);
    CHECK_KIND(second.preflight(other), cairn::training_errc::in_use);
    CHECK_KIND(second.save(2, other), cairn::training_errc::in_use);
    train(first, state, 1, 4);
    first.finish();
  }
  // The lock dies with its holder: the next run resumes.
  manager next(cfg, tmp.path, comm);
  auto resumed = next.resume(state);
  REQUIRE(resumed);
  CHECK(resumed->iteration == 4);
}

TEST_CASE("a rank file copied from another save (same size) is refused: resume falls back, verify fails") {
  temp_dir tmp;
  comm::single_process comm;
  auto state = manager_test::make(0, 1, 0);
  auto cfg = finished_run(tmp.path, comm, state, 6);
  auto six = tmp / "checkpoints" / "6";
  REQUIRE(verify_checkpoint(six).ok());
  std::filesystem::copy_file(tmp / "checkpoints" / "4" / "rank_0.safetensors", six / "rank_0.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  auto report = verify_checkpoint(six);
  REQUIRE_FALSE(report.ok());
  CHECK(report.problems.front().find("rank_0.safetensors") != std::string::npos);

  captured log;
  manager m(cfg, tmp.path, comm);
  auto resumed_state = manager_test::make(0, 1, 0);
  auto resumed = m.resume(resumed_state);
  REQUIRE(resumed);
  CHECK(resumed->iteration == 4);
  CHECK(log.has(severity::warning, "its header differs from the one the marker recorded"));

  // Without the marker's help (a checkpoint loaded directly), the file's own identity refuses it.
  checkpoint_load_config load;
  load.path = six;
  load.optimizer_state = true;
  CHECK_THROWS_WITH_AS(load_checkpoint(resumed_state, comm, load), doctest::Contains("belongs to another save"),
                       checkpoint_error);
  CHECK_KIND(load_checkpoint(resumed_state, comm, load), cairn::checkpoint_errc::refused);
}

TEST_CASE("a newer generation of an iteration that does not load gives way to an older complete one of it") {
  // A store's layout (downloaded, or on the store itself): the save of 6 as a generation, and a
  // newer generation of 6 that is refused before loading, or fails to load.
  temp_dir tmp;
  comm::single_process comm;
  auto state = manager_test::make(0, 1, 0);
  auto cfg = finished_run(tmp.path, comm, state, 6);
  auto six = tmp / "checkpoints" / "6";
  auto good = six / cairn::save_generation{1000, "aaaaaaaa", 1}.name();
  std::filesystem::rename(six, tmp / "six");
  std::filesystem::create_directories(six);
  std::filesystem::rename(tmp / "six", good);
  auto newer = six / cairn::save_generation{2000, "bbbbbbbb", 1}.name();
  SUBCASE("refused before loading: a marker that does not parse") {
    std::filesystem::create_directories(newer);
    std::ofstream(newer / completion_marker) << "";
  }
  SUBCASE("failing to load: a byte of its data altered, its marker's sizes and headers the same") {
    std::filesystem::copy(good, newer);
    auto file = newer / "rank_0.safetensors";
    auto bytes = read_text(file);
    bytes.back() = static_cast<char>(bytes.back() ^ 1);
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  }
  CHECK(cairn::resolve_save(six) == newer);
  captured log;
  manager m(cfg, tmp.path, comm);
  auto resumed_state = manager_test::make(0, 1, 0);
  auto resumed = m.resume(resumed_state);
  REQUIRE(resumed);
  CHECK(resumed->iteration == 6);
  CHECK(manager_test::mismatches(resumed_state, 6) == 0);
  CHECK((log.has(severity::warning, newer.string() + ": skipped") ||
         log.has(severity::warning, newer.string() + ": skipped, it does not load")));
}

TEST_CASE("a stop signal ends the run after the current iteration, with a checkpoint there") {
  temp_dir tmp;
  comm::single_process comm;
  auto state = manager_test::make(0, 1, 0);
  SUBCASE("checkpoints enabled: saved at that iteration, off the schedule, and committed") {
    manager m(schedule(R"({"train_iters": 10, "checkpoint": {"interval": 4}})"), tmp.path, comm);
    train(m, state, 1, 2);
    CHECK_FALSE(m.preempted());
    std::raise(SIGUSR1); // as SLURM sends ahead of a preemption
    manager_test::fill(state, 3);
    CHECK(m.step(3, state));
    CHECK(m.preempted());
    CHECK(m.checkpoints().complete() == list{3});
    CHECK_FALSE(m.checkpoints().problem(3));
  }
  SUBCASE("checkpoints disabled: nothing saved (the seed's rule for a stop), the run still stops") {
    manager m(schedule(R"({"train_iters": 10})"), tmp.path, comm);
    train(m, state, 1, 2);
    std::raise(SIGTERM);
    CHECK(m.step(3, state));
    CHECK(m.preempted());
  }
  SUBCASE("a second signal after the window ends the process at once, as the signal would") {
    auto child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      stop_signals signals(default_stop_signals(), std::chrono::milliseconds(200));
      std::raise(SIGINT);
      if (signals.received() != SIGINT) ::_exit(1);
      ::usleep(300'000);
      std::raise(SIGTERM);
      ::_exit(0); // not reached
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGTERM);
  }
  SUBCASE("copies of one stop request (the process group's and the launcher's) stop the run once, gracefully") {
    auto child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      comm::single_process one;
      auto cfg = schedule(R"({"train_iters": 10, "checkpoint": {"interval": 4}})");
      manager_options options;
      options.async = false;
      manager m(cfg, tmp.path, one, options);
      train(m, state, 1, 2);
      std::raise(SIGTERM); // from the process group
      std::raise(SIGTERM); // from the launcher, a moment later
      std::raise(SIGINT);  // and a Ctrl-C in the same breath
      manager_test::fill(state, 3);
      bool stopped = m.step(3, state);
      ::_exit(stopped && m.preempted() && m.checkpoints().complete() == list{3} ? 75 : 1);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 75);
  }
  SUBCASE("copies of the request arriving after the manager is gone do not kill a process that is exiting") {
    auto child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      {
        stop_signals signals(default_stop_signals(), std::chrono::milliseconds(300));
        std::raise(SIGTERM);
        if (signals.received() != SIGTERM) ::_exit(1);
      }                    // a program that saved its checkpoint and is on its way out
      std::raise(SIGTERM); // the launcher's copy, a moment later
      ::usleep(400'000);   // after the window, the signal goes where it went before: the default
      std::raise(SIGINT);
      ::_exit(75); // not reached
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGINT); // survived the copy of SIGTERM; a later, new request ends it
  }
  SUBCASE("a signal ignored when the run starts stays ignored (nohup ignores SIGHUP)") {
    auto child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      ::signal(SIGHUP, SIG_IGN);
      stop_signals signals;
      std::raise(SIGHUP);
      ::_exit(signals.received() == 0 ? 0 : 1);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  SUBCASE("SIGHUP (a closed terminal or ssh session) is a stop request like SIGTERM") {
    manager m(schedule(R"({"train_iters": 10, "checkpoint": {"interval": 4}})"), tmp.path, comm);
    train(m, state, 1, 2);
    std::raise(SIGHUP);
    manager_test::fill(state, 3);
    CHECK(m.step(3, state));
    CHECK(m.preempted());
    CHECK(m.checkpoints().complete() == list{3});
  }
  SUBCASE("no stop signals: they are left as they were") {
    struct sigaction before {
    }, during{};
    ::sigaction(SIGTERM, nullptr, &before);
    manager_options options;
    options.stop_signals.clear();
    manager m(schedule(R"({"train_iters": 10})"), tmp.path, comm, options);
    ::sigaction(SIGTERM, nullptr, &during);
    CHECK(reinterpret_cast<std::uintptr_t>(during.sa_handler) == reinterpret_cast<std::uintptr_t>(before.sa_handler));
  }
}

TEST_CASE("a checkpoint in the directory of another iteration is not resumed from") {
  temp_dir tmp;
  comm::single_process comm;
  auto state = manager_test::make(0, 1, 0);
  auto cfg = finished_run(tmp.path, comm, state, 4);
  auto root = tmp / "checkpoints";
  std::filesystem::rename(root / "4", root / "7");
  captured log;
  {
    manager m(cfg, tmp.path, comm);
    auto resumed = m.resume(state);
    REQUIRE(resumed);
    CHECK(resumed->iteration == 2);
    CHECK(log.has(severity::warning, "the save of another iteration (4)"));
  }
  // The marker rewritten too: the checkpoint's own metadata still says 4.
  auto marker = read_json_file(root / "7" / completion_marker);
  marker.as_object()["iteration"] = 7;
  std::ofstream(root / "7" / completion_marker) << to_compact_json(marker);
  {
    manager m(cfg, tmp.path, comm);
    auto resumed = m.resume(state);
    REQUIRE(resumed);
    CHECK(resumed->iteration == 2);
    CHECK(log.has(severity::warning, "its metadata says iteration 4, its directory 7"));
  }

  // An iteration that is not an integer is named as written, not read as one.
  marker.as_object()["iteration"] = "placeholder"; // written by hand: a double 7.0 would print as 7
  auto text = to_compact_json(marker);
  text.replace(text.find("\"placeholder\""), 13, "7.0");
  std::ofstream(root / "7" / completion_marker) << text;
  manager again(cfg, tmp.path, comm);
  CHECK(again.resume(state)->iteration == 2);
  CHECK(log.has(severity::warning, "\"iteration\" is 7"));
  CHECK(log.has(severity::warning, "not an integer"));
}

TEST_CASE("a diverged metric (NaN, infinity) is stored as a string: the save stays readable") {
  temp_dir tmp;
  comm::single_process comm;
  manager m(schedule(R"({"train_iters": 2, "checkpoint": {"interval": 1}})"), tmp.path, comm);
  auto state = manager_test::make(0, 1, 0);
  captured log;
  m.step(1, state,
         boost::json::object{{"loss", std::numeric_limits<double>::quiet_NaN()},
                             {"grad_norm", -std::numeric_limits<double>::infinity()}});
  m.finish();
  CHECK(log.has(severity::warning, "metadata.loss: is NaN: stored as that string"));
  auto metadata = read_checkpoint_metadata(tmp / "checkpoints" / "1" / "metadata.json");
  CHECK(metadata.metadata.at("loss") == "NaN");
  CHECK(metadata.metadata.at("grad_norm") == "-Infinity");
  CHECK(verify_checkpoint(tmp / "checkpoints" / "1").ok());
}

TEST_CASE("GPU state: async saves copy it to pinned host memory, bitwise as a sync save, and resume onto the GPU") {
  if (!at::hasCUDA()) {
    MESSAGE("no CUDA here: this case runs on GPU machines (scripts/gpu.sh)");
    return;
  }
  temp_dir tmp;
  comm::single_process comm;
  auto cfg = schedule(R"({"train_iters": 2, "checkpoint": {"interval": 1}})");
  auto on_gpu = [](model_state state) {
    for (auto& p : state.parameters)
      for (auto& s : p.shards) s = s.to(c10::Device(c10::kCUDA));
    return state;
  };
  auto on_cpu = [](model_state state) {
    for (auto& p : state.parameters)
      for (auto& s : p.shards) s = s.to(c10::Device(c10::kCPU));
    return state;
  };
  auto state = on_gpu(manager_test::make(0, 1, 0));
  for (bool async : {false, true}) {
    manager_options options;
    options.async = async;
    manager m(cfg, tmp / (async ? "async" : "sync"), comm, options);
    for (std::int64_t it = 1; it <= 2; ++it) {
      state = on_gpu(manager_test::make(0, 1, it));
      m.step(it, state);
    }
  }
  CHECK(read_text(tmp / "sync" / "checkpoints" / "2" / "rank_0.safetensors") ==
        read_text(tmp / "async" / "checkpoints" / "2" / "rank_0.safetensors"));
  auto loaded = on_gpu(manager_test::make(0, 1, 0));
  manager m(cfg, tmp / "async", comm);
  REQUIRE(m.resume(loaded));
  CHECK(loaded.parameters[0].shards[0].is_cuda());
  CHECK(manager_test::mismatches(on_cpu(loaded), 2) == 0);
}

TEST_CASE("when every checkpoint is refused before loading, the run stops with each named, and none is deleted") {
  // A rank file one byte shorter than its marker says: each checkpoint is refused before it is
  // loaded. Starting fresh beside them would let retention delete them.
  temp_dir tmp;
  comm::single_process comm;
  auto cfg = schedule(R"({"train_iters": 6, "checkpoint": {"interval": 2, "keep": 2}})");
  {
    manager m(cfg, tmp.path, comm, sync_options());
    auto state = manager_test::make(0, 1, 0);
    train(m, state, 1, 6);
  }
  for (auto it : {4, 6}) {
    auto file = tmp / "checkpoints" / std::to_string(it) / "rank_0.safetensors";
    std::filesystem::resize_file(file, std::filesystem::file_size(file) - 1);
  }
  for (int attempt = 0; attempt < 2; ++attempt) { // and again: nothing changed in between
    manager m(cfg, tmp.path, comm, sync_options());
    auto state = manager_test::make(0, 1, 0);
    std::string text;
    try {
      (void)m.resume(state);
    } catch (error const& e) {
      text = e.what();
    }
    CHECK(text.find("no checkpoint in " + (tmp / "checkpoints").string() + " can be loaded, and none was deleted") !=
          std::string::npos);
    CHECK(text.find((tmp / "checkpoints" / "4").string() + ": ") != std::string::npos);
    CHECK(text.find((tmp / "checkpoints" / "6").string() + ": ") != std::string::npos);
    CHECK(text.find("bytes, the marker says") != std::string::npos);
    CHECK(m.checkpoints().complete() == list{4, 6});
  }
  SUBCASE("a save renamed by hand (not an iteration) is named too, never taken for none") {
    std::filesystem::rename(tmp / "checkpoints" / "6", tmp / "checkpoints" / "0006");
    manager m(cfg, tmp.path, comm, sync_options());
    auto state = manager_test::make(0, 1, 0);
    auto expected = (tmp / "checkpoints" / "0006").string() + ": a save under a name that is not an iteration";
    CHECK_THROWS_WITH_AS(m.resume(state), doctest::Contains(expected.c_str()), error);
    CHECK_KIND(m.resume(state), cairn::training_errc::no_checkpoint);
    CHECK(std::filesystem::exists(tmp / "checkpoints" / "0006" / completion_marker));
  }
  SUBCASE("one refused before loading and one failing to load: both named") {
    auto file = tmp / "checkpoints" / "4" / "rank_0.safetensors";
    std::filesystem::resize_file(file, std::filesystem::file_size(file) + 1); // the size it had
    auto bytes = read_text(file);
    bytes[bytes.size() - 2] = static_cast<char>(bytes[bytes.size() - 2] ^ 1); // a flipped bit: fails its checksum
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
    manager m(cfg, tmp.path, comm, sync_options());
    auto state = manager_test::make(0, 1, 0);
    CHECK_THROWS_WITH_AS(m.resume(state), doctest::Contains("is corrupt: its checksum does not match"), error);
    CHECK_KIND(m.resume(state), cairn::training_errc::no_checkpoint);
    CHECK(m.checkpoints().complete() == list{4, 6});
  }
}

namespace {
std::atomic<int> async_operations{0};
int async_fail_at = 0;
std::mutex failed_mutex;
std::string failed_path; // the path of the operation that failed
void fail_nth_async(char const* operation, std::filesystem::path const& path) {
  if (++async_operations == async_fail_at) {
    std::lock_guard lock(failed_mutex);
    failed_path = path.string();
    throw io::system_error(path, std::string(operation) + " failed", ENOSPC);
  }
}
} // namespace

TEST_CASE("async saves under failures of the export, the checkpoint and a callback at every step: a whole "
          "checkpoint is never lost, a partial one never reported") {
  comm::single_process comm;
  // At iteration 2 a checkpoint is written in the background while the export of the same
  // iteration is written in the foreground; the checkpoint's callback cannot even start.
  auto cfg = schedule(R"({"train_iters": 10, "checkpoint": {"interval": 2, "keep": null,
                            "callback": {"script": "/nonexistent/upload"}},
                          "export": {"interval": 2, "format": "state_dict"}})");
  int total = 0;
  {
    temp_dir tmp;
    manager m(cfg, tmp.path, comm);
    auto state = manager_test::make(0, 1, 0);
    train(m, state, 1, 1);
    async_operations = 0;
    async_fail_at = 0;
    io::scoped_fault_injection counting(fail_nth_async);
    train(m, state, 2, 2);
    m.finish();
    total = async_operations;
  }
  REQUIRE(total > 15);
  int export_failures = 0, checkpoint_failures = 0;
  for (async_fail_at = 1; async_fail_at <= total; ++async_fail_at) {
    CAPTURE(async_fail_at);
    temp_dir tmp;
    auto state = manager_test::make(0, 1, 0);
    captured log;
    failed_path.clear();
    bool threw = false;
    bool export_failed = false;
    {
      manager m(cfg, tmp.path, comm);
      train(m, state, 1, 1);
      async_operations = 0;
      {
        io::scoped_fault_injection failing(fail_nth_async);
        try {
          train(m, state, 2, 2);
          m.finish();
        } catch (error const& e) {
          threw = true;
          CHECK(std::string(e.what()).find(tmp.path.string()) != std::string::npos);
        }
      }
      // Committed when the error propagated, not later by the manager's destructor (which only
      // one process can rely on: across ranks it cannot commit).
      export_failed = !failed_path.empty() && failed_path.find((tmp / "export").string()) == 0;
      if (export_failed) CHECK(m.checkpoints().complete() == list{2});
    }
    if (failed_path.empty()) continue; // the run took another path this time (fewer operations)
    CHECK(threw);
    (export_failed ? export_failures : checkpoint_failures)++;
    save_directory checkpoints(tmp / "checkpoints"), exports(tmp / "export");
    // Only the checkpoint's own failure may cost it; whatever is complete is whole and right.
    if (export_failed) CHECK(checkpoints.complete() == list{2});
    for (auto it : checkpoints.complete()) {
      CHECK_FALSE(checkpoints.problem(it));
      auto loaded = manager_test::make(0, 1, 0);
      checkpoint_load_config load;
      load.path = checkpoints.path(it);
      load.optimizer_state = true;
      load_checkpoint(loaded, comm, load);
      CHECK(manager_test::mismatches(loaded, it) == 0);
    }
    for (auto it : exports.complete()) CHECK(verify_checkpoint(exports.path(it)).ok());
  }
  CHECK(export_failures > 3);
  CHECK(checkpoint_failures > 3);
}

TEST_CASE("a commit writes, fsyncs, renames, fsyncs the directory, and writes its marker last") {
  // A missing or misplaced fsync cannot be seen by killing a process (the page cache survives
  // it); the order of the operations can.
  static std::mutex mutex;
  static std::vector<std::pair<std::string, std::string>> operations;
  auto record = [](char const* operation, std::filesystem::path const& path) {
    std::lock_guard lock(mutex);
    operations.emplace_back(operation, path.string());
  };
  temp_dir tmp;
  comm::single_process comm;
  auto cfg = schedule(R"({"train_iters": 2, "checkpoint": {"interval": 1, "keep": null}})");
  manager m(cfg, tmp.path, comm);
  auto state = manager_test::make(0, 1, 0);
  train(m, state, 1, 1);
  m.finish();
  operations.clear();
  {
    io::scoped_fault_injection recording(record);
    train(m, state, 2, 2);
    m.finish();
  }
  auto root = (tmp / "checkpoints").string();
  auto staging = root + "/.partial-2", final_dir = root + "/2";
  auto marker = final_dir + "/" + completion_marker;
  auto index = [&](std::string const& op, std::string const& path, std::size_t from = 0) -> std::size_t {
    for (auto i = from; i < operations.size(); ++i)
      if (operations[i].first == op && operations[i].second == path) return i;
    FAIL_CHECK("no " << op << " of " << path);
    return operations.size();
  };
  auto rename_dir = index("rename", final_dir);
  // Every file of the save: written, fsynced, renamed into the staging directory, which is
  // fsynced; all before the staging directory is renamed into place.
  for (auto name : {"rank_0.safetensors", "metadata.json"}) {
    CAPTURE(name);
    auto file = staging + "/" + name;
    auto write = index("write", file), fsync = index("fsync", file), rename = index("rename", file);
    CHECK(write < fsync);
    CHECK(fsync < rename);
    CHECK(rename < rename_dir);
  }
  CHECK(index("fsync", staging) < rename_dir);
  // Then the directory holding it is fsynced, and only then is the marker written, fsynced,
  // renamed and its directory fsynced: nothing of the save happens after.
  auto fsync_root = index("fsync", root, rename_dir);
  auto marker_write = index("write", marker), marker_fsync = index("fsync", marker);
  auto marker_rename = index("rename", marker), marker_dir = index("fsync", final_dir, marker_rename);
  CHECK(rename_dir < fsync_root);
  CHECK(fsync_root < marker_write);
  CHECK(marker_write < marker_fsync);
  CHECK(marker_fsync < marker_rename);
  CHECK(marker_rename < marker_dir);
  for (auto i = marker_dir + 1; i < operations.size(); ++i)
    CHECK_MESSAGE(operations[i].second.find(final_dir) != 0, operations[i].first << " " << operations[i].second);
}

TEST_CASE("a checkpoint saving in the background when an export fails is committed before the error") {
  temp_dir tmp;
  comm::single_process comm;
  auto cfg = schedule(R"({"train_iters": 10, "checkpoint": {"interval": 2},
                          "export": {"interval": 2, "format": "external"}})");
  {
    manager m(cfg, tmp.path, comm); // async, the default
    m.set_exporter([](model_state const&, comm::single_process&, checkpoint_save_config const&) {
      throw error("the converter has no name for 'head'");
    });
    auto state = manager_test::make(0, 1, 0);
    train(m, state, 1, 1);
    manager_test::fill(state, 2);
    CHECK_THROWS_WITH_AS(m.step(2, state), "the converter has no name for 'head'", error);
    CHECK(m.checkpoints().complete() == list{2});
    CHECK_FALSE(m.checkpoints().problem(2));
    CHECK(m.exports().complete().empty());
  }
  // The next run resumes from it.
  manager next(cfg, tmp.path, comm);
  auto resumed_state = manager_test::make(0, 1, 0);
  auto resumed = next.resume(resumed_state);
  REQUIRE(resumed);
  CHECK(resumed->iteration == 2);
  CHECK(manager_test::mismatches(resumed_state, 2) == 0);
}

TEST_CASE("in one process, a save in flight when the program fails between steps is committed if whole") {
  temp_dir tmp;
  comm::single_process comm;
  auto cfg = schedule(R"({"train_iters": 10, "checkpoint": {"interval": 2}})");
  auto state = manager_test::make(0, 1, 0);
  try {
    manager m(cfg, tmp.path, comm);
    train(m, state, 1, 2); // checkpoint 2 starts in the background
    throw std::runtime_error("the loss is NaN");
  } catch (std::runtime_error const&) {
  }
  save_directory checkpoints(tmp / "checkpoints");
  CHECK(checkpoints.complete() == list{2});
  CHECK_FALSE(checkpoints.problem(2));
}

TEST_CASE("a hung callback is stopped at its timeout, and no more than max_running run at once") {
  temp_dir tmp;
  comm::single_process comm;
  captured log;
  auto marker = tmp / "started";
  auto cfg = schedule(R"({"train_iters": 3, "checkpoint": {"interval": 1, "callback": {"script": ["sh", "-c",
                          "echo x >> )" +
                      marker.string() + R"(; exec sleep 600"], "timeout": 0.5, "max_running": 2}}})");
  auto started = std::chrono::steady_clock::now();
  {
    manager m(cfg, tmp / "run", comm, sync_options());
    auto state = manager_test::make(0, 1, 0);
    train(m, state, 1, 3);
    m.finish();
  }
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  CHECK(seconds < 60); // not the 600 s the callbacks would sleep
  CHECK(read_text(marker) == "x\nx\nx\n");
  CHECK(log.has(severity::warning, "callback still running after its timeout of 0.5"));
  CHECK(log.has(severity::warning, "callbacks of earlier saves still run (max_running)"));
}

TEST_CASE("retention never deletes the newest finite checkpoint: a diverged run keeps a state to go back to") {
  temp_dir tmp;
  comm::single_process comm;
  captured log;
  manager m(schedule(R"({"train_iters": 6, "checkpoint": {"interval": 1, "keep": 1}})"), tmp.path, comm,
            sync_options());
  auto state = manager_test::make(0, 1, 0);
  for (std::int64_t it = 1; it <= 6; ++it) {
    manager_test::fill(state, it);
    if (it >= 3 && it <= 5)
      state.parameters[0].shards[0].narrow(0, 0, 1).fill_(std::numeric_limits<float>::quiet_NaN());
    if (it == 5) state.parameters[0].shards[0].narrow(0, 0, 1).fill_(std::numeric_limits<float>::infinity());
    m.step(it, state);
    if (it == 5) {
      m.finish(); // retention, on its own thread, has run
      // keep 1 would leave 5 alone: 2, the last finite one, stays as well.
      CHECK(m.checkpoints().complete() == list{2, 5});
      CHECK_FALSE(m.checkpoints().finite(5));
      CHECK(m.checkpoints().finite(2));
      CHECK(read_text(tmp / "checkpoints" / "5" / "complete.json").find("\"finite\": false") != std::string::npos);
      CHECK(log.has(severity::warning, "not finite"));
      CHECK(log.has(severity::warning, "retention keeps " + (tmp / "checkpoints" / "2").string()));
    }
  }
  // Finite again: retention as configured.
  m.finish();
  CHECK(m.checkpoints().complete() == list{6});
  CHECK(m.checkpoints().finite(6));
  CHECK(read_text(tmp / "checkpoints" / "6" / "complete.json").find("finite") == std::string::npos);
}
