// The writer's bytes are what the safetensors specification describes, checked by a minimal
// reader written here from the specification alone (it shares no code with cairn's reader):
//   8 bytes: N, the header length, unsigned little-endian
//   N bytes: a JSON object, UTF-8, which may end in spaces; per tensor {dtype, shape,
//            data_offsets: [begin, end]} relative to the data; optional "__metadata__" of strings
//   the rest: the data, each tensor's bytes contiguous, together covering it exactly.
#include <cairn/io/safetensors_writer.hpp>

#include <boost/json/parse.hpp>
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <vector>

#include "temp_dir.hpp"

namespace {

std::vector<unsigned char> slurp(std::filesystem::path const& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

} // namespace

TEST_CASE("the file layout follows the specification byte for byte") {
  temp_dir dir;
  std::vector<float> a{1, 2, 3, 4, 5, 6};
  std::vector<std::int16_t> b{-1, 2, -3};
  cairn::io::safetensors_writer writer(dir / "spec.safetensors");
  writer.add("layer.weight", cairn::io::dtype::F32, {2, 3}, std::as_bytes(std::span(a)));
  writer.add("layer.bias", cairn::io::dtype::I16, {3}, std::as_bytes(std::span(b)));
  writer.set_metadata("format", "pt");
  writer.write();

  auto bytes = slurp(dir / "spec.safetensors");
  REQUIRE(bytes.size() >= 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[static_cast<std::size_t>(i)];
  REQUIRE(8 + n <= bytes.size());
  CHECK((8 + n) % 64 == 0); // data starts cache-line aligned
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  CHECK(header.front() == '{');
  auto last = header.find_last_not_of(' ');
  CHECK(header[last] == '}'); // only spaces after the object
  auto json = boost::json::parse(header).as_object();

  auto const& metadata = json.at("__metadata__").as_object();
  CHECK(metadata.at("format") == "pt");
  for (auto const& entry : metadata) CHECK(entry.value().is_string());

  auto const& weight = json.at("layer.weight").as_object();
  CHECK(weight.at("dtype") == "F32");
  CHECK(weight.at("shape") == boost::json::array{2, 3});
  CHECK(weight.at("data_offsets") == boost::json::array{0, 24});
  auto const& bias = json.at("layer.bias").as_object();
  CHECK(bias.at("dtype") == "I16");
  CHECK(bias.at("data_offsets") == boost::json::array{24, 30});
  CHECK(bytes.size() == 8 + n + 30); // the data section is covered exactly

  auto data = bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n);
  float second = 0;
  std::memcpy(&second, &*(data + 4), 4);
  CHECK(second == 2.0f);
  std::int16_t third = 0;
  std::memcpy(&third, &*(data + 24 + 4), 2);
  CHECK(third == -3);
}
