// Writing and reading safetensors files: every dtype, empty and scalar tensors, conversion,
// metadata, checksums, boxes, and offsets beyond 4 GiB.
#include <cairn/io.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <type_traits>
#include <unistd.h>
#include <vector>

#include "../error_kind.hpp"
#include "temp_dir.hpp"

using namespace cairn::io;

namespace {

std::vector<std::byte> pattern(std::size_t size, unsigned seed) {
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>((i * 131 + seed * 17) & 0xff);
  return bytes;
}

bool same(std::span<std::byte const> a, std::span<std::byte const> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

} // namespace

TEST_CASE("every dtype round-trips bit for bit") {
  temp_dir dir;
  std::vector<std::vector<std::byte>> data;
  safetensors_writer writer(dir / "all.safetensors");
  unsigned seed = 0;
  for (auto t : all_dtypes) {
    data.push_back(pattern(3 * 5 * size_of(t), ++seed));
    writer.add(std::string(name(t)), t, {3, 5}, data.back());
  }
  writer.write();
  safetensors_file file(dir / "all.safetensors");
  REQUIRE(file.tensors().size() == all_dtypes.size());
  for (std::size_t i = 0; i < all_dtypes.size(); ++i) {
    auto const& t = file.at(name(all_dtypes[i]));
    CHECK(t.dtype == all_dtypes[i]);
    CHECK(t.shape == std::vector<std::uint64_t>{3, 5});
    CHECK(same(file.bytes(t), data[i]));
  }
  CHECK(file.has_checksums());
  CHECK_NOTHROW(file.verify());
}

TEST_CASE("empty and scalar tensors, and a file with no tensors") {
  temp_dir dir;
  float scalar = 2.5f;
  safetensors_writer writer(dir / "edge.safetensors");
  writer.add("empty", dtype::F32, {0, 4}, {});
  writer.add("scalar", dtype::F32, {}, std::as_bytes(std::span(&scalar, 1)));
  writer.add("also_empty", dtype::I64, {0}, {});
  writer.write();
  safetensors_file file(dir / "edge.safetensors");
  CHECK(file.at("empty").numel() == 0);
  CHECK(file.at("empty").byte_size() == 0);
  CHECK(file.at("scalar").shape.empty());
  CHECK(file.at("scalar").numel() == 1);
  float read = 0;
  std::memcpy(&read, file.bytes(file.at("scalar")).data(), 4);
  CHECK(read == 2.5f);
  CHECK_NOTHROW(file.verify());

  safetensors_writer nothing(dir / "nothing.safetensors", checksums::skip);
  nothing.write();
  CHECK(safetensors_file(dir / "nothing.safetensors").tensors().empty());
}

TEST_CASE("conversion on the way out, and metadata") {
  temp_dir dir;
  std::vector<float> values{1.0f, -2.0f, 0.5f, 3.0f};
  safetensors_writer writer(dir / "converted.safetensors");
  writer.add("w", dtype::F32, {2, 2}, std::as_bytes(std::span(values)), dtype::BF16);
  writer.set_metadata("format", "pt");
  writer.write();
  safetensors_file file(dir / "converted.safetensors");
  auto const& w = file.at("w");
  CHECK(w.dtype == dtype::BF16);
  CHECK(w.byte_size() == 8);
  std::vector<std::uint16_t> stored(4);
  std::memcpy(stored.data(), file.bytes(w).data(), 8);
  CHECK(stored == std::vector<std::uint16_t>{0x3f80, 0xc000, 0x3f00, 0x4040});
  CHECK(file.metadata().at("format") == "pt");
  CHECK_NOTHROW(file.verify()); // the checksum covers the stored bytes
}

TEST_CASE("a flipped byte is caught by the checksum, naming the file and the tensor") {
  temp_dir dir;
  auto data = pattern(1024, 1);
  safetensors_writer writer(dir / "c.safetensors");
  writer.add("good", dtype::U8, {1024}, data);
  writer.add("bad", dtype::U8, {1024}, data);
  writer.write();
  auto path = dir / "c.safetensors";
  auto offset = safetensors_file(path).at("bad").begin + 100;
  {
    auto size = std::filesystem::file_size(path);
    auto fd = open_file(path, O_RDWR);
    std::byte b{0x5a};
    pwrite_all(fd.get(), std::span(&b, 1), size - 2048 + offset, path);
  }
  safetensors_file file(path);
  CHECK_NOTHROW(file.verify(file.at("good")));
  CHECK_THROWS_WITH_AS(file.verify(),
                       (path.string() + ": tensor 'bad' is corrupt: its checksum does not match").c_str(), io_error);
  CHECK_KIND(file.verify(), cairn::io_errc::checksum_mismatch);
}

TEST_CASE("without checksums the file says so") {
  temp_dir dir;
  auto data = pattern(16, 1);
  safetensors_writer writer(dir / "n.safetensors", checksums::skip);
  writer.add("t", dtype::U8, {16}, data);
  writer.write();
  safetensors_file file(dir / "n.safetensors");
  CHECK_FALSE(file.has_checksums());
  CHECK_THROWS_WITH_AS(file.verify(), doctest::Contains("tensor 't' has no recorded checksum"), io_error);
}

TEST_CASE("a box of a stored tensor reads straight from the mapping") {
  temp_dir dir;
  std::vector<std::int32_t> values(4 * 6);
  std::iota(values.begin(), values.end(), 0);
  safetensors_writer writer(dir / "b.safetensors");
  writer.add("m", dtype::I32, {4, 6}, std::as_bytes(std::span(values)));
  writer.write();
  safetensors_file file(dir / "b.safetensors");
  std::vector<std::int32_t> out(4);
  file.read_box(file.at("m"), box{{1, 2}, {2, 2}}, std::as_writable_bytes(std::span(out)));
  CHECK(out == std::vector<std::int32_t>{8, 9, 14, 15});
  CHECK_THROWS_WITH_AS(file.read_box(file.at("m"), box{{3, 0}, {2, 1}}, std::as_writable_bytes(std::span(out))),
                       doctest::Contains("tensor 'm': box exceeds the tensor in dimension 0"), io_error);
}

TEST_CASE("tensors past 4 GiB are addressed with 64-bit offsets (a sparse file, nothing written)") {
  temp_dir dir;
  auto path = dir / "sparse.safetensors";
  std::uint64_t big = (std::uint64_t{5} << 30); // 5 GiB of U8 before the tail tensor
  std::string header = R"({"head":{"dtype":"U8","shape":[)" + std::to_string(big) + R"(],"data_offsets":[0,)" +
                       std::to_string(big) + R"(]},"tail":{"dtype":"I64","shape":[2],)" + R"("data_offsets":[)" +
                       std::to_string(big) + "," + std::to_string(big + 16) + "]}}";
  {
    auto fd = open_file(path, O_WRONLY | O_CREAT | O_TRUNC);
    std::uint64_t length = header.size();
    std::byte prefix[8];
    for (int i = 0; i < 8; ++i) prefix[i] = static_cast<std::byte>((length >> (8 * i)) & 0xff);
    write_all(fd.get(), prefix, path);
    write_all(fd.get(), std::as_bytes(std::span(header)), path);
    std::int64_t tail[2] = {42, -7};
    pwrite_all(fd.get(), std::as_bytes(std::span(tail)), 8 + header.size() + big, path);
  }
  safetensors_file file(path);
  auto const& tail = file.at("tail");
  CHECK(tail.begin == big);
  std::int64_t read[2];
  std::memcpy(read, file.bytes(tail).data(), 16);
  CHECK(read[0] == 42);
  CHECK(read[1] == -7);
  std::int64_t second = 0;
  file.read_box(tail, box{{1}, {1}}, std::as_writable_bytes(std::span(&second, 1)));
  CHECK(second == -7);
  CHECK(file.at("head").numel() == big);
}

TEST_CASE("the writer refuses what it cannot write correctly") {
  temp_dir dir;
  std::vector<float> values(4);
  safetensors_writer writer(dir / "x.safetensors");
  writer.add("a", dtype::F32, {4}, std::as_bytes(std::span(values)));
  CHECK_THROWS_WITH_AS(writer.add("a", dtype::F32, {4}, std::as_bytes(std::span(values))),
                       doctest::Contains("tensor 'a' added twice"), io_error);
  CHECK_THROWS_WITH_AS(writer.add("b", dtype::F32, {5}, std::as_bytes(std::span(values))),
                       doctest::Contains("tensor 'b': 16 bytes given for 5 elements of F32"), io_error);
  CHECK_THROWS_WITH_AS(writer.add("c", dtype::I32, {4}, std::as_bytes(std::span(values)), dtype::F32),
                       doctest::Contains("tensor 'c': cannot convert I32 to F32"), io_error);
  CHECK_KIND(writer.add("__metadata__", dtype::F32, {4}, std::as_bytes(std::span(values))),
             cairn::io_errc::invalid_argument);
  CHECK_KIND(writer.declare("d", dtype::U8, {std::uint64_t{1} << 63, 0}), cairn::io_errc::too_large);
}

TEST_CASE("the writer never writes a header its readers refuse") {
  temp_dir dir;
  std::vector<std::uint16_t> values{1, 2};
  safetensors_writer writer(dir / "big.safetensors");
  writer.add("u", dtype::U16, {2}, std::as_bytes(std::span(values)));
  writer.set_metadata("notes", std::string(max_header_size, 'n'));
  CHECK_THROWS_WITH_AS(writer.write(), doctest::Contains("bytes safetensors readers accept"), io_error);
  CHECK_KIND(writer.write(), cairn::io_errc::too_large);
  CHECK(std::filesystem::is_empty(dir.path)); // nothing written, not even a temporary file
  writer.set_metadata("notes", "short");
  writer.write();
  safetensors_file file(dir / "big.safetensors");
  CHECK(file.at("u").dtype == dtype::U16);
  CHECK(file.at("u").shape == std::vector<std::uint64_t>{2});
}

TEST_CASE("a streamed file (declared, then written one tensor at a time) equals one written whole") {
  temp_dir dir;
  auto a = pattern(4096, 1), b = pattern(24, 2);
  safetensors_writer whole(dir / "whole.safetensors");
  whole.add("a", dtype::F32, {32, 32}, a, dtype::BF16);
  whole.add("b", dtype::I64, {3}, b);
  whole.write();

  safetensors_writer streamed(dir / "streamed.safetensors");
  streamed.declare("a", dtype::F32, {32, 32}, dtype::BF16);
  streamed.declare("b", dtype::I64, {3});
  streamed.open();
  CHECK_FALSE(std::filesystem::exists(dir / "streamed.safetensors")); // nothing under the final name yet
  streamed.put("a", a);
  streamed.put("b", b);
  streamed.commit();
  std::ifstream x(dir / "whole.safetensors", std::ios::binary), y(dir / "streamed.safetensors", std::ios::binary);
  std::string left((std::istreambuf_iterator<char>(x)), {}), right((std::istreambuf_iterator<char>(y)), {});
  CHECK(left == right);
  safetensors_file file(dir / "streamed.safetensors");
  file.verify(file.at("a"));
  file.verify(file.at("b"));

  // Out of order, the wrong size, too late a declaration or a missing tensor: refused by name,
  // and no file is left under the final name.
  safetensors_writer broken(dir / "broken.safetensors");
  broken.declare("a", dtype::F32, {32, 32});
  broken.declare("b", dtype::I64, {3});
  broken.open();
  CHECK_THROWS_WITH_AS(broken.declare("c", dtype::I64, {3}),
                       doctest::Contains("'c' declared after the file was opened"), io_error);
  CHECK_THROWS_WITH_AS(broken.put("b", b), doctest::Contains("'b' written out of the declared order"), io_error);
  CHECK_THROWS_WITH_AS(broken.put("a", b), doctest::Contains("24 bytes given for 1024 elements of F32"), io_error);
  broken.put("a", a);
  CHECK_THROWS_WITH_AS(broken.commit(), doctest::Contains("'b' was declared but never written"), io_error);
  CHECK_FALSE(std::filesystem::exists(dir / "broken.safetensors"));
}

TEST_CASE("several writers of one file (each its part of the shared tensors) make the file one writer makes") {
  temp_dir dir;
  auto a = pattern(4096, 1), b = pattern(24, 2), c = pattern(1000, 3);
  safetensors_writer whole(dir / "whole.safetensors");
  whole.add("a", dtype::F32, {32, 32}, a, dtype::BF16);
  whole.add("b", dtype::I64, {3}, b);
  whole.add("c", dtype::U8, {1000}, c);
  whole.write();

  // Two writers, as two ranks: "a" and "c" split between them, "b" the opener's alone.
  auto declare = [](safetensors_writer& w) {
    w.declare_shared("a", dtype::F32, {32, 32}, dtype::BF16);
    w.declare("b", dtype::I64, {3});
    w.declare_shared("c", dtype::U8, {1000});
  };
  auto span = std::span<std::byte const>(a);
  safetensors_writer opener(dir / "shared.safetensors"), joiner(dir / "shared.safetensors");
  declare(opener);
  declare(joiner);
  opener.open_shared("save-1");
  joiner.join_shared("save-1");
  joiner.put_part("a", 700, span.subspan(700 * 4));
  opener.put_part("a", 0, span.first(700 * 4));
  opener.put("b", b);
  joiner.put_part("c", 0, std::span<std::byte const>(c).first(10));
  opener.put_part("c", 10, std::span<std::byte const>(c).subspan(10));
  CHECK_THROWS_WITH_AS(joiner.put_part("b", 0, b), doctest::Contains("'b' is not declared shared"), io_error);
  CHECK_THROWS_WITH_AS(joiner.put_part("c", 995, std::span<std::byte const>(c).first(10)),
                       doctest::Contains("10 bytes from element 995 do not fit its 1000 elements"), io_error);
  CHECK_THROWS_AS(joiner.commit(), io_error); // a joiner never commits
  joiner.release();
  CHECK_FALSE(std::filesystem::exists(dir / "shared.safetensors")); // nothing under the final name yet
  opener.commit();
  std::ifstream x(dir / "whole.safetensors", std::ios::binary), y(dir / "shared.safetensors", std::ios::binary);
  std::string left((std::istreambuf_iterator<char>(x)), {}), right((std::istreambuf_iterator<char>(y)), {});
  CHECK(left == right); // the checksums of the shared tensors included, read back from the file
  safetensors_file file(dir / "shared.safetensors");
  for (auto name : {"a", "b", "c"}) file.verify(file.at(name));
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path), {}) == 2); // no temporary left

  // An opener gone before its commit leaves nothing; a joiner then finds nothing to join, and a
  // token that could leave the directory is refused.
  {
    safetensors_writer gone(dir / "gone.safetensors");
    declare(gone);
    gone.open_shared("save-2");
  }
  safetensors_writer late(dir / "gone.safetensors");
  declare(late);
  CHECK_THROWS_AS(late.join_shared("save-2"), io_error);
  safetensors_writer odd(dir / "odd.safetensors");
  declare(odd);
  CHECK_THROWS_WITH_AS(odd.open_shared("../x"), doctest::Contains("must be plain"), io_error);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path), {}) == 2);
}

static_assert(std::is_nothrow_move_constructible_v<safetensors_writer>, "writers can be kept in containers");
