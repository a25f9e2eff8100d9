// Definitions of <cairn/io/storage.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/io/backend.hpp>
#include <cairn/io/error.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/storage.hpp>
#ifdef CAIRN_WITH_S3
#include <cairn/io/s3.hpp>
#endif

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <random>
#include <string>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <system_error>
#include <unistd.h>
#include <vector>

namespace cairn::io::detail {

/// The name of a filesystem type as statfs gives it.
inline std::string filesystem_name(long type) {
  switch (static_cast<unsigned long>(type)) {
  case 0xEF53:
    return "ext2/3/4";
  case 0x58465342:
    return "xfs";
  case 0x9123683E:
    return "btrfs";
  case 0x01021994:
    return "tmpfs";
  case 0x6969:
    return "nfs";
  case 0x0BD00BD0:
    return "lustre";
  case 0x65735546:
    return "fuse";
  case 0x794C7630:
    return "overlay";
  case 0x2FC12FC1:
    return "zfs";
  case 0x47504653:
    return "gpfs";
  case 0xFF534D42:
  case 0xFE534D42:
    return "cifs/smb";
  case 0x01021997:
    return "9p";
  case 0x00C36400:
    return "ceph";
  case 0x5346544E:
    return "ntfs";
  case 0x4d44:
    return "vfat";
  default: {
    char hex[32];
    std::snprintf(hex, sizeof hex, "unknown (0x%lx)", static_cast<unsigned long>(type));
    return hex;
  }
  }
}

/// Writes `text` to `path` and fsyncs it; errno's text on failure, else empty.
inline std::string write_synced(std::filesystem::path const& path, std::string const& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return std::string("open: ") + std::strerror(errno);
  std::string problem;
  errno = 0;
  auto written = ::write(fd, text.data(), text.size());
  if (written < 0)
    problem = std::string("write: ") + std::strerror(errno);
  else if (written != static_cast<ssize_t>(text.size()))
    problem = "write: " + std::to_string(written) + " of " + std::to_string(text.size()) + " bytes (the disk is full?)";
  else if (::fsync(fd) != 0)
    problem = std::string("fsync: ") + std::strerror(errno);
  ::close(fd);
  return problem;
}

inline std::string read_all(std::filesystem::path const& path) {
  std::string text;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  return text;
}

/// Runs `child` (async-signal-safe calls only: the program may have threads) in a forked
/// process; its exit status, or -1 when it could not run.
template <class Child> int in_another_process(Child&& child) {
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) ::_exit(child());
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

using scratch_path = std::filesystem::path const&;

inline storage_check check_result(std::string name, std::string problem, std::string fine, std::string consequence) {
  bool holds = problem.empty();
  return {std::move(name), holds, holds ? std::move(fine) : std::move(problem), std::move(consequence)};
}

/// fsync of a file, timed: a save ends with one per file.
inline storage_check check_file_fsync(scratch_path scratch) {
  std::string megabyte(std::size_t{1} << 20, 'x');
  auto started = std::chrono::steady_clock::now();
  auto problem = write_synced(scratch / "fsync", megabyte);
  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  char timing[64];
  std::snprintf(timing, sizeof timing, "1 MiB written and fsynced in %.1f ms", ms);
  return check_result("fsync of a file", problem, timing, "no file can be made durable here: every save fails");
}

/// fsync of a directory: what makes a created or renamed name durable.
inline storage_check check_directory_fsync(scratch_path scratch) {
  int fd = ::open(scratch.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int failed = fd < 0 ? errno : (::fsync(fd) != 0 ? errno : 0);
  if (fd >= 0) ::close(fd);
  return check_result("fsync of a directory", failed ? std::strerror(failed) : "", "returns",
                      "a committed save's name may not survive a power loss (saves fail: cairn treats the error "
                      "as one)");
}

/// rename replaces a file atomically: every file cairn writes is committed that way.
inline storage_check check_file_rename(scratch_path scratch) {
  auto a = scratch / "rename-target", b = scratch / "rename-source";
  auto problem = write_synced(a, "old");
  if (problem.empty()) problem = write_synced(b, "new");
  if (problem.empty() && ::rename(b.c_str(), a.c_str()) != 0) problem = std::string("rename: ") + std::strerror(errno);
  if (problem.empty() && (read_all(a) != "new" || std::filesystem::exists(b)))
    problem = "the target does not hold the new file alone after the rename";
  return check_result("rename replaces a file atomically", problem, "yes",
                      "a crash could leave a partly written file under its final name");
}

/// rename of a directory: a save is committed by renaming its staging directory.
inline storage_check check_directory_rename(scratch_path scratch) {
  auto from = scratch / "stage", to = scratch / "committed";
  std::string problem;
  if (::mkdir(from.c_str(), 0755) != 0 || write_synced(from / "file", "x") != "" ||
      ::rename(from.c_str(), to.c_str()) != 0)
    problem = std::strerror(errno);
  else if (read_all(to / "file") != "x")
    problem = "the renamed directory does not hold its file";
  return check_result("rename of a directory", problem, "yes",
                      "no save can be committed here (each is written aside and renamed into place)");
}

/// flock excludes a second process: one writer per experiment directory.
inline storage_check check_flock(scratch_path scratch) {
  auto path = scratch / "lock";
  auto const* name = path.c_str();
  std::string const check = "flock excludes a second process";
  int fd = ::open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    auto problem = std::string("flock fails: ") + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return check_result(check, problem, "", "the experiment lock cannot be taken: runs refuse to start here");
  }
  // 0: the second process was refused; 1: it took the lock too; 2: it could not ask.
  int second = in_another_process([name] {
    int other = ::open(name, O_RDWR | O_CLOEXEC);
    if (other < 0) return 2;
    if (::flock(other, LOCK_EX | LOCK_NB) == 0) return 1;
    return errno == EWOULDBLOCK ? 0 : 2;
  });
  ::close(fd);
  return check_result(check,
                      second == 0   ? ""
                      : second == 1 ? "a second process took the lock too"
                                    : "the second process could not try",
                      "a second process of this host was refused (another host cannot be checked from one; on NFS "
                      "v4 and Lustre mounted with flock the server arbitrates)",
                      "flock is a no-op here: two runs on one directory would not be stopped");
}

/// Whether another process reads `expected` from `name`.
inline bool other_process_reads(char const* name, std::string const& expected) {
  auto const* text = expected.c_str();
  auto length = expected.size();
  return in_another_process([name, text, length] {
           int fd = ::open(name, O_RDONLY | O_CLOEXEC);
           if (fd < 0) return 1;
           char buffer[256] = {};
           auto n = ::read(fd, buffer, sizeof buffer);
           ::close(fd);
           return n == static_cast<ssize_t>(length) && std::memcmp(buffer, text, length) == 0 ? 0 : 1;
         }) == 0;
}

/// Read after write across processes: ranks read what rank 0 wrote, and the reverse.
inline storage_check check_handoff(scratch_path scratch, std::string const& token) {
  auto path = scratch / "handoff";
  auto const* name = path.c_str();
  auto const* text = token.c_str();
  auto length = token.size();
  int written = in_another_process([name, text, length] {
    int fd = ::open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || ::write(fd, text, length) != static_cast<ssize_t>(length) || ::fsync(fd) != 0) return 1;
    ::close(fd);
    return 0;
  });
  bool read_back = written == 0 && read_all(path) == token;
  bool seen = write_synced(path, token + " back").empty() && other_process_reads(name, token + " back");
  return check_result("read after write across processes",
                      read_back && seen ? "" : "a process did not read what the other had written",
                      "each of two processes reads what the other wrote",
                      "ranks could read stale metadata or files: loads may fail or, without checksums, be wrong");
}

/// mmap reads what was written: cairn reads safetensors files through a mapping.
inline storage_check check_mmap(scratch_path scratch) {
  auto path = scratch / "mapped";
  std::string text(std::size_t{1} << 16, 'm');
  text[12345] = 'k';
  auto problem = write_synced(path, text);
  if (problem.empty()) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    void* map = fd < 0 ? MAP_FAILED : ::mmap(nullptr, text.size(), PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED)
      problem = std::string("mmap: ") + std::strerror(errno);
    else if (std::memcmp(map, text.data(), text.size()) != 0)
      problem = "the mapping differs from what was written";
    if (map != MAP_FAILED) ::munmap(map, text.size());
    if (fd >= 0) ::close(fd);
  }
  return check_result("mmap reads what was written", problem, "yes",
                      "checkpoints cannot be read here (cairn maps them)");
}

/// A directory to check in, inside the one asked about, removed with everything in it (and the
/// directory asked about, when this made it and it is empty) when done.
struct scratch_directory {
  std::filesystem::path path;
  std::vector<std::filesystem::path> created; // the directories made for it, deepest first
  explicit scratch_directory(std::filesystem::path const& dir, std::uint64_t nonce) {
    // Every directory of `dir` as written (`a/b/../c` makes a, a/b and a/c) that is missing now.
    std::error_code exists_error;
    std::filesystem::path at;
    for (auto const& part : dir) {
      at /= part;
      if (part.empty() || part == "." || part == ".." || part == at.root_path()) continue;
      if (!std::filesystem::exists(at, exists_error)) created.insert(created.begin(), at);
    }
    make_directories(dir);
    path = dir / (".cairn-check-storage-" + std::to_string(::getpid()) + "-" + std::to_string(nonce));
    if (::mkdir(path.c_str(), 0755) != 0) throw system_error(path, "cannot create a directory to check in");
  }
  scratch_directory(scratch_directory const&) = delete;
  scratch_directory& operator=(scratch_directory const&) = delete;
  ~scratch_directory() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    for (auto const& made : created) // each only if empty: what another program put there meanwhile stays
      std::filesystem::remove(made, ec);
  }
};

} // namespace cairn::io::detail

namespace cairn::io {

CAIRN_DECL storage_report check_storage(std::filesystem::path const& dir) {
  if (is_object_store_path(dir.string())) {
#ifdef CAIRN_WITH_S3
    return check_object_store(dir.string());
#else
    (void)open_location(dir.string()); // says this build has no S3 support
#endif
  }
  storage_report report;
  report.directory = dir;
  std::random_device random;
  detail::scratch_directory scratch(dir, random());
  struct statfs fs {};
  report.filesystem = ::statfs(scratch.path.c_str(), &fs) == 0 ? detail::filesystem_name(fs.f_type) : "unknown";
  struct statvfs space {};
  if (::statvfs(scratch.path.c_str(), &space) == 0) report.free_bytes = std::uint64_t{space.f_bavail} * space.f_frsize;

  auto token = "cairn " + std::to_string(random()) + " " + std::to_string(random());
  report.checks = {detail::check_file_fsync(scratch.path),  detail::check_directory_fsync(scratch.path),
                   detail::check_file_rename(scratch.path), detail::check_directory_rename(scratch.path),
                   detail::check_flock(scratch.path),       detail::check_handoff(scratch.path, token),
                   detail::check_mmap(scratch.path)};
  char free_text[64];
  std::snprintf(free_text, sizeof free_text, "%.1f GiB available", double(report.free_bytes) / double(1u << 30));
  report.checks.push_back({"free space", report.free_bytes > 0, free_text, "nothing can be saved here"});
  return report;
}

CAIRN_DECL std::string to_string(storage_report const& report) {
  std::string text = report.directory.string() + ": " + report.filesystem + "\n";
  if (report.filesystem == "tmpfs") text += "  note   tmpfs is memory: nothing saved here survives a reboot\n";
  for (auto const& c : report.checks) {
    text += std::string(c.holds ? "  holds  " : "  FAILS  ") + c.name + ": " + c.detail + "\n";
    if (!c.holds) text += "         so: " + c.consequence + "\n";
  }
  return text;
}

} // namespace cairn::io
