// Definitions of <cairn/io/backend.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/detail/read_file.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/error.hpp>
#include <cairn/io/file.hpp>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <fcntl.h>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>
#include <vector>

namespace cairn::io::detail {

/// The POSIX backend: keys are paths.
class posix_storage final : public storage_backend {
public:
  [[nodiscard]] std::string describe(std::string_view key) const override { return std::string(key); }

  [[nodiscard]] backend_guarantees guarantees() const override {
    return {.atomic_rename = true,
            .conditional_create = true,
            .list_after_write = true,
            .directories = true,
            .shared_writes = true};
  }

  [[nodiscard]] std::optional<std::uint64_t> size(std::string_view key) override {
    std::filesystem::path path(key);
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
      throw system_error(path, "cannot stat");
    }
    if (!S_ISREG(info.st_mode)) throw io_error(path, io_errc::unsupported, "not a regular file");
    return static_cast<std::uint64_t>(info.st_size);
  }

  void read(std::string_view key, std::uint64_t offset, std::span<std::byte> out) override {
    std::filesystem::path path(key);
    auto fd = open_file(path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    while (!out.empty()) {
      auto n = ::pread(fd.get(), out.data(), out.size(), static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw system_error(path, "read failed");
      if (n == 0) throw io_error(path, "read past the end of the file");
      out = out.subspan(static_cast<std::size_t>(n));
      offset += static_cast<std::uint64_t>(n);
    }
  }

  [[nodiscard]] std::string read_all(std::string_view key, std::uint64_t limit) override {
    std::filesystem::path path(key);
    std::string text;
    auto problem = cairn::detail::read_regular_file(path, static_cast<std::size_t>(limit), text,
                                                    [](std::string_view) { return true; });
    if (!problem.empty()) throw io_error(path, problem.kind, problem.text);
    return text;
  }

  void read_pieces(std::string_view key, std::uint64_t limit,
                   std::function<bool(std::string_view)> const& consume) override {
    std::filesystem::path path(key);
    auto problem = cairn::detail::read_regular_file_pieces(path, static_cast<std::size_t>(limit), consume);
    if (!problem.empty()) throw io_error(path, problem.kind, problem.text);
  }

  void write(std::string_view key, std::span<std::byte const> bytes) override {
    write_file_atomically(std::filesystem::path(key), bytes);
  }

  [[nodiscard]] bool create_exclusive(std::string_view key, std::span<std::byte const> bytes) override {
    std::filesystem::path path(key);
    // Written whole under a private name, then linked to its own: link fails when the name
    // exists, so a reader never sees it partly written and a second writer loses.
    auto temp = temporary_name(path);
    {
      auto fd = open_file(temp, O_WRONLY | O_CREAT | O_EXCL);
      struct unlink_temp {
        std::filesystem::path const& path;
        ~unlink_temp() { ::unlink(path.c_str()); }
      } cleanup{temp};
      write_all(fd.get(), bytes, path);
      fsync_file(fd.get(), path);
      io::detail::fault_point("rename", path);
      if (::link(temp.c_str(), path.c_str()) != 0) {
        if (errno == EEXIST) return false;
        throw system_error(path, "cannot create");
      }
    }
    fsync_directory(path.parent_path());
    return true;
  }

  [[nodiscard]] std::unique_ptr<object_writer> open_writer(std::string_view key, std::uint64_t) override {
    return std::make_unique<file_writer>(std::filesystem::path(key));
  }

  [[nodiscard]] std::vector<listed_entry> list(std::string_view prefix) override {
    std::filesystem::path dir(prefix.empty() ? std::string_view(".") : prefix);
    std::vector<listed_entry> out;
    std::error_code ec;
    std::filesystem::directory_iterator it(dir, ec);
    if (ec == std::errc::no_such_file_or_directory) return out;
    if (ec) throw io_error(dir, ec, "cannot list: " + ec.message());
    for (std::filesystem::directory_iterator end; it != end; it.increment(ec)) {
      listed_entry entry;
      entry.name = it->path().filename().string();
      std::error_code stat_ec;
      // A symbolic link is listed as neither a file nor a directory of this one: following it
      // could reach another run's files.
      entry.link = it->is_symlink(stat_ec);
      if (!entry.link) {
        entry.directory = it->is_directory(stat_ec);
        if (!entry.directory && it->is_regular_file(stat_ec)) entry.size = it->file_size(stat_ec);
      }
      out.push_back(std::move(entry));
    }
    if (ec) throw io_error(dir, ec, "cannot list: " + ec.message());
    std::sort(out.begin(), out.end(), [](auto const& a, auto const& b) { return a.name < b.name; });
    return out;
  }

  void remove(std::string_view key) override {
    std::filesystem::path path(key);
    io::detail::fault_point("remove", path);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) throw system_error(path, "cannot remove");
  }

  void remove_tree(std::string_view prefix) override { io::remove_tree(std::filesystem::path(prefix)); }

  [[nodiscard]] std::optional<std::uint64_t> available(std::string_view key) override {
    return std::filesystem::space(std::filesystem::path(key)).available;
  }

private:
  class file_writer final : public object_writer {
  public:
    explicit file_writer(std::filesystem::path const& path) : file_(path) {}
    void write(std::span<std::byte const> bytes) override { write_at(bytes, written_); }
    void write_at(std::span<std::byte const> bytes, std::uint64_t offset) override {
      file_.write_at(bytes, offset);
      written_ = std::max(written_, offset + bytes.size());
    }
    void commit() override { file_.commit(); }
    [[nodiscard]] std::uint64_t size() const noexcept override { return written_; }

  private:
    atomic_file file_;
    std::uint64_t written_ = 0;
  };
};

} // namespace cairn::io::detail

namespace cairn::io {

#ifdef CAIRN_WITH_S3
// Defined in <cairn/io/s3.hpp>, included below: that header includes this one.
CAIRN_DECL std::shared_ptr<storage_backend> open_s3_location(std::string_view url, std::string& key);
#endif

CAIRN_DECL void storage_backend::read_pieces(std::string_view key, std::uint64_t limit,
                                             std::function<bool(std::string_view)> const& consume) {
  auto total = size(key);
  if (!total)
    throw io_error(describe(key), std::make_error_code(std::errc::no_such_file_or_directory), "no such object");
  if (*total > limit)
    throw io_error(describe(key), io_errc::too_large,
                   std::to_string(*total) + " bytes, larger than the limit of " + std::to_string(limit) + " bytes");
  constexpr std::uint64_t piece = std::uint64_t{8} << 20;
  std::vector<std::byte> buffer(static_cast<std::size_t>(std::min(piece, *total)));
  for (std::uint64_t at = 0; at < *total; at += piece) {
    auto part = std::span(buffer).first(static_cast<std::size_t>(std::min(piece, *total - at)));
    read(key, at, part);
    if (!consume(std::string_view(reinterpret_cast<char const*>(part.data()), part.size()))) return;
  }
}

CAIRN_DECL storage_location storage_location::operator/(std::string_view name) const {
  std::string joined = key;
  if (!joined.empty() && joined.back() != '/') joined += '/';
  joined += name;
  return {backend, std::move(joined)};
}

CAIRN_DECL bool is_object_store_path(std::string_view path) noexcept { return path.starts_with("s3://"); }

CAIRN_DECL void write_stored(std::string_view path, std::span<std::byte const> bytes) {
  auto where = open_location(path);
  where.backend->write(where.key, bytes);
}

CAIRN_DECL void make_folder(std::string_view path) {
  if (!is_object_store_path(path)) make_directories(std::filesystem::path(path));
}

CAIRN_DECL std::shared_ptr<storage_backend> posix_backend() {
  static auto const backend = std::make_shared<detail::posix_storage>();
  return backend;
}

CAIRN_DECL storage_location open_location(std::string_view path) {
  if (!is_object_store_path(path)) return {posix_backend(), std::string(path)};
#ifdef CAIRN_WITH_S3
  storage_location out;
  out.backend = open_s3_location(path, out.key);
  return out;
#else
  throw io_error(std::string(path), io_errc::unsupported,
                 "this build of cairn has no S3 support (configure it with libcurl found, or -DCAIRN_WITH_S3=ON)");
#endif
}

} // namespace cairn::io

#ifdef CAIRN_WITH_S3
#include <cairn/io/s3.hpp>
#endif
