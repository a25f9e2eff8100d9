#pragma once

// Reading a small file whole (a config, metadata.json, an index, a completion marker) without
// trusting what the path names: a FIFO would block, a device or /proc file never ends, a sparse
// file of gigabytes would fill memory. Each layer turns the reason into its own error type.

#include <cairn/error.hpp>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

namespace cairn::detail {

/// Why a file cannot be read whole: empty when it can.
struct file_problem {
  std::string text;
  std::error_code kind; ///< errno's code, io_errc::unsupported or io_errc::too_large

  [[nodiscard]] bool empty() const noexcept { return text.empty(); }
};

/// "64 MiB", "100000000 bytes": a limit as people read it.
inline std::string size_text(std::size_t bytes) {
  if (bytes >= (std::size_t{1} << 20) && bytes % (std::size_t{1} << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

/// Reads the regular file `path` front to back, refusing more than `limit` bytes, and hands each
/// piece read to `consume(std::string_view piece)`, which returns false to stop reading (a parser
/// that found the text bad: a sparse file of zeros then costs one piece of memory, not its size);
/// nothing read is held. Returns the empty string, or why it cannot: not there, not a regular file
/// (a FIFO or device is refused without blocking), larger than the limit, unreadable.
template <class Consume>
file_problem read_regular_file_pieces(std::filesystem::path const& path, std::size_t limit, Consume&& consume) {
  int fd = 0;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  auto failed = [](char const* what) {
    int code = errno;
    return file_problem{std::string(what) + ": " + std::strerror(code), std::error_code(code, std::generic_category())};
  };
  if (fd < 0) return failed("cannot open");
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_it{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) return failed("cannot stat");
  if (S_ISDIR(info.st_mode)) return {"a directory, not a file", io_errc::unsupported};
  if (!S_ISREG(info.st_mode)) return {"not a regular file (a FIFO, socket or device): refused", io_errc::unsupported};
  if (static_cast<std::uint64_t>(info.st_size) > limit)
    return {std::to_string(info.st_size) + " bytes, larger than the limit of " + size_text(limit), io_errc::too_large};
  constexpr std::size_t piece = std::size_t{1} << 16;
  char buffer[piece];
  std::size_t total = 0;
  for (;;) {
    auto room = limit - total; // one byte past the limit tells a file that grew beyond it
    auto n = ::read(fd, buffer, room >= piece ? piece : room + 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return failed("cannot read");
    if (n == 0) break;
    total += static_cast<std::size_t>(n);
    if (total > limit) return {"larger than the limit of " + size_text(limit), io_errc::too_large};
    if (!consume(std::string_view(buffer, static_cast<std::size_t>(n)))) break;
  }
  return {};
}

/// Reads the regular file `path` whole into `text` as `read_regular_file_pieces` reads it, handing
/// each piece to `consume` too.
template <class Consume> file_problem read_regular_file(std::filesystem::path const& path, std::size_t limit,
                                                        std::string& text, Consume&& consume) {
  text.clear();
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (!ec && size <= limit) text.reserve(static_cast<std::size_t>(size)); // touched only as it fills
  return read_regular_file_pieces(path, limit, [&](std::string_view piece) {
    text.append(piece);
    return consume(piece);
  });
}

/// Reads the regular file `path` whole into `text` (see above).
inline file_problem read_regular_file(std::filesystem::path const& path, std::size_t limit, std::string& text) {
  return read_regular_file(path, limit, text, [](std::string_view) { return true; });
}

} // namespace cairn::detail
