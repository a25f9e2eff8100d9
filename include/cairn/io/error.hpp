#pragma once

#include <cairn/error.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

namespace cairn::io {

/// A file that cannot be read, written or trusted. The message names the file; the kind is an
/// io_errc (io_errc::malformed unless said otherwise), or errno's std::errc for a failed system
/// call.
class io_error : public error {
public:
  io_error(std::filesystem::path path, std::string const& message)
      : io_error(std::move(path), io_errc::malformed, message) {}
  io_error(std::filesystem::path path, std::error_code kind, std::string const& message)
      : error(kind, path.string() + ": " + message), path_(std::move(path)) {}

  [[nodiscard]] std::filesystem::path const& path() const noexcept { return path_; }

private:
  std::filesystem::path path_;
};

/// An io_error for the failed system call `what`, with errno's text.
inline io_error system_error(std::filesystem::path path, std::string const& what, int code = errno) {
  return {std::move(path), std::error_code(code, std::generic_category()), what + ": " + std::strerror(code)};
}

} // namespace cairn::io
