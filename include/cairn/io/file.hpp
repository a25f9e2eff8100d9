#pragma once

#include <cairn/detail/decl.hpp>
#include <cairn/io/error.hpp> // what its functions throw

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

/// A hook called before every operation that changes the disk (`open` for writing, `write`,
/// `fsync`, `rename`, `mkdir`, `remove`), with the operation's name and path. Tests install one
/// to kill the process or fail the operation at a chosen point (an exception thrown by the hook
/// is the operation's failure). Null, the default, costs one relaxed atomic load.
using fault_hook = void (*)(char const* operation, std::filesystem::path const& path);

CAIRN_DECL std::atomic<fault_hook>& fault_injection() noexcept;

/// Installs a fault hook for its lifetime, then restores the one before it, so that a test that
/// fails midway never leaves its hook to the tests after it.
///
///     { cairn::io::scoped_fault_injection fail(fail_third_write); save(...); }
class scoped_fault_injection {
public:
  explicit scoped_fault_injection(fault_hook hook) noexcept : previous_(fault_injection().exchange(hook)) {}
  scoped_fault_injection(scoped_fault_injection const&) = delete;
  scoped_fault_injection& operator=(scoped_fault_injection const&) = delete;
  ~scoped_fault_injection() { fault_injection().store(previous_); }

private:
  fault_hook previous_;
};

namespace detail {
inline void fault_point(char const* operation, std::filesystem::path const& path) {
  if (auto hook = fault_injection().load(std::memory_order_relaxed)) hook(operation, path);
}
} // namespace detail

/// An owned file descriptor.
class unique_fd {
public:
  unique_fd() = default;
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  unique_fd(unique_fd const&) = delete;
  unique_fd& operator=(unique_fd const&) = delete;
  ~unique_fd() {
    if (fd_ >= 0) ::close(fd_);
  }

  [[nodiscard]] int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }

private:
  int fd_ = -1;
};

CAIRN_DECL unique_fd open_file(std::filesystem::path const& path, int flags, mode_t mode = 0644);

/// Writes all of `bytes` at the file's position, through partial writes and interruptions.
CAIRN_DECL void write_all(int fd, std::span<std::byte const> bytes, std::filesystem::path const& path);

/// Writes all of `bytes` at `offset`.
CAIRN_DECL void pwrite_all(int fd, std::span<std::byte const> bytes, std::uint64_t offset,
                           std::filesystem::path const& path);

CAIRN_DECL void fsync_file(int fd, std::filesystem::path const& path);

/// Makes a directory entry (a created or renamed file) durable.
CAIRN_DECL void fsync_directory(std::filesystem::path const& directory);

/// Renames `from` to `to` (atomically replacing a file `to`); an io_error naming both otherwise.
CAIRN_DECL void rename_path(std::filesystem::path const& from, std::filesystem::path const& to);

/// Creates directory `path` and its missing parents; an io_error naming it otherwise.
CAIRN_DECL void make_directories(std::filesystem::path const& path);

/// Removes `path` and everything under it; an io_error naming it otherwise. Nothing there is
/// not an error.
CAIRN_DECL void remove_tree(std::filesystem::path const& path);

namespace detail {
CAIRN_DECL std::filesystem::path temporary_name(std::filesystem::path const& final_path);
} // namespace detail

/// A file written under a temporary name beside its final one. `commit()` fsyncs it, renames it
/// to the final name and fsyncs the directory, so a crash at any instant leaves either no file or
/// the whole file under the final name. An uncommitted file is removed on destruction.
class atomic_file {
public:
  explicit atomic_file(std::filesystem::path final_path)
      : final_(std::move(final_path)), temp_(detail::temporary_name(final_)),
        fd_(open_file(temp_, O_WRONLY | O_CREAT | O_EXCL | O_TRUNC)) {}
  /// Written under `temporary` (a name other processes can find), which must not exist yet.
  atomic_file(std::filesystem::path final_path, std::filesystem::path temporary)
      : final_(std::move(final_path)), temp_(std::move(temporary)),
        fd_(open_file(temp_, O_WRONLY | O_CREAT | O_EXCL | O_TRUNC)) {}
  atomic_file(atomic_file const&) = delete;
  atomic_file& operator=(atomic_file const&) = delete;
  CAIRN_DECL ~atomic_file();

  [[nodiscard]] int fd() const noexcept { return fd_.get(); }
  [[nodiscard]] std::filesystem::path const& path() const noexcept { return final_; }
  [[nodiscard]] std::filesystem::path const& temporary_path() const noexcept { return temp_; }

  void write(std::span<std::byte const> bytes) { write_all(fd_.get(), bytes, final_); }
  void write_at(std::span<std::byte const> bytes, std::uint64_t offset) {
    pwrite_all(fd_.get(), bytes, offset, final_);
  }

  CAIRN_DECL void commit();

private:
  std::filesystem::path final_;
  std::filesystem::path temp_;
  unique_fd fd_;
  bool committed_ = false;
};

/// Writes `bytes` to `path` durably and atomically.
CAIRN_DECL void write_file_atomically(std::filesystem::path const& path, std::span<std::byte const> bytes);

/// A whole regular file mapped read-only into memory (a FIFO, device or directory is an io_error,
/// refused without blocking).
class mapped_file {
public:
  CAIRN_DECL explicit mapped_file(std::filesystem::path path);
  mapped_file(mapped_file&& other) noexcept
      : path_(std::move(other.path_)), fd_(std::move(other.fd_)), data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  mapped_file& operator=(mapped_file&& other) noexcept {
    std::swap(path_, other.path_);
    std::swap(fd_, other.fd_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  mapped_file(mapped_file const&) = delete;
  mapped_file& operator=(mapped_file const&) = delete;
  ~mapped_file() {
    if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
  }

  [[nodiscard]] std::span<std::byte const> bytes() const noexcept { return {data_, size_}; }
  [[nodiscard]] std::filesystem::path const& path() const noexcept { return path_; }

  /// Reads `out.size()` bytes at `offset` with pread, bypassing the mapping: for copying large
  /// ranges straight into their destination without a page fault per page.
  CAIRN_DECL void read_at(std::uint64_t offset, std::span<std::byte> out) const;

private:
  std::filesystem::path path_;
  unique_fd fd_;
  std::byte const* data_ = nullptr;
  std::size_t size_ = 0;
};

} // namespace cairn::io

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/io/impl/file.ipp>
#endif
