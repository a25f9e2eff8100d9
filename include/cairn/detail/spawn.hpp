#pragma once

// Starting a program (a rank, a callback) without a shell, with what a supervisor needs that
// posix_spawn cannot give: a process group of its own and a signal when its parent dies.

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <map>
#include <string>
#include <string_view>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern "C" char** environ; // NOLINT(readability-redundant-declaration): POSIX declares it in no header

namespace cairn::detail {

/// How `start_process` starts a program.
struct process_options {
  bool own_group = false;      ///< lead a process group of its own (stopping it stops what it starts)
  int parent_death_signal = 0; ///< sent to it when the thread that started it ends (0: none)
  bool stdin_null = false;     ///< stdin from /dev/null
  int stdout_fd = -1;          ///< stdout to this file descriptor (-1: inherited)
  int stderr_fd = -1;          ///< stderr to this file descriptor (-1: inherited)
};

/// The file `name` runs as: itself when it names a path, else the first executable file of that
/// name in PATH. Empty when there is none.
inline std::string find_program(std::string const& name) {
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) return name;
  auto const* path = std::getenv("PATH");
  std::string_view dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t at = 0; at <= dirs.size();) {
    auto end = dirs.find(':', at);
    if (end == std::string_view::npos) end = dirs.size();
    std::string candidate(dirs.substr(at, end - at));
    candidate += candidate.empty() ? "./" : "/";
    candidate += name;
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    at = end + 1;
  }
  return {};
}

/// `environ` with `variables` set over it, as "KEY=value" entries.
inline std::vector<std::string> environment_with(std::map<std::string, std::string> const& variables) {
  std::vector<std::string> entries;
  for (char** e = environ; *e; ++e) {
    std::string_view entry(*e);
    if (!variables.contains(std::string(entry.substr(0, entry.find('='))))) entries.emplace_back(entry);
  }
  for (auto const& [key, value] : variables) entries.push_back(key + '=' + value);
  return entries;
}

/// The child's side, between fork and exec: async-signal-safe calls only. Writes the error of a
/// failed exec to `report` and exits.
[[noreturn]] inline void become_child(char const* program, char* const* argv, char* const* envp,
                                      process_options const& options, pid_t parent, int report) {
  if (options.own_group) ::setpgid(0, 0);
  if (options.parent_death_signal != 0) {
    ::prctl(PR_SET_PDEATHSIG, options.parent_death_signal);
    if (::getppid() != parent) ::_exit(127); // the parent ended before the line above
  }
  if (options.stdin_null) {
    int in = ::open("/dev/null", O_RDONLY);
    if (in > 0) {
      ::dup2(in, 0);
      ::close(in);
    }
  }
  if (options.stdout_fd >= 0) ::dup2(options.stdout_fd, 1);
  if (options.stderr_fd >= 0) ::dup2(options.stderr_fd, 2);
  sigset_t none; // handlers the parent installed end with the exec; ignored signals stay ignored (nohup)
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(program, argv, envp);
  int reason = errno;
  [[maybe_unused]] auto ignored = ::write(report, &reason, sizeof reason);
  ::_exit(127);
}

/// The exec error the child reported on `report`, or 0 once the exec closed it.
inline int exec_error(int report) {
  int reason = 0;
  ssize_t n = 0;
  do {
    n = ::read(report, &reason, sizeof reason);
  } while (n < 0 && errno == EINTR);
  ::close(report);
  return n == static_cast<ssize_t>(sizeof reason) ? reason : 0;
}

/// Starts `command` (never through a shell) in the current environment plus `variables`, which
/// win over inherited ones. Returns 0 and sets `pid`, or the error number of the failure (ENOENT
/// for a program that does not exist, EACCES, EMFILE, …). Everything the child needs is made
/// before the fork: between fork and exec it calls only async-signal-safe functions, so a
/// program with threads (libtorch's) may call it.
inline int start_process(std::vector<std::string> command, std::map<std::string, std::string> const& variables,
                         process_options const& options, pid_t& pid) {
  pid = -1;
  if (command.empty()) return ENOENT;
  auto program = find_program(command.front());
  if (program.empty()) return ENOENT;
  auto entries = environment_with(variables);
  std::vector<char*> envp, argv;
  for (auto& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  for (auto& a : command) argv.push_back(a.data());
  argv.push_back(nullptr);
  int report[2]; // the child's exec error, if any; closed by a successful exec
  if (::pipe2(report, O_CLOEXEC) != 0) return errno;
  pid_t parent = ::getpid();
  pid_t child = ::fork();
  if (child < 0) {
    int reason = errno;
    ::close(report[0]);
    ::close(report[1]);
    return reason;
  }
  if (child == 0) become_child(program.c_str(), argv.data(), envp.data(), options, parent, report[1]);
  ::close(report[1]);
  if (int reason = exec_error(report[0])) {
    while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
    }
    return reason;
  }
  pid = child;
  return 0;
}

} // namespace cairn::detail
