// Definitions of <cairn/io/slice.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/error.hpp>
#include <cairn/io/slice.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace cairn::io {

CAIRN_DECL std::uint64_t box::numel() const noexcept {
  std::uint64_t n = 1;
  for (auto l : lengths) n *= l;
  return n;
}

CAIRN_DECL void copy_box(std::span<std::byte const> source, std::span<std::uint64_t const> shape,
                         std::size_t element_size, box const& region, std::span<std::byte> target) {
  auto rank = shape.size();
  if (region.offsets.size() != region.lengths.size())
    throw error(io_errc::invalid_argument, "box of " + std::to_string(region.offsets.size()) + " offsets and " +
                                               std::to_string(region.lengths.size()) + " lengths");
  if (region.offsets.size() != rank)
    throw error(io_errc::invalid_argument, "box of rank " + std::to_string(region.offsets.size()) +
                                               " for a tensor of rank " + std::to_string(rank));
  for (std::size_t d = 0; d < rank; ++d)
    if (region.offsets[d] > shape[d] || region.lengths[d] > shape[d] - region.offsets[d])
      throw error(io_errc::invalid_argument, "box exceeds the tensor in dimension " + std::to_string(d));
  if (target.size() != region.numel() * element_size)
    throw error(io_errc::invalid_argument, "target buffer size does not match the box");
  if (target.empty()) return;

  // Row-major strides in elements, and the innermost run that is contiguous in both.
  std::vector<std::uint64_t> stride(rank, 1);
  for (std::size_t d = rank; d-- > 1;) stride[d - 1] = stride[d] * shape[d];
  std::size_t inner = rank; // dimensions [inner, rank) are copied as one run
  std::uint64_t run = 1;
  while (inner > 0) {
    run *= region.lengths[inner - 1];
    --inner;
    if (region.lengths[inner] != shape[inner]) break;
  }
  if (rank == 0) {
    std::memcpy(target.data(), source.data(), element_size);
    return;
  }
  std::vector<std::uint64_t> index(inner, 0);
  std::size_t run_bytes = run * element_size;
  for (std::size_t out = 0; out < target.size(); out += run_bytes) {
    std::uint64_t start = 0;
    for (std::size_t d = 0; d < inner; ++d) start += (region.offsets[d] + index[d]) * stride[d];
    start += region.offsets[inner] * stride[inner];
    std::memcpy(target.data() + out, source.data() + start * element_size, run_bytes);
    for (std::size_t d = inner; d-- > 0;) {
      if (++index[d] < region.lengths[d]) break;
      index[d] = 0;
    }
  }
}

} // namespace cairn::io
