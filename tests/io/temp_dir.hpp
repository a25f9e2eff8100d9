#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

/// A fresh directory, removed with everything in it at the end of the test.
struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "cairn-test-XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  temp_dir(temp_dir const&) = delete;
  temp_dir& operator=(temp_dir const&) = delete;
  ~temp_dir() { std::filesystem::remove_all(path); }
  std::filesystem::path operator/(std::string const& name) const { return path / name; }
};
