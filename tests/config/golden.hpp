#pragma once

// Golden files hold text users read. Set CAIRN_UPDATE_GOLDEN=1 to rewrite them after a
// deliberate change, then review the diff.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

inline std::string golden(std::string const& name, std::string const& actual) {
  auto path = std::filesystem::path(CAIRN_TEST_DATA_DIR) / "golden" / name;
  if (std::getenv("CAIRN_UPDATE_GOLDEN")) std::ofstream(path) << actual;
  std::ifstream in(path);
  std::stringstream expected;
  expected << in.rdbuf();
  return expected.str();
}
