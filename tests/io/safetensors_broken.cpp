// A corpus of hand-made broken files: each is refused with its own message naming the file
// (and the tensor where there is one), never a crash or a read out of bounds.
#include <cairn/io/error.hpp>
#include <cairn/io/safetensors.hpp>

#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "temp_dir.hpp"

namespace {

std::string file_with_header(std::string const& header, std::size_t data_bytes) {
  std::string bytes(8, '\0');
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return bytes + header + std::string(data_bytes, '\x01');
}

std::string error_of(std::string const& content) {
  temp_dir dir;
  auto path = dir / "broken.safetensors";
  std::ofstream(path, std::ios::binary) << content;
  try {
    cairn::io::safetensors_file file(path);
  } catch (cairn::io::io_error const& e) {
    std::string text = e.what();
    auto prefix = path.string() + ": ";
    REQUIRE(text.starts_with(prefix)); // every message names the file
    return text.substr(prefix.size());
  }
  return "accepted";
}

std::string tensor(std::string const& name, std::string const& dtype, std::string const& shape, std::uint64_t begin,
                   std::uint64_t end) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(begin) + "," + std::to_string(end) + "]}";
}

/// `{inner}`, built by appending: GCC 12 at -O3 warns (-Wrestrict, a false positive) inside
/// `"{" + std::string&&`.
std::string object(std::string const& inner) {
  std::string out = "{";
  out += inner;
  out += '}';
  return out;
}

} // namespace

TEST_CASE("a valid file is accepted") {
  CHECK(error_of(file_with_header(object(tensor("a", "F32", "[2]", 0, 8)), 8)) == "accepted");
}

TEST_CASE("broken files, each with its own message") {
  std::string huge(8, '\xff');
  CHECK(error_of("") == "too short to be a safetensors file (0 bytes)");
  CHECK(error_of("abc") == "too short to be a safetensors file (3 bytes)");
  CHECK(error_of(huge) == "header length 18446744073709551615 exceeds the limit of 104857600 bytes");
  CHECK(error_of(std::string("\x10\0\0\0\0\0\0\0{}", 10)) ==
        "header length 16 runs past the end of the file (10 bytes)");
  CHECK(error_of(file_with_header("{\"a\":", 0)).starts_with("header is not valid JSON"));
  CHECK(error_of(file_with_header("[1,2]", 0)) == "header must be a JSON object");
  CHECK(error_of(file_with_header(object(tensor("a", "F32", "[1]", 0, 4) + "," + tensor("a", "F32", "[1]", 4, 8)),
                                  8)) == "duplicate entry 'a' in the header");
  CHECK(error_of(file_with_header(object(tensor("a", "F31", "[1]", 0, 4)), 4)) == "tensor 'a': unknown dtype 'F31'");
  CHECK(error_of(file_with_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4)) ==
        "tensor 'a': data_offsets must be an array of two integers");
  CHECK(error_of(file_with_header("{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4)) ==
        "tensor 'a': dtype must be a string");
  CHECK(error_of(file_with_header(object(tensor("a", "F32", "[-1]", 0, 4)), 4)) ==
        "tensor 'a': shape dimension must be a non-negative integer");
  CHECK(error_of(file_with_header(object(tensor("a", "U8", "[4294967296,4294967296]", 0, 4)), 4)) ==
        "tensor 'a': shape has more elements than 64 bits can count");
  CHECK(error_of(file_with_header(object(tensor("a", "F32", "[2]", 8, 0)), 8)) ==
        "tensor 'a': data_offsets end before they begin");
  CHECK(error_of(file_with_header(object(tensor("a", "F32", "[3]", 0, 8)), 8)) ==
        "tensor 'a': holds 8 bytes, but F32 of this shape needs 12");
  CHECK(error_of(file_with_header(object(tensor("a", "F32", "[2]", 0, 8)), 4)) ==
        "tensor 'a' runs past the end of the file (data_offsets end at 8, the data section holds 4 bytes)");
  CHECK(error_of(file_with_header(object(tensor("a", "F32", "[2]", 0, 8) + "," + tensor("b", "F32", "[2]", 4, 12)),
                                  12)) == "tensor 'b' overlaps the tensor before it");
  CHECK(error_of(file_with_header(object(tensor("a", "F32", "[1]", 4, 8)), 8)) ==
        "bytes 0 to 4 of the data are not covered by any tensor (before 'a')");
  CHECK(error_of(file_with_header(object(tensor("a", "F32", "[1]", 0, 4)), 6)) ==
        "2 bytes after the last tensor are not covered");
  CHECK(error_of(file_with_header("{\"__metadata__\":{\"k\":1}}", 0)) == "__metadata__ entry 'k' must be a string");
  CHECK(error_of(file_with_header("{\"__metadata__\":[]}", 0)) == "__metadata__ must be an object of strings");
  CHECK(error_of(file_with_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4)) ==
        "tensor 'a': unexpected field 'x'");
  CHECK(error_of(file_with_header("{\"a\":3}", 0)) == "tensor 'a': entry must be an object");
}

TEST_CASE("duplicates are found even when spelt with escapes") {
  CHECK(
      error_of(file_with_header(object(tensor("ab", "F32", "[1]", 0, 4) + "," + tensor("a\\u0062", "F32", "[1]", 4, 8)),
                                8)) == "duplicate entry 'ab' in the header");
}

TEST_CASE("a missing file names it") {
  CHECK_THROWS_WITH_AS(cairn::io::safetensors_file("/nonexistent/x.safetensors"),
                       "/nonexistent/x.safetensors: cannot open: No such file or directory", cairn::io::io_error);
}
