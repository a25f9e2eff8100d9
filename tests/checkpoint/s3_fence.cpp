// A run that lost its lease on an s3:// experiment while frozen (SIGSTOP, a long pause, a VM
// migration) inside a save, then thawed, changes nothing another run wrote. The run is frozen at
// each step of its save and commit: its next request held by the test's proxy (tests/io/
// s3_proxy.py) and the process stopped; its lease is aged past expiry and taken over by a second
// run, which saves on with a history of its own and ends; then the first is let go. Every object
// the second run left is still there, byte for byte; its saves load with its values; the first
// run stops at its next commit. And retention, held by the store, never holds up training's saves.
// Run through tests/io/s3_server.sh.
#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/verify.hpp>
#include <cairn/comm/single_process.hpp>
#include <cairn/config/json.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/training/manager.hpp>

#include <ATen/Parallel.h>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "checkpoint/manager_state.hpp"
#include "io/s3_proxy.hpp"

namespace {

using s3_test::env;
using s3_test::proxy;

/// Requests the proxy holds now.
std::int64_t held() { return s3_test::proxy_stats().at("held").as_int64(); }

/// Every object under `prefix` (a key), with a digest of its bytes.
void snapshot(cairn::io::storage_backend& store, std::string const& prefix, std::map<std::string, std::size_t>& out) {
  for (auto const& entry : store.list(prefix)) {
    auto key = prefix + "/" + entry.name;
    if (entry.directory)
      snapshot(store, key, out);
    else
      out[key] = std::hash<std::string>{}(store.read_all(key, std::uint64_t{1} << 26));
  }
}

/// A run on `dir` (one process): resumes, then trains to `last` with the values of iteration
/// i + `history`, saving every iteration and keeping `keep`. Writes what happened to `log`:
/// "resumed N", its diagnostics, then "error: …" if it ends on one.
int train(std::string const& dir, std::int64_t last, std::int64_t history, int keep, std::string const& log) {
  std::ofstream out(log, std::ios::app);
  cairn::set_diagnostic_sink([&](cairn::severity, cairn::diagnostic const& d) { out << d.to_string() << std::endl; });
  try {
    cairn::comm::single_process comm;
    auto config = cairn::from_string<cairn::training_config>(R"({"train_iters": )" + std::to_string(last) +
                                                             R"(, "checkpoint": {"interval": 1, "keep": )" +
                                                             std::to_string(keep) + "}}");
    cairn::checkpoint_manager manager(config, dir, comm);
    auto state = manager_test::make(0, 1, 0);
    auto resumed = manager.resume(state);
    auto start = resumed ? resumed->iteration : 0;
    out << "resumed " << start << std::endl;
    for (auto it = start + 1; it <= last; ++it) {
      manager_test::fill(state, it + history);
      manager.step(it, state);
    }
    manager.finish();
    return 0;
  } catch (std::exception const& e) {
    out << "error: " << e.what() << std::endl;
    return 1;
  }
}

/// The state of the newest checkpoint in `dir`, and its iteration.
std::pair<std::int64_t, cairn::model_state> newest(std::string const& dir) {
  cairn::comm::single_process comm;
  cairn::checkpoint_manager manager(cairn::training_config{}, dir, comm);
  auto state = manager_test::make(0, 1, 0);
  auto resumed = manager.resume(state);
  REQUIRE(resumed);
  return {resumed->iteration, std::move(state)};
}

std::string read_text(std::string const& file) {
  std::ifstream in(file);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

} // namespace

TEST_CASE("a run frozen inside a save whose lease was taken over changes nothing the new holder wrote") {
  // Where the first run is frozen: its request held by the proxy, then the process stopped. The
  // first run trains to 8 keeping 2 saves; checkpoint 5 is the one being saved. The second keeps
  // 10: its saves of 5 and on are all there when the first thaws.
  struct step {
    char const* what;
    char const* operation;
    char const* key;  // a regular expression over the request's path and query
    bool committed;   // whether 5 was committed before the freeze (the second run resumes from 5 or later)
    char const* stop; // why the first run stops once thawed, when it has something left to commit
  };
  std::vector<step> const steps{
      {"uploading its rank file", "PUT", "/checkpoints/5/gen-[^/]*/rank_0\\.safetensors", false, "lock was taken over"},
      // Past its lease check: what it staged was removed meanwhile (by the new holder's clean).
      {"listing its save for the marker, past its lease check", "LIST", "prefix=[^&]*/checkpoints/5/gen-", false,
       "holds no file to commit"},
      // Its marker lands in its own generation; its next save is refused.
      {"writing its marker", "PUT", "/checkpoints/5/gen-[^/]*/complete\\.json", false, "lock was taken over"},
      // Retention runs beside training: the first run may have saved on to 8 meanwhile.
      {"removing a save by retention, from a listing made before the takeover", "DELETE",
       "/checkpoints/3/gen-[^/]*/complete\\.json", true, nullptr},
  };
  auto store = cairn::io::open_location("s3://" + env("CAIRN_TEST_S3_BUCKET"));
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  for (std::size_t k = 0; k < steps.size(); ++k) {
    auto const& s = steps[k];
    CAPTURE(s.what);
    auto prefix = "fence-" + std::to_string(::getpid()) + "-" + std::to_string(k);
    auto dir = "s3://" + env("CAIRN_TEST_S3_BUCKET") + "/" + prefix;
    auto logs = std::filesystem::temp_directory_path() / prefix;
    auto first_log = logs.string() + "-first", second_log = logs.string() + "-second";
    proxy("faults", std::string(R"({"hold_match": ")") + s.operation + R"(", "hold_key": )" +
                        boost::json::serialize(boost::json::value(s.key)) + "}");
    std::fflush(nullptr);
    pid_t first = ::fork();
    REQUIRE(first >= 0);
    if (first == 0) ::_exit(train(dir, 8, 0, 2, first_log));
    // Frozen where its request waits.
    for (int waited = 0; held() == 0; ++waited) {
      REQUIRE_MESSAGE(waited < 600, "the first run never reached the step: " << read_text(first_log));
      REQUIRE_MESSAGE(::waitpid(first, nullptr, WNOHANG) == 0, "the first run ended: " << read_text(first_log));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(first, SIGSTOP);
    // Its lease, as another host sees it after the first run stopped renewing it for 2 minutes.
    auto lease = prefix + "/.cairn.lock";
    auto record = store.backend->read_all(lease, 4096);
    auto refreshed = record.find("refreshed unix time ");
    REQUIRE(refreshed != std::string::npos);
    auto end = record.find(',', refreshed);
    record.replace(refreshed, end - refreshed,
                   "refreshed unix time " + std::to_string(static_cast<long>(std::time(nullptr)) - 120));
    store.backend->write(lease, std::as_bytes(std::span(record)));
    std::map<std::string, std::size_t> first_wrote;
    snapshot(*store.backend, prefix + "/checkpoints", first_wrote);

    // The second run takes the lease over, resumes, saves 5 to 10 with its own history, ends.
    pid_t second = ::fork();
    REQUIRE(second >= 0);
    if (second == 0) ::_exit(train(dir, 10, 1000, 10, second_log));
    int status = 0;
    ::waitpid(second, &status, 0);
    INFO("second run: " << read_text(second_log));
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    auto resumed = read_text(second_log);
    auto from = std::stoll(resumed.substr(resumed.find("resumed ") + 8));
    if (s.committed)
      CHECK(from >= 5);
    else
      CHECK(from == 4);
    // What the second run wrote: every object new or changed since the takeover.
    std::map<std::string, std::size_t> before, second_wrote;
    snapshot(*store.backend, prefix + "/checkpoints", before);
    for (auto const& [key, digest] : before)
      if (auto earlier = first_wrote.find(key); earlier == first_wrote.end() || earlier->second != digest)
        second_wrote[key] = digest;
    REQUIRE(second_wrote.size() >= std::size_t(3 * (10 - from))); // its saves: three files each

    // The first run thaws and goes on: it stops at its next commit, its lease gone.
    ::kill(first, SIGCONT);
    proxy("release");
    ::waitpid(first, &status, 0);
    INFO("first run: " << read_text(first_log));
    CHECK(WIFEXITED(status));
    if (s.stop) {
      CHECK(WEXITSTATUS(status) == 1);
      CHECK(read_text(first_log).find(s.stop) != std::string::npos);
    }
    proxy("faults");

    // Nothing the second run wrote was changed or removed.
    std::map<std::string, std::size_t> after;
    snapshot(*store.backend, prefix + "/checkpoints", after);
    for (auto const& [key, digest] : second_wrote) {
      CAPTURE(key);
      REQUIRE(after.count(key) == 1);
      CHECK(after.at(key) == digest);
    }
    // Its saves verify and hold its values; the newest is what a resume loads.
    cairn::save_directory saves(dir + "/checkpoints");
    for (auto it = from + 1; it <= 10; ++it) {
      CAPTURE(it);
      auto report = cairn::verify_checkpoint(saves.path(it));
      CHECK_MESSAGE(report.ok(), (report.problems.empty() ? "" : report.problems.front()));
    }
    auto [iteration, state] = newest(dir);
    CHECK(iteration == 10);
    CHECK(manager_test::mismatches(state, 1010) == 0);
  }
}

TEST_CASE("retention runs beside training: saves go on while it waits on the store") {
  // Retention's delete of checkpoint 1 held by the proxy (the store slow to answer it): the run
  // saves and commits 3 to 8 meanwhile, and only its end (finish) waits for retention.
  auto prefix = "retention-" + std::to_string(::getpid());
  auto dir = "s3://" + env("CAIRN_TEST_S3_BUCKET") + "/" + prefix;
  auto log = (std::filesystem::temp_directory_path() / prefix).string();
  proxy("faults", R"({"hold_match": "DELETE", "hold_key": "/checkpoints/1/gen-[^/]*/complete\\.json"})");
  std::fflush(nullptr);
  pid_t run = ::fork();
  REQUIRE(run >= 0);
  if (run == 0) ::_exit(train(dir, 8, 0, 2, log));
  for (int waited = 0; read_text(log).find("/checkpoints/8: saved checkpoint") == std::string::npos; ++waited) {
    REQUIRE_MESSAGE(waited < 1200, "the run did not save on while retention waited: " << read_text(log));
    REQUIRE_MESSAGE(::waitpid(run, nullptr, WNOHANG) == 0, "the run ended: " << read_text(log));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(held() == 1); // retention still waiting on its first delete
  proxy("release");
  int status = 0;
  ::waitpid(run, &status, 0);
  INFO(read_text(log));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  proxy("faults");
  cairn::save_directory saves(dir + "/checkpoints");
  CHECK(saves.complete() == std::vector<std::int64_t>{7, 8}); // retention caught up at the end
}

int main(int argc, char** argv) {
  // The runs are forked from this process: no thread pools to inherit.
  at::set_num_threads(1);
  doctest::Context context(argc, argv);
  return context.run();
}
