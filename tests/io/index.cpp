// Index files of sharded checkpoints: round trip, and names that escape the directory.
#include <cairn/io/error.hpp>
#include <cairn/io/index.hpp>

#include <doctest/doctest.h>

#include <fstream>

#include "../error_kind.hpp"
#include "temp_dir.hpp"

using namespace cairn::io;

TEST_CASE("an index round-trips") {
  temp_dir dir;
  safetensors_index index;
  index.metadata["total_size"] = 1234;
  index.weight_map = {{"a/weights", "state_dict_0.safetensors"},
                      {"b/weights", "state_dict_1.safetensors"},
                      {"c/weights", "state_dict_1.safetensors"}};
  write_index(dir / "state_dict.safetensors.index.json", index);
  auto read = read_index(dir / "state_dict.safetensors.index.json");
  CHECK(read.metadata.at("total_size") == 1234);
  CHECK(read.weight_map == index.weight_map);
  CHECK(read.files() == std::vector<std::string>{"state_dict_0.safetensors", "state_dict_1.safetensors"});
}

TEST_CASE("file names that escape the checkpoint directory are refused") {
  CHECK(stays_inside("model-00001-of-00002.safetensors"));
  CHECK(stays_inside("shards/model.safetensors"));
  CHECK_FALSE(stays_inside("../model.safetensors"));
  CHECK_FALSE(stays_inside("shards/../../x"));
  CHECK_FALSE(stays_inside("/etc/passwd"));
  CHECK_FALSE(stays_inside(""));

  temp_dir dir;
  auto path = dir / "model.safetensors.index.json";
  std::ofstream(path) << R"({"metadata": {}, "weight_map": {"w": "../../secret.safetensors"}})";
  CHECK_THROWS_WITH_AS(read_index(path),
                       (path.string() + ": weight_map entry 'w' names '../../secret.safetensors', which is outside "
                                        "the checkpoint directory")
                           .c_str(),
                       io_error);
}

TEST_CASE("malformed indexes are refused, naming the file") {
  temp_dir dir;
  auto path = dir / "i.json";
  std::ofstream(path) << R"({"weight_map": {"w": 3}})";
  CHECK_THROWS_WITH_AS(read_index(path), doctest::Contains("weight_map entry 'w' must name a file"), io_error);
  std::ofstream(path) << R"({"metadata": {}})";
  CHECK_THROWS_WITH_AS(read_index(path), doctest::Contains("weight_map must be an object"), io_error);
  std::ofstream(path) << "{";
  CHECK_THROWS_WITH_AS(read_index(path), doctest::Contains("not valid JSON"), io_error);
  CHECK_KIND(read_index(path), cairn::io_errc::malformed);
  CHECK_KIND(read_index(dir / "absent.json"), std::errc::no_such_file_or_directory);
}

TEST_CASE("an index is read within a limit, once per key, from a regular file only") {
  temp_dir dir;
  auto path = dir / "i.json";
  std::ofstream(path) << R"({"weight_map": {"w": "a.safetensors", "w": "b.safetensors"}})";
  CHECK_THROWS_WITH_AS(read_index(path), (path.string() + ": duplicate key 'weight_map.w'").c_str(), io_error);
  std::ofstream(path) << R"({"weight_map": {"w": "a.safetensors"}})";
  CHECK_THROWS_WITH_AS(read_index(path, 10), (path.string() + ": 38 bytes, larger than the limit of 10 bytes").c_str(),
                       io_error);
  std::filesystem::resize_file(path, std::uint64_t{8} << 30); // 8 GiB, sparse
  CHECK_THROWS_WITH_AS(read_index(path),
                       (path.string() + ": 8589934592 bytes, larger than the limit of 1024 MiB").c_str(), io_error);
  CHECK_KIND(read_index(path), cairn::io_errc::too_large);
  CHECK_THROWS_WITH_AS(read_index("/dev/zero"), "/dev/zero: not a regular file (a FIFO, socket or device): refused",
                       io_error);
  CHECK_KIND(read_index("/dev/zero"), cairn::io_errc::unsupported);
}
