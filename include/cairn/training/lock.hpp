#pragma once

// One writer per experiment directory. No libtorch.

#include <cairn/detail/decl.hpp>
#include <cairn/error.hpp>
#include <cairn/io/error.hpp>
#include <cairn/io/file.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <sys/file.h>
#include <unistd.h>

namespace cairn {

/// An exclusive lock on an experiment directory, held for the lifetime of this object: an
/// operating-system lock (flock) on `<dir>/.cairn.lock`, which dies with the process however it
/// ends, plus a record of the holder (host, pid, start time) in that file for the message a
/// second run gets. Only one process (a run's rank 0) holds it.
///
/// On a local filesystem the lock is exact. On NFS (v4, or v3 with a lock manager) Linux maps
/// flock to a POSIX lock that the server arbitrates; on a filesystem without lock support
/// (some FUSE and object-store mounts) taking it fails with an error, and on Lustre it works
/// only when the filesystem is mounted with `flock`.
class experiment_lock {
public:
  CAIRN_DECL explicit experiment_lock(std::filesystem::path const& dir);

  [[nodiscard]] std::filesystem::path const& path() const noexcept { return path_; }

private:
  /// What the holder recorded, or why it cannot be read.
  CAIRN_DECL std::string holder() const;

  std::filesystem::path path_;
  io::unique_fd fd_;
};

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/training/impl/lock.ipp>
#endif
