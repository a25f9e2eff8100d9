// Definitions of <cairn/training/lock.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/error.hpp>
#include <cairn/io/error.hpp>
#include <cairn/io/file.hpp>
#include <cairn/training/lock.hpp>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cairn {

CAIRN_DECL experiment_lock::experiment_lock(std::filesystem::path const& dir) : path_(dir / ".cairn.lock") {
  io::make_directories(dir);
  // Never through a symbolic link (the lock truncates its file: a link to another file would
  // destroy it), and never anything but a regular file (a FIFO would block).
  fd_ = io::unique_fd(::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0644));
  if (!fd_ && errno == ELOOP)
    throw io::io_error(path_, "is a symbolic link: the experiment directory's lock must be a regular file of its own "
                              "(remove the link)");
  if (!fd_) throw io::system_error(path_, "cannot open the experiment directory's lock");
  struct stat info {};
  if (::fstat(fd_.get(), &info) != 0) throw io::system_error(path_, "cannot stat the experiment directory's lock");
  if (!S_ISREG(info.st_mode))
    throw io::io_error(path_, "is not a regular file: the experiment directory's lock must be one (remove it)");
  if (info.st_nlink > 1) // a hard link: recording the holder would overwrite the file it shares
    throw io::io_error(path_, "has other names (hard links): the experiment directory's lock must be a file of its "
                              "own (remove it)");
  if (::flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) throw io::system_error(path_, "cannot lock the experiment directory");
    throw training_error(training_errc::in_use, dir.string() + ": in use by another run (" + holder() +
                                                    "); one run at a time may write an experiment directory");
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  auto since =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto record = "host " + std::string(host) + ", pid " + std::to_string(::getpid()) + ", since unix time " +
                std::to_string(since) + "\n";
  if (::ftruncate(fd_.get(), 0) != 0 || ::pwrite(fd_.get(), record.data(), record.size(), 0) < 0)
    throw io::system_error(path_, "cannot record the lock's holder");
}

CAIRN_DECL std::string experiment_lock::holder() const {
  char text[512] = {};
  auto n = ::pread(fd_.get(), text, sizeof text - 1, 0);
  std::string record = n > 0 ? std::string(text, static_cast<std::size_t>(n)) : "";
  while (!record.empty() && record.back() == '\n') record.pop_back();
  return record.empty() ? "holder unknown" : record;
}

} // namespace cairn
