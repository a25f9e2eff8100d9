#pragma once

#include <map>
#include <spawn.h>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

extern "C" char** environ; // NOLINT(readability-redundant-declaration): POSIX declares it in no header

namespace cairn::detail {

/// Starts `command` with posix_spawnp (searching PATH, never through a shell) in the current
/// environment plus `variables`, which win over inherited ones. Returns 0 and sets `pid`, or
/// the error number of the failure (ENOENT for a program that does not exist, …).
inline int spawn(std::vector<std::string> command, std::map<std::string, std::string> const& variables,
                 posix_spawn_file_actions_t const* actions, pid_t& pid, posix_spawnattr_t const* attributes = nullptr) {
  std::vector<std::string> entries;
  for (char** e = environ; *e; ++e) {
    std::string_view entry(*e);
    if (!variables.contains(std::string(entry.substr(0, entry.find('='))))) entries.emplace_back(entry);
  }
  for (auto const& [key, value] : variables) entries.push_back(key + '=' + value);
  std::vector<char*> envp, argv;
  for (auto& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  for (auto& a : command) argv.push_back(a.data());
  argv.push_back(nullptr);
  return ::posix_spawnp(&pid, argv[0], actions, attributes, argv.data(), envp.data());
}

} // namespace cairn::detail
