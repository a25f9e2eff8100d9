// `cairn launch`: ranks and variables, prefixed output, failure of one rank stopping the rest,
// signal forwarding, and usage errors.
#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace {

struct result {
  int status;
  std::string output;
};

/// Runs `cairn ARGS` through the shell of the test (the tool itself never uses one), after
/// `setup` (shell commands: limits, open files) in `shell`.
result run(std::string const& args, std::string const& setup = "", std::string const& shell = "sh") {
  std::string command = setup + "exec " + std::string(CAIRN_TOOL) + " " + args + " 2>&1";
  if (shell != "sh") {
    std::string quoted;
    for (char c : command) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    command = shell + " -c '" + quoted + "'";
  }
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe);
  std::string output;
  std::array<char, 4096> buffer{};
  while (auto n = std::fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), n);
  int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), output};
}

} // namespace

TEST_CASE("each rank gets the torchrun variables and its output is prefixed") {
  auto r = run("launch -n 3 -- sh -c 'echo $RANK/$WORLD_SIZE/$LOCAL_RANK/$MASTER_ADDR; echo oops >&2'");
  CHECK(r.status == 0);
  for (int rank = 0; rank < 3; ++rank) {
    CHECK(r.output.find("[rank " + std::to_string(rank) + "] " + std::to_string(rank) + "/3/" + std::to_string(rank) +
                        "/127.0.0.1\n") != std::string::npos);
    CHECK(r.output.find("[rank " + std::to_string(rank) + "] oops\n") != std::string::npos);
  }
}

TEST_CASE("a failing rank stops the others, and its status is the launcher's") {
  auto start = std::chrono::steady_clock::now();
  auto r = run("launch -n 3 -- sh -c 'if [ $RANK = 1 ]; then exit 3; fi; exec sleep 120'");
  auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(r.status == 3);
  CHECK(r.output.find("cairn launch: rank 1 exited with status 3; stopping the others") != std::string::npos);
  CHECK(elapsed < std::chrono::seconds(30));
}

TEST_CASE("a rank that stops with status 75 (a stop all ranks agreed on) leaves the others to finish theirs") {
  // A second SIGTERM would abort a trainer that is finishing its checkpoint: none is sent.
  auto r = run("launch -n 2 -- sh -c 'trap \"echo signalled\" TERM; if [ $RANK = 1 ]; then exit 75; fi; "
               "sleep 2; echo finished; exit 75'");
  CHECK(r.status == 75);
  CHECK(r.output.find("[rank 0] finished") != std::string::npos);
  CHECK(r.output.find("signalled") == std::string::npos);
  CHECK(r.output.find("stopping the others") == std::string::npos);
}

TEST_CASE("signals reach every rank") {
  int out[2];
  REQUIRE(::pipe(out) == 0);
  pid_t launcher = ::fork();
  REQUIRE(launcher >= 0);
  if (launcher == 0) {
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::close(out[0]);
    ::close(out[1]);
    ::execl(CAIRN_TOOL, CAIRN_TOOL, "launch", "-n", "2", "--", "sh", "-c",
            "trap 'echo got TERM; exit 0' TERM; echo ready; sleep 60 & wait", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  FILE* pipe = ::fdopen(out[0], "r");
  std::string output;
  std::array<char, 4096> line{};
  int ready = 0;
  while (ready < 2 && std::fgets(line.data(), line.size(), pipe)) {
    output += line.data();
    if (std::string(line.data()).find("ready") != std::string::npos) ++ready;
  }
  ::kill(launcher, SIGTERM);
  while (std::fgets(line.data(), line.size(), pipe)) output += line.data();
  std::fclose(pipe);
  int status = 0;
  ::waitpid(launcher, &status, 0);
  CHECK(output.find("[rank 0] got TERM") != std::string::npos);
  CHECK(output.find("[rank 1] got TERM") != std::string::npos);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0); // every rank handled the signal and exited cleanly
}

namespace {

/// Whether some running process has exactly `argv` as its command line (zombies have none).
bool running(std::vector<std::string> const& argv) {
  std::string wanted;
  for (auto const& a : argv) wanted += a + '\0';
  for (auto const& entry : std::filesystem::directory_iterator("/proc")) {
    // A process may end between the listing and the read: its cmdline then fails with ESRCH,
    // which reads as "not running" here (std::ifstream would throw from underflow).
    int fd = ::open((entry.path() / "cmdline").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    std::string text;
    std::array<char, 4096> chunk{};
    ssize_t got = 0;
    while ((got = ::read(fd, chunk.data(), chunk.size())) > 0) text.append(chunk.data(), static_cast<std::size_t>(got));
    ::close(fd);
    if (got == 0 && text == wanted) return true;
  }
  return false;
}

/// Waits up to 5 s for no process to run `argv`.
bool none_left(std::vector<std::string> const& argv) {
  for (int i = 0; i < 250 && running(argv); ++i) ::usleep(20'000);
  return !running(argv);
}

/// Starts `cairn launch ARGS` in a process group of its own, as a shell starts a job; its pid
/// and the read end of its output.
std::pair<pid_t, FILE*> start_job(std::vector<std::string> args) {
  int out[2];
  REQUIRE(::pipe(out) == 0);
  pid_t launcher = ::fork();
  REQUIRE(launcher >= 0);
  if (launcher == 0) {
    ::setpgid(0, 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::close(out[0]);
    ::close(out[1]);
    args.insert(args.begin(), {CAIRN_TOOL, "launch"});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(CAIRN_TOOL, argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  return {launcher, ::fdopen(out[0], "r")};
}

/// Reads `job` until `count` lines contain `text`.
std::string read_until(FILE* job, std::string const& text, int count) {
  std::string output;
  std::array<char, 4096> line{};
  int seen = 0;
  while (seen < count && std::fgets(line.data(), line.size(), job)) {
    output += line.data();
    if (std::string(line.data()).find(text) != std::string::npos) ++seen;
  }
  return output;
}

std::size_t occurrences(std::string const& text, std::string const& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

} // namespace

TEST_CASE("a stop request to the job's whole process group reaches each rank once, through the launcher") {
  // Ctrl-C signals the terminal's foreground process group: the launcher and, were they in it,
  // the ranks, which would then get it twice (directly, then forwarded) and abort on the second.
  auto [launcher, job] =
      start_job({"-n", "2", "--", "sh", "-c",
                 "trap 'echo got INT' INT; echo ready; for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.2; done"});
  auto output = read_until(job, "ready", 2);
  ::kill(-launcher, SIGINT);
  ::usleep(300'000);
  ::kill(-launcher, SIGINT); // a second Ctrl-C within the window is the same request
  std::array<char, 4096> line{};
  while (std::fgets(line.data(), line.size(), job)) output += line.data();
  std::fclose(job);
  int status = 0;
  ::waitpid(launcher, &status, 0);
  CHECK(occurrences(output, "[rank 0] got INT") == 1);
  CHECK(occurrences(output, "[rank 1] got INT") == 1);
  CHECK(WIFEXITED(status));
}

TEST_CASE("SIGUSR1 and SIGHUP to the launcher are forwarded to the ranks, and the launcher lives on") {
  for (int signal : {SIGUSR1, SIGHUP}) {
    CAPTURE(signal);
    auto [launcher, job] =
        start_job({"-n", "2", "--", "sh", "-c", "trap 'echo got it; exit 75' USR1 HUP; echo ready; sleep 30 & wait"});
    auto output = read_until(job, "ready", 2);
    ::kill(launcher, signal);
    std::array<char, 4096> line{};
    while (std::fgets(line.data(), line.size(), job)) output += line.data();
    std::fclose(job);
    int status = 0;
    ::waitpid(launcher, &status, 0);
    CHECK(output.find("[rank 0] got it") != std::string::npos);
    CHECK(output.find("[rank 1] got it") != std::string::npos);
    REQUIRE(WIFEXITED(status)); // not killed by the signal
    CHECK(WEXITSTATUS(status) == 75);
  }
}

TEST_CASE("a failing job leaves nothing running: the ranks' own children are stopped with them") {
  auto r = run("launch -n 2 -- sh -c 'if [ $RANK = 1 ]; then sleep 0.5; exit 3; fi; sleep 3718 & wait'");
  CHECK(r.status == 3);
  CHECK(none_left({"sleep", "3718"}));
}

TEST_CASE("a launcher killed outright takes its ranks with it: none is left running unsupervised") {
  auto [launcher, job] = start_job({"-n", "2", "--", "sh", "-c", "echo ready; exec sleep 3722"});
  read_until(job, "ready", 2);
  ::kill(launcher, SIGKILL);
  int status = 0;
  ::waitpid(launcher, &status, 0);
  std::fclose(job);
  CHECK(none_left({"sleep", "3722"}));
}

TEST_CASE("too many ranks for the open-file limit: refused before any starts") {
  auto dir = std::filesystem::temp_directory_path() / ("cairn_launch_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto started = dir / "started";
  auto r = run("launch -n 1000 -- sh -c 'echo x >> " + started.string() + "; exec sleep 3719'", "ulimit -n 64; ");
  CHECK(r.status == 1);
  CHECK(r.output.find("-n 1000 needs about 2032 open files in the launcher") != std::string::npos);
  CHECK(r.output.find("the limit is 64") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(started));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a rank that cannot start stops every rank started before it, and their children") {
  // Enough open files for the check, but the launcher inherits 40 more: its pipes run out
  // partway through the ranks.
  auto r = run("launch -n 12 -- sh -c 'sleep 3720 & exec sleep 3721'",
               "ulimit -n 56; for i in $(seq 10 49); do eval \"exec $i</dev/null\"; done; ", "bash");
  CHECK(r.status == 1);
  CHECK(r.output.find("Too many open files") != std::string::npos);
  CHECK(r.output.find("the ranks started before it were stopped") != std::string::npos);
  CHECK(none_left({"sleep", "3720"}));
  CHECK(none_left({"sleep", "3721"}));
}

TEST_CASE("a line without an end is printed in pieces, not held without bound") {
  auto r = run(R"(launch -n 1 -- sh -c 'head -c 300000 /dev/zero | tr "\000" x')");
  CHECK(r.status == 0);
  CHECK(occurrences(r.output, "[rank 0] ") == 5); // 4 pieces of 64 KiB, then the rest at the end
  CHECK(occurrences(r.output, "x") == 300000);
}

TEST_CASE("a job of two nodes: each launcher starts its node's ranks with the job's rank and rendezvous") {
  auto vars = "-- sh -c 'echo $RANK/$WORLD_SIZE/$LOCAL_RANK/$LOCAL_WORLD_SIZE/$GROUP_RANK/$MASTER_ADDR:$MASTER_PORT'";
  auto second =
      run(std::string("launch -n 2 --nnodes 2 --node-rank 1 --master-addr 10.0.0.9 --master-port 29511 ") + vars);
  CHECK(second.status == 0);
  CHECK(second.output.find("[rank 2] 2/4/0/2/1/10.0.0.9:29511\n") != std::string::npos); // prefixed with the job's rank
  CHECK(second.output.find("[rank 3] 3/4/1/2/1/10.0.0.9:29511\n") != std::string::npos);
  auto one = run(std::string("launch -n 3 ") + vars); // one node: GROUP_RANK 0, every rank local
  CHECK(one.output.find("[rank 2] 2/3/2/3/0/127.0.0.1:") != std::string::npos);

  // Nodes that cannot meet are refused before any rank starts.
  auto no_port = run("launch -n 1 --nnodes 2 --node-rank 0 --master-addr 10.0.0.9 -- true");
  CHECK(no_port.status == 1);
  CHECK(no_port.output.find("needs --master-port") != std::string::npos);
  auto no_node = run("launch -n 1 --nnodes 2 --node-rank 2 --master-port 29511 -- true");
  CHECK(no_node.status == 1);
  CHECK(no_node.output.find("--node-rank 2 is not a node of 2") != std::string::npos);
  CHECK(run("launch -n 1 --nnodes 0 -- true").status == 2);
  CHECK(run("launch -n 1 --node-rank -1 -- true").status == 2);
  CHECK(run("launch -n 1 --master-addr").status == 2);
}

TEST_CASE("usage errors") {
  CHECK(run("launch --port 70000 -n 1 -- true").status == 2);
  CHECK(run("launch --port 65535x -n 1 -- true").status == 2);
  CHECK(run("launch -- true").status == 2);
  CHECK(run("launch -n 0 -- true").status == 2);
  CHECK(run("launch -n 2").status == 2);
  CHECK(run("launch -n 2 --frob 1 -- true").status == 2);
  auto unknown = run("frobnicate");
  CHECK(unknown.status == 2);
  CHECK(unknown.output.find("unknown command 'frobnicate'") != std::string::npos);
  auto missing = run("launch -n 1 -- /nonexistent/program");
  CHECK(missing.status == 1);
  CHECK(missing.output.find("cannot start '/nonexistent/program'") != std::string::npos);
  // --help of a command is that command's usage, status 0.
  for (std::string command : {"launch", "verify", "inspect", "plan"}) {
    CAPTURE(command);
    auto help = run(command + " --help");
    CHECK(help.status == 0);
    CHECK(help.output.find("usage: cairn " + command + " ") == 0);
    CHECK(help.output.find("commands:") == std::string::npos); // that command's part alone
  }
}
