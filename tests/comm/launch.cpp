// `cairn launch`: ranks and variables, prefixed output, failure of one rank stopping the rest,
// signal forwarding, and usage errors.
#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

struct result {
  int status;
  std::string output;
};

/// Runs `cairn ARGS` through the shell of the test (the tool itself never uses one).
result run(std::string const& args) {
  std::string command = std::string(CAIRN_TOOL) + " " + args + " 2>&1";
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

TEST_CASE("usage errors") {
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
}
