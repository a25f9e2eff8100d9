// Durable, atomic file writes: a file appears under its final name whole or not at all.
#include <cairn/io/error.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/safetensors_writer.hpp>

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "../error_kind.hpp"
#include "temp_dir.hpp"

using namespace cairn::io;

namespace {

std::string read_text(std::filesystem::path const& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::size_t entries(std::filesystem::path const& dir) {
  return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(dir), {}));
}

} // namespace

TEST_CASE("a committed file appears under its final name with all its bytes") {
  temp_dir dir;
  std::string text = "hello";
  write_file_atomically(dir / "a.txt", std::as_bytes(std::span(text)));
  CHECK(read_text(dir / "a.txt") == "hello");
  CHECK(entries(dir.path) == 1); // no temporary left behind
}

TEST_CASE("a file abandoned before commit leaves nothing, and an earlier version stays") {
  temp_dir dir;
  std::string old_text = "old";
  write_file_atomically(dir / "a.txt", std::as_bytes(std::span(old_text)));
  {
    atomic_file file(dir / "a.txt");
    std::string partial = "new but incomplete";
    file.write(std::as_bytes(std::span(partial)));
    CHECK(std::filesystem::exists(file.temporary_path()));
    CHECK(file.temporary_path().parent_path() == dir.path); // same directory: rename is atomic
  }                                                         // an exception unwinding here would do the same
  CHECK(read_text(dir / "a.txt") == "old");
  CHECK(entries(dir.path) == 1);
}

TEST_CASE("a safetensors write that fails midway leaves no file") {
  temp_dir dir;
  std::vector<float> values(4);
  safetensors_writer writer(dir / "x.safetensors");
  writer.add("a", dtype::F32, {4}, std::as_bytes(std::span(values)));
  std::filesystem::remove_all(dir.path);
  CHECK_THROWS_AS(writer.write(), io_error);
  CHECK_FALSE(std::filesystem::exists(dir / "x.safetensors"));
}

TEST_CASE("permission errors name the path") {
  if (::geteuid() == 0) {
    // root ignores directory permissions; use a path under a regular file instead.
    temp_dir dir;
    std::ofstream(dir / "file") << "x";
    std::string text = "x";
    CHECK_THROWS_WITH_AS(write_file_atomically(dir / "file" / "a.txt", std::as_bytes(std::span(text))),
                         doctest::Contains((dir / "file").c_str()), io_error);
    return;
  }
  temp_dir dir;
  ::chmod(dir.path.c_str(), 0500);
  std::string text = "x";
  CHECK_THROWS_WITH_AS(write_file_atomically(dir / "a.txt", std::as_bytes(std::span(text))),
                       doctest::Contains("Permission denied"), io_error);
  CHECK_KIND(write_file_atomically(dir / "a.txt", std::as_bytes(std::span(text))), std::errc::permission_denied);
  ::chmod(dir.path.c_str(), 0700);
}
