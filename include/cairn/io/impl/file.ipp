// Definitions of <cairn/io/file.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/io/error.hpp>
#include <cairn/io/file.hpp>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <fcntl.h>
#include <filesystem>
#include <span>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace cairn::io {

CAIRN_DECL std::atomic<fault_hook>& fault_injection() noexcept {
  static std::atomic<fault_hook> hook{nullptr};
  return hook;
}

CAIRN_DECL unique_fd open_file(std::filesystem::path const& path, int flags, mode_t mode) {
  if ((flags & (O_WRONLY | O_RDWR | O_CREAT)) != 0) detail::fault_point("open", path);
  int fd = 0;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw system_error(path, "cannot open");
  return unique_fd(fd);
}

CAIRN_DECL void write_all(int fd, std::span<std::byte const> bytes, std::filesystem::path const& path) {
  detail::fault_point("write", path);
  while (!bytes.empty()) {
    auto written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      throw system_error(path, "write failed");
    }
    bytes = bytes.subspan(static_cast<std::size_t>(written));
  }
}

CAIRN_DECL void pwrite_all(int fd, std::span<std::byte const> bytes, std::uint64_t offset,
                           std::filesystem::path const& path) {
  detail::fault_point("write", path);
  while (!bytes.empty()) {
    auto written = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (written < 0) {
      if (errno == EINTR) continue;
      throw system_error(path, "write failed");
    }
    bytes = bytes.subspan(static_cast<std::size_t>(written));
    offset += static_cast<std::uint64_t>(written);
  }
}

CAIRN_DECL void fsync_file(int fd, std::filesystem::path const& path) {
  detail::fault_point("fsync", path);
  if (::fsync(fd) != 0) throw system_error(path, "fsync failed");
}

CAIRN_DECL void fsync_directory(std::filesystem::path const& directory) {
  auto fd = open_file(directory.empty() ? "." : directory, O_RDONLY | O_DIRECTORY);
  fsync_file(fd.get(), directory);
}

CAIRN_DECL void rename_path(std::filesystem::path const& from, std::filesystem::path const& to) {
  detail::fault_point("rename", to);
  if (::rename(from.c_str(), to.c_str()) != 0) throw system_error(to, "cannot rename " + from.string() + " to it");
}

CAIRN_DECL void make_directories(std::filesystem::path const& path) {
  detail::fault_point("mkdir", path);
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw io_error(path, ec, "cannot create directory: " + ec.message());
}

CAIRN_DECL void remove_tree(std::filesystem::path const& path) {
  detail::fault_point("remove", path);
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) throw io_error(path, ec, "cannot remove: " + ec.message());
}

} // namespace cairn::io

namespace cairn::io::detail {

CAIRN_DECL std::filesystem::path temporary_name(std::filesystem::path const& final_path) {
  static std::atomic<unsigned> counter{0};
  // Appended piece by piece: GCC 12 at -O3 warns (-Wrestrict) inside a chain of operator+.
  std::string name = ".";
  name += final_path.filename().string();
  name += ".tmp-";
  name += std::to_string(::getpid());
  name += '-';
  name += std::to_string(counter.fetch_add(1));
  return final_path.parent_path() / name;
}

} // namespace cairn::io::detail

namespace cairn::io {

CAIRN_DECL atomic_file::~atomic_file() {
  if (!committed_) {
    fd_ = unique_fd();
    ::unlink(temp_.c_str());
  }
}

CAIRN_DECL void atomic_file::commit() {
  fsync_file(fd_.get(), final_);
  fd_ = unique_fd(); // data and size are durable after fsync; close cannot lose them
  rename_path(temp_, final_);
  committed_ = true;
  fsync_directory(final_.parent_path());
}

CAIRN_DECL void write_file_atomically(std::filesystem::path const& path, std::span<std::byte const> bytes) {
  atomic_file file(path);
  file.write(bytes);
  file.commit();
}

CAIRN_DECL mapped_file::mapped_file(std::filesystem::path path)
    : path_(std::move(path)), fd_(open_file(path_, O_RDONLY | O_NONBLOCK | O_NOCTTY)) { // a FIFO must not block
  struct stat info {};
  if (::fstat(fd_.get(), &info) != 0) throw system_error(path_, "cannot stat");
  if (S_ISDIR(info.st_mode)) throw io_error(path_, io_errc::unsupported, "a directory, not a file");
  if (!S_ISREG(info.st_mode))
    throw io_error(path_, io_errc::unsupported, "not a regular file (a FIFO, socket or device): refused");
  size_ = static_cast<std::size_t>(info.st_size);
  if (size_ == 0) return;
  void* data = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_.get(), 0);
  if (data == MAP_FAILED) throw system_error(path_, "cannot map");
  data_ = static_cast<std::byte const*>(data);
}

CAIRN_DECL void mapped_file::read_at(std::uint64_t offset, std::span<std::byte> out) const {
  if (offset > size_ || out.size() > size_ - offset) throw io_error(path_, "read past the end of the file");
  while (!out.empty()) {
    auto n = ::pread(fd_.get(), out.data(), out.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw system_error(path_, "read failed");
    out = out.subspan(static_cast<std::size_t>(n));
    offset += static_cast<std::uint64_t>(n);
  }
}

} // namespace cairn::io
