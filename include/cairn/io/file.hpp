#pragma once

#include <cairn/io/error.hpp>

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

inline std::atomic<fault_hook>& fault_injection() noexcept {
  static std::atomic<fault_hook> hook{nullptr};
  return hook;
}

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

inline unique_fd open_file(std::filesystem::path const& path, int flags, mode_t mode = 0644) {
  if ((flags & (O_WRONLY | O_RDWR | O_CREAT)) != 0) detail::fault_point("open", path);
  int fd = 0;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw system_error(path, "cannot open");
  return unique_fd(fd);
}

/// Writes all of `bytes` at the file's position, through partial writes and interruptions.
inline void write_all(int fd, std::span<std::byte const> bytes, std::filesystem::path const& path) {
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

/// Writes all of `bytes` at `offset`.
inline void pwrite_all(int fd, std::span<std::byte const> bytes, std::uint64_t offset,
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

inline void fsync_file(int fd, std::filesystem::path const& path) {
  detail::fault_point("fsync", path);
  if (::fsync(fd) != 0) throw system_error(path, "fsync failed");
}

/// Makes a directory entry (a created or renamed file) durable.
inline void fsync_directory(std::filesystem::path const& directory) {
  auto fd = open_file(directory.empty() ? "." : directory, O_RDONLY | O_DIRECTORY);
  fsync_file(fd.get(), directory);
}

/// Renames `from` to `to` (atomically replacing a file `to`); an io_error naming both otherwise.
inline void rename_path(std::filesystem::path const& from, std::filesystem::path const& to) {
  detail::fault_point("rename", to);
  if (::rename(from.c_str(), to.c_str()) != 0) throw system_error(to, "cannot rename " + from.string() + " to it");
}

/// Creates directory `path` and its missing parents; an io_error naming it otherwise.
inline void make_directories(std::filesystem::path const& path) {
  detail::fault_point("mkdir", path);
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw io_error(path, "cannot create directory: " + ec.message());
}

/// Removes `path` and everything under it; an io_error naming it otherwise. Nothing there is
/// not an error.
inline void remove_tree(std::filesystem::path const& path) {
  detail::fault_point("remove", path);
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) throw io_error(path, "cannot remove: " + ec.message());
}

namespace detail {
inline std::filesystem::path temporary_name(std::filesystem::path const& final_path) {
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
} // namespace detail

/// A file written under a temporary name beside its final one. `commit()` fsyncs it, renames it
/// to the final name and fsyncs the directory, so a crash at any instant leaves either no file or
/// the whole file under the final name. An uncommitted file is removed on destruction.
class atomic_file {
public:
  explicit atomic_file(std::filesystem::path final_path)
      : final_(std::move(final_path)), temp_(detail::temporary_name(final_)),
        fd_(open_file(temp_, O_WRONLY | O_CREAT | O_EXCL | O_TRUNC)) {}
  atomic_file(atomic_file const&) = delete;
  atomic_file& operator=(atomic_file const&) = delete;
  ~atomic_file() {
    if (!committed_) {
      fd_ = unique_fd();
      ::unlink(temp_.c_str());
    }
  }

  [[nodiscard]] int fd() const noexcept { return fd_.get(); }
  [[nodiscard]] std::filesystem::path const& path() const noexcept { return final_; }
  [[nodiscard]] std::filesystem::path const& temporary_path() const noexcept { return temp_; }

  void write(std::span<std::byte const> bytes) { write_all(fd_.get(), bytes, final_); }
  void write_at(std::span<std::byte const> bytes, std::uint64_t offset) {
    pwrite_all(fd_.get(), bytes, offset, final_);
  }

  void commit() {
    fsync_file(fd_.get(), final_);
    fd_ = unique_fd(); // data and size are durable after fsync; close cannot lose them
    rename_path(temp_, final_);
    committed_ = true;
    fsync_directory(final_.parent_path());
  }

private:
  std::filesystem::path final_;
  std::filesystem::path temp_;
  unique_fd fd_;
  bool committed_ = false;
};

/// Writes `bytes` to `path` durably and atomically.
inline void write_file_atomically(std::filesystem::path const& path, std::span<std::byte const> bytes) {
  atomic_file file(path);
  file.write(bytes);
  file.commit();
}

/// A whole file mapped read-only into memory.
class mapped_file {
public:
  explicit mapped_file(std::filesystem::path path) : path_(std::move(path)), fd_(open_file(path_, O_RDONLY)) {
    struct stat info {};
    if (::fstat(fd_.get(), &info) != 0) throw system_error(path_, "cannot stat");
    size_ = static_cast<std::size_t>(info.st_size);
    if (size_ == 0) return;
    void* data = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_.get(), 0);
    if (data == MAP_FAILED) throw system_error(path_, "cannot map");
    data_ = static_cast<std::byte const*>(data);
  }
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
  void read_at(std::uint64_t offset, std::span<std::byte> out) const {
    if (offset > size_ || out.size() > size_ - offset) throw io_error(path_, "read past the end of the file");
    while (!out.empty()) {
      auto n = ::pread(fd_.get(), out.data(), out.size(), static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw system_error(path_, "read failed");
      out = out.subspan(static_cast<std::size_t>(n));
      offset += static_cast<std::uint64_t>(n);
    }
  }

private:
  std::filesystem::path path_;
  unique_fd fd_;
  std::byte const* data_ = nullptr;
  std::size_t size_ = 0;
};

} // namespace cairn::io
