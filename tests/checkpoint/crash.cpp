// Crash tests of the checkpoint manager: training runs killed with SIGKILL at every file
// operation of their saves (and at random instants), or failed there as a full disk would,
// then resumed. Every time, the resume must take the newest complete checkpoint, every
// checkpoint that looks complete must load whole, and no checkpoint reported complete before
// the crash may be lost.
//
//     checkpoint_crash                    the doctest driver (starts the workers below)
//     checkpoint_crash worker DIR ITERS ASYNC
//         one rank of a run: resume, train to ITERS saving every iteration, exit 0. The
//         environment arms a fault: CAIRN_CRASH_AT=K kills the process at its K-th file
//         operation (CAIRN_CRASH_FAIL=1 fails that operation instead, with ENOSPC), on rank
//         CAIRN_CRASH_RANK (default 0). CAIRN_CRASH_COUNT=FILE writes the operation count.
#include <cairn/comm/gloo.hpp>
#include <cairn/comm/single_process.hpp>
#include <cairn/training/manager.hpp>

#include <ATen/Parallel.h>

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <random>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "checkpoint/manager_state.hpp"
#include "forked_ranks.hpp"
#include "io/temp_dir.hpp"

extern char** environ;

namespace {

// --- the worker ---------------------------------------------------------------------------------

std::atomic<long> operations{0};
long crash_at = 0;
bool crash_fails = false;

void crash_hook(char const* operation, std::filesystem::path const& path) {
  if (++operations != crash_at) return;
  if (crash_fails) throw cairn::io::system_error(path, std::string(operation) + " failed", ENOSPC);
  ::raise(SIGKILL);
}

void append_line(std::filesystem::path const& file, std::string const& line) {
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  auto text = line + "\n";
  (void)!::write(fd, text.data(), text.size());
  ::close(fd);
}

cairn::training_config worker_config(std::int64_t iterations) {
  return cairn::from_string<cairn::training_config>(R"({"train_iters": )" + std::to_string(iterations) +
                                                    R"(, "checkpoint": {"interval": 1, "keep": 2, "keep_every": 3},
          "export": {"interval": 3, "format": "state_dict", "keep": 1}})");
}

template <class Comm>
int run_worker(Comm& comm, std::filesystem::path const& dir, std::int64_t iterations, bool async) {
  std::filesystem::create_directories(dir); // for the logs; not a file operation of the saves
  auto state = manager_test::make(comm.rank(), comm.size(), 0);
  cairn::manager_options options;
  options.async = async;
  cairn::checkpoint_manager<Comm> manager(worker_config(iterations), dir, comm, options);
  auto log = dir / ("log-" + std::to_string(comm.rank()));
  auto resumed = manager.resume(state);
  std::int64_t start = resumed ? resumed->iteration : 0;
  if (manager_test::mismatches(state, start) != 0) {
    std::fprintf(stderr, "rank %d: the state resumed from %lld is not that iteration's\n", comm.rank(),
                 static_cast<long long>(start));
    return 3;
  }
  append_line(log, "resumed " + std::to_string(start));
  manager.preflight(state);
  std::int64_t reported = start;
  for (auto it = start + 1; it <= iterations; ++it) {
    manager_test::fill(state, it);
    manager.step(it, state);
    auto complete = manager.checkpoints().complete();
    if (!complete.empty() && complete.back() > reported) {
      reported = complete.back();
      append_line(log, "complete " + std::to_string(reported));
    }
  }
  manager.finish();
  return 0;
}

/// One rank's run, with its fault armed as the environment says (in `variables` first).
int worker(std::filesystem::path const& dir, std::int64_t iterations, bool async,
           std::vector<std::string> const& variables = {}) {
  auto env = [&](std::string const& name) {
    for (auto const& v : variables)
      if (v.starts_with(name + "=")) return v.substr(name.size() + 1);
    return std::getenv(name.c_str()) ? std::string(std::getenv(name.c_str())) : std::string();
  };
  int rank = env("RANK").empty() ? 0 : std::stoi(env("RANK"));
  operations = 0;
  crash_at = 0;
  if (!env("CAIRN_CRASH_AT").empty() &&
      rank == (env("CAIRN_CRASH_RANK").empty() ? 0 : std::stoi(env("CAIRN_CRASH_RANK")))) {
    crash_at = std::stol(env("CAIRN_CRASH_AT"));
    crash_fails = env("CAIRN_CRASH_FAIL") == "1";
  }
  cairn::io::fault_injection() = crash_hook;
  cairn::set_diagnostic_sink([](cairn::severity level, cairn::diagnostic const& d) {
    if (level != cairn::severity::info) std::fprintf(stderr, "cairn: %s\n", d.to_string().c_str());
  });
  try {
    int status = 0;
    if (env("WORLD_SIZE").empty()) {
      cairn::comm::single_process comm;
      status = run_worker(comm, dir, iterations, async);
    } else {
      auto comm = cairn::comm::gloo_from_environment(std::chrono::seconds(60));
      status = run_worker(comm, dir, iterations, async);
    }
    if (!env("CAIRN_CRASH_COUNT").empty())
      append_line(env("CAIRN_CRASH_COUNT") + "-" + std::to_string(rank), std::to_string(operations.load()));
    return status;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", rank, e.what());
    append_line(dir / ("error-" + std::to_string(rank)), e.what());
    return 1;
  }
}

// --- the driver ---------------------------------------------------------------------------------

std::filesystem::path self() { return std::filesystem::read_symlink("/proc/self/exe"); }

/// Starts `argv` with `variables` added to the environment, in its own process group.
pid_t start(std::vector<std::string> const& argv, std::vector<std::string> const& variables) {
  std::vector<std::string> env_strings(variables);
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  std::vector<char*> args, envp;
  for (auto const& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (auto const& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  pid_t pid = 0;
  int status = ::posix_spawn(&pid, args[0], nullptr, &attributes, args.data(), envp.data());
  posix_spawnattr_destroy(&attributes);
  REQUIRE(status == 0);
  return pid;
}

/// Its exit status, or 128 + the signal that ended it.
int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<std::string> command(int ranks, std::filesystem::path const& dir, std::int64_t iterations, bool async) {
  std::vector<std::string> worker{self().string(), "worker", dir.string(), std::to_string(iterations),
                                  async ? "1" : "0"};
  if (ranks == 1) return worker;
  std::vector<std::string> out{CAIRN_TOOL, "launch", "-n", std::to_string(ranks), "--"};
  out.insert(out.end(), worker.begin(), worker.end());
  return out;
}

/// A run on `ranks` ranks forked from this process (forked_ranks.hpp), one without a launcher's
/// variables (a single process): its status is the first failed rank's, or 0.
int run(int ranks, std::filesystem::path const& dir, std::int64_t iterations, bool async,
        std::vector<std::string> const& variables = {}) {
  return forked_ranks::run(
      ranks, [&](int) { return worker(dir, iterations, async, variables); }, ranks > 1);
}

/// The children of process `pid`.
std::vector<pid_t> children_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> out;
  for (pid_t child = 0; in >> child;) out.push_back(child);
  return out;
}

/// Whether process `pid` is gone (or a zombie: it holds nothing any more).
bool gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto state = text.find(") ");
  return text.empty() || (state != std::string::npos && (text[state + 2] == 'Z' || text[state + 2] == 'X'));
}

/// The last "complete N" the crashed run's rank 0 logged: a checkpoint it saw complete.
std::int64_t last_reported(std::filesystem::path const& dir) {
  std::ifstream in(dir / "log-0");
  std::string word;
  std::int64_t n = 0, last = 0;
  while (in >> word >> n)
    if (word == "complete") last = n;
  return last;
}

std::int64_t last_resumed(std::filesystem::path const& dir) {
  std::ifstream in(dir / "log-0");
  std::string word;
  std::int64_t n = 0, last = -1;
  while (in >> word >> n)
    if (word == "resumed") last = n;
  return last;
}

/// After a crash: every checkpoint that looks complete loads whole on one rank and holds its
/// iteration's values; none reported complete is lost. Returns the newest complete one.
std::int64_t check_after_crash(std::filesystem::path const& dir) {
  cairn::save_directory checkpoints(dir / "checkpoints");
  auto complete = checkpoints.complete();
  cairn::comm::single_process comm;
  for (auto it : complete) {
    CAPTURE(it);
    CHECK_FALSE(checkpoints.problem(it));
    auto state = manager_test::make(0, 1, 0);
    cairn::checkpoint_load_config load;
    load.path = checkpoints.path(it);
    load.optimizer_state = true;
    cairn::load_checkpoint(state, comm, load);
    CHECK(manager_test::mismatches(state, it) == 0);
  }
  auto newest = complete.empty() ? 0 : complete.back();
  CHECK(newest >= last_reported(dir));
  return newest;
}

/// Resumes the crashed run on `ranks` ranks to its end: it must start from the newest complete
/// checkpoint and finish with every checkpoint whole.
void resume_to_end(std::filesystem::path const& dir, int ranks, std::int64_t iterations, std::int64_t newest) {
  CHECK(run(ranks, dir, iterations, false) == 0);
  CHECK(last_resumed(dir) == newest);
  cairn::save_directory checkpoints(dir / "checkpoints");
  auto complete = checkpoints.complete();
  REQUIRE(!complete.empty());
  CHECK(complete.back() == iterations);
  check_after_crash(dir);
  CHECK_FALSE(std::filesystem::exists(checkpoints.staging(iterations)));
}

/// The file operations of `rank` in a whole run.
long count_operations(int ranks, std::int64_t iterations, bool async, std::string const& rank = "0") {
  temp_dir tmp;
  auto count = tmp / "count";
  REQUIRE(run(ranks, tmp / "run", iterations, async, {"CAIRN_CRASH_COUNT=" + count.string()}) == 0);
  std::ifstream in(count.string() + "-" + rank);
  long n = 0;
  in >> n;
  return n;
}

/// Kill points: every operation when there are few, else an even spread including the last.
std::vector<long> points(long total, long most) {
  std::vector<long> out;
  long stride = std::max(1L, (total + most - 1) / most);
  for (long k = 1; k <= total; k += stride) out.push_back(k);
  if (out.back() != total) out.push_back(total);
  return out;
}

bool quick() { return std::getenv("CAIRN_CRASH_QUICK") != nullptr; }

/// Kills at up to `most` operations (up to `quick_most` under CAIRN_CRASH_QUICK: a spread).
void kill_at_each_operation(int ranks, bool async, long most, long quick_most, char const* rank_to_kill = "0") {
  std::int64_t const iterations = 5;
  auto total = count_operations(ranks, iterations, async, rank_to_kill);
  MESSAGE(ranks << " rank(s), " << std::string(async ? "async" : "sync") << ": " << total << " file operations on rank "
                << std::string(rank_to_kill));
  REQUIRE(total > 40);
  for (auto k : points(total, quick() ? quick_most : most)) {
    CAPTURE(k);
    temp_dir tmp;
    auto dir = tmp / "run";
    int status = run(ranks, dir, iterations, async,
                     {"CAIRN_CRASH_AT=" + std::to_string(k), std::string("CAIRN_CRASH_RANK=") + rank_to_kill});
    CHECK(status != 0);
    auto newest = check_after_crash(dir);
    resume_to_end(dir, ranks, iterations, newest);
  }
}

} // namespace

TEST_CASE("a run killed at every file operation of its saves resumes from the newest complete checkpoint") {
  kill_at_each_operation(1, false, 1000, 30);
}

TEST_CASE("the same with async saves (kills on the background writer too)") {
  kill_at_each_operation(1, true, 1000, 30);
}

TEST_CASE("two Gloo ranks, one killed at file operations of its saves") {
  kill_at_each_operation(2, false, 24, 4, "0");
  kill_at_each_operation(2, true, 24, 4, "1");
}

TEST_CASE("a full disk at any file operation is an error naming the path, and loses nothing") {
  std::int64_t const iterations = 5;
  auto total = count_operations(1, iterations, false);
  for (auto k : points(total, quick() ? 10 : 80)) {
    CAPTURE(k);
    temp_dir tmp;
    auto dir = tmp / "run";
    int status = run(1, dir, iterations, false, {"CAIRN_CRASH_AT=" + std::to_string(k), "CAIRN_CRASH_FAIL=1"});
    if (status == 0) continue; // only retention failed: warnings
    CHECK(status == 1);
    std::ifstream in(dir / "error-0");
    std::string message((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(message.find(dir.string()) != std::string::npos);
    CHECK(message.find("No space left on device") != std::string::npos);
    auto newest = check_after_crash(dir);
    resume_to_end(dir, 1, iterations, newest);
  }
}

TEST_CASE("runs of two ranks killed at random instants resume from the newest complete checkpoint") {
  std::int64_t const iterations = 40;
  std::mt19937 random(20261202);
  for (int round = 0; round < (quick() ? 2 : 4); ++round) {
    temp_dir tmp;
    auto dir = tmp / "run";
    auto delay = std::uniform_int_distribution<int>(300, 2500)(random);
    CAPTURE(delay);
    bool async = round % 2 == 1;
    auto pid = start(command(2, dir, iterations, async), {});
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    // The launcher and both ranks at once, as a node failing would (each rank leads a process
    // group of its own; a rank also dies with its launcher).
    auto ranks = children_of(pid);
    ::kill(-pid, SIGKILL);
    for (auto rank : ranks) ::kill(-rank, SIGKILL);
    wait_for(pid);
    // Until a killed rank 0 is gone it may still hold the directory's lock, and the resume
    // would rightly refuse.
    for (auto rank : ranks)
      for (int i = 0; i < 10000 && !gone(rank); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    auto newest = check_after_crash(dir);
    resume_to_end(dir, 2, iterations, newest);
  }
}

int main(int argc, char** argv) {
  // Workers are forked from this process: no thread pools to inherit.
  at::set_num_threads(1);
  if (argc == 5 && std::string(argv[1]) == "worker")
    return worker(argv[2], std::stoll(argv[3]), std::string(argv[4]) == "1");
  doctest::Context context(argc, argv);
  return context.run();
}
