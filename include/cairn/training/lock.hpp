#pragma once

// One writer per experiment directory. No libtorch.

#include <cairn/detail/decl.hpp>
#include <cairn/error.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/error.hpp>
#include <cairn/io/file.hpp>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <sys/file.h>
#include <unistd.h>

namespace cairn {

namespace detail {
struct lease_keeper;
} // namespace detail

/// An exclusive lock on an experiment directory, held for the lifetime of this object: an
/// operating-system lock (flock) on `<dir>/.cairn.lock`, which dies with the process however it
/// ends, plus a record of the holder (host, pid, start time) in that file for the message a
/// second run gets. Only one process (a run's rank 0) holds it.
///
/// On a local filesystem the lock is exact. On NFS (v4, or v3 with a lock manager) Linux maps
/// flock to a POSIX lock that the server arbitrates; on a filesystem without lock support
/// (some FUSE and object-store mounts) taking it fails with an error, and on Lustre it works
/// only when the filesystem is mounted with `flock`.
///
/// On a store without locks (an object store, `s3://…`) the lock is a lease: the object
/// `.cairn.lock`, created only when absent (a conditional create, or where the store has none, a
/// look, a write and a read back), recording the holder and a token of its own, and rewritten by
/// its holder every `lease_refresh` seconds. A lock whose holder died (its process is gone from
/// this host, or it has not been rewritten for `lease_expiry` seconds) is taken over. `check`
/// says whether it is still this holder's, before each commit.
class experiment_lock {
public:
  static constexpr int lease_refresh = 10;
  static constexpr int lease_expiry = 60;

  CAIRN_DECL explicit experiment_lock(std::filesystem::path const& dir);
  experiment_lock(experiment_lock const&) = delete;
  experiment_lock& operator=(experiment_lock const&) = delete;
  CAIRN_DECL ~experiment_lock();

  [[nodiscard]] std::filesystem::path const& path() const noexcept { return path_; }

  /// Throws training_error(in_use) when the lock is no longer this holder's (a lease another run
  /// took over after this one stopped refreshing it); nothing to check for an operating-system lock.
  CAIRN_DECL void check() const;

  /// When this holder took the experiment (unix milliseconds, read when it won the lock): a run
  /// that takes a lease over does so at least `lease_expiry` seconds after the last renewal that
  /// its previous holder recorded, so its `since` is later than that holder's, whatever their
  /// clocks. Names the generations of the saves it writes on a store (save_directory::set_writer).
  [[nodiscard]] std::int64_t since() const noexcept { return since_; }
  /// A random name of this holder's (8 hexadecimal digits), for the same.
  [[nodiscard]] std::string const& holder_name() const noexcept { return name_; }

private:
  /// What the holder recorded, or why it cannot be read.
  CAIRN_DECL std::string holder() const;
  CAIRN_DECL void take_lease(std::filesystem::path const& dir);
  CAIRN_DECL std::string lease_record() const;
  /// Starts the thread that renews the lease at `where`, last written at `written`.
  CAIRN_DECL void start_keeper(io::storage_location const& where, std::chrono::steady_clock::time_point written);

  std::filesystem::path path_;
  io::unique_fd fd_;
  std::int64_t since_ = 0;
  std::string name_;
  // A lease's:
  std::string token_;
  std::unique_ptr<detail::lease_keeper> keeper_;
};

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/training/impl/lock.ipp>
#endif
