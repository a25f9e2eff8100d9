// Reading a box out of a row-major tensor, checked against element-by-element indexing on
// random shapes and boxes.
#include <cairn/io/slice.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "../error_kind.hpp"

using cairn::io::box;

namespace {

std::vector<std::int32_t> naive(std::vector<std::int32_t> const& data, std::vector<std::uint64_t> const& shape,
                                box const& region) {
  std::vector<std::int32_t> out;
  auto rank = shape.size();
  std::vector<std::uint64_t> index(rank, 0);
  for (std::uint64_t n = 0; n < region.numel(); ++n) {
    std::uint64_t flat = 0;
    for (std::size_t d = 0; d < rank; ++d) flat = flat * shape[d] + region.offsets[d] + index[d];
    out.push_back(data[flat]);
    for (std::size_t d = rank; d-- > 0;) {
      if (++index[d] < region.lengths[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

} // namespace

TEST_CASE("random boxes of random tensors match element-by-element indexing") {
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 500; ++trial) {
    auto rank = static_cast<std::size_t>(random() % 5);
    std::vector<std::uint64_t> shape(rank);
    for (auto& d : shape) d = 1 + random() % 5;
    std::uint64_t numel = 1;
    for (auto d : shape) numel *= d;
    std::vector<std::int32_t> data(numel);
    std::iota(data.begin(), data.end(), 0);
    box region{std::vector<std::uint64_t>(rank), std::vector<std::uint64_t>(rank)};
    for (std::size_t d = 0; d < rank; ++d) {
      region.offsets[d] = random() % shape[d];
      region.lengths[d] = random() % (shape[d] - region.offsets[d] + 1);
    }
    std::vector<std::int32_t> out(region.numel());
    cairn::io::copy_box(std::as_bytes(std::span(data)), shape, 4, region, std::as_writable_bytes(std::span(out)));
    REQUIRE(out == naive(data, shape, region));
  }
}

TEST_CASE("a box outside the tensor or a wrong buffer is refused") {
  std::vector<std::int32_t> data(6), out(2);
  std::vector<std::uint64_t> shape{2, 3};
  auto bytes = std::as_bytes(std::span(data));
  auto target = std::as_writable_bytes(std::span(out));
  CHECK_THROWS_WITH_AS(cairn::io::copy_box(bytes, shape, 4, box{{0, 2}, {1, 2}}, target),
                       "box exceeds the tensor in dimension 1", cairn::error);
  CHECK_THROWS_WITH_AS(cairn::io::copy_box(bytes, shape, 4, box{{0}, {1}}, target),
                       "box of rank 1 for a tensor of rank 2", cairn::error);
  CHECK_THROWS_WITH_AS(cairn::io::copy_box(bytes, shape, 4, box{{0, 0}, {1, 1}}, target),
                       "target buffer size does not match the box", cairn::error);
  CHECK_KIND(cairn::io::copy_box(bytes, shape, 4, box{{0, 2}, {1, 2}}, target), cairn::io_errc::invalid_argument);
}
