#pragma once

#include <cairn/detail/decl.hpp>
#include <cairn/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace cairn::io {

/// A box inside a tensor: an offset and a length per dimension.
struct box {
  std::vector<std::uint64_t> offsets;
  std::vector<std::uint64_t> lengths;

  [[nodiscard]] CAIRN_DECL std::uint64_t numel() const noexcept;
};

/// Copies `region` of a row-major tensor of `shape` (elements of `element_size` bytes, all in
/// `source`) into `target`, densely, row-major. Contiguous runs are copied whole.
CAIRN_DECL void copy_box(std::span<std::byte const> source, std::span<std::uint64_t const> shape,
                         std::size_t element_size, box const& region, std::span<std::byte> target);

} // namespace cairn::io

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/io/impl/slice.ipp>
#endif
