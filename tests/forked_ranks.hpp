#pragma once
// Multi-process tests without a process start per rank: the ranks are children forked from the
// test (libtorch is loaded and initialised already; a new process pays ~0.6 s for that, several
// seconds under the sanitizers), each with the variables `cairn launch` gives its ranks.
#include <cairn/comm/launch.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

namespace forked_ranks {

/// Runs `body(rank)` on `ranks` children forked from this process, its result each child's exit
/// status (an exception is status 1, its message on stderr). Unless `launched` is false, each child
/// gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT (a free port)
/// as from `cairn launch`, all at once as it starts them, and as the launcher does, when a rank
/// fails the others get SIGTERM, then SIGKILL 10 s later. Returns the first failed rank's status
/// (128 + the signal that ended it), or 0. The parent must not have started libtorch's thread
/// pools (children inherit no threads).
template <class Body> int run(int ranks, Body&& body, bool launched = true) {
  auto port = std::to_string(cairn::comm::detail::free_port());
  std::fflush(nullptr);
  std::vector<pid_t> running;
  for (int r = 0; r < ranks; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) {
      for (auto p : running) ::kill(p, SIGKILL);
      throw std::runtime_error("fork failed");
    }
    if (pid == 0) {
      // As a new process would have them: not the test driver's crash handlers.
      for (int signal : {SIGABRT, SIGFPE, SIGILL, SIGINT, SIGSEGV, SIGTERM}) ::signal(signal, SIG_DFL);
      if (launched) {
        for (auto [name, value] : {std::pair{"RANK", std::to_string(r)},
                                   {"LOCAL_RANK", std::to_string(r)},
                                   {"WORLD_SIZE", std::to_string(ranks)},
                                   {"LOCAL_WORLD_SIZE", std::to_string(ranks)},
                                   {"MASTER_ADDR", std::string("127.0.0.1")},
                                   {"MASTER_PORT", port}})
          ::setenv(name, value.c_str(), 1);
      }
      int status = 1;
      try {
        status = body(r);
      } catch (std::exception const& e) {
        std::fprintf(stderr, "rank %d: error: %s\n", r, e.what());
      }
      std::fflush(nullptr);
      ::_exit(status);
    }
    running.push_back(pid);
  }
  int result = 0;
  bool stopping = false;
  auto stopped = std::chrono::steady_clock::now();
  while (!running.empty()) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, stopping ? WNOHANG : 0);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) {
      if (stopping && std::chrono::steady_clock::now() - stopped > std::chrono::seconds(10))
        for (auto p : running) ::kill(p, SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    auto it = std::find(running.begin(), running.end(), pid);
    if (it == running.end()) continue;
    running.erase(it);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0 && result == 0) {
      result = code;
      for (auto p : running) ::kill(p, SIGTERM);
      stopping = true;
      stopped = std::chrono::steady_clock::now();
    }
  }
  return result;
}

} // namespace forked_ranks
