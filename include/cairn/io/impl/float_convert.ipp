// Definitions of <cairn/io/float_convert.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/error.hpp>
#include <cairn/io/dtype.hpp>
#include <cairn/io/float_convert.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace cairn::io::detail {

CAIRN_DECL double load_float(std::byte const* p, dtype t) noexcept {
  switch (t) {
  case dtype::F64: {
    double v;
    std::memcpy(&v, p, 8);
    return v;
  }
  case dtype::F32: {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  default: {
    std::uint16_t v;
    std::memcpy(&v, p, 2);
    return t == dtype::F16 ? half_to_float(v) : bfloat16_to_float(v);
  }
  }
}

CAIRN_DECL void store_float(std::byte* p, dtype t, double value) noexcept {
  switch (t) {
  case dtype::F64:
    std::memcpy(p, &value, 8);
    return;
  case dtype::F32: {
    auto v = static_cast<float>(value);
    std::memcpy(p, &v, 4);
    return;
  }
  default: {
    auto f = static_cast<float>(value);
    std::uint16_t v = t == dtype::F16 ? float_to_half(f) : float_to_bfloat16(f);
    std::memcpy(p, &v, 2);
  }
  }
}

} // namespace cairn::io::detail

namespace cairn::io {

CAIRN_DECL void convert(std::span<std::byte const> source, dtype from, std::span<std::byte> target, dtype to) {
  if (!convertible(from, to))
    throw error(io_errc::invalid_argument,
                "cannot convert " + std::string(name(from)) + " to " + std::string(name(to)));
  auto count = source.size() / size_of(from);
  if (source.size() % size_of(from) != 0 || target.size() != count * size_of(to))
    throw error(io_errc::invalid_argument, "conversion buffers do not hold whole elements of the same count");
  if (from == to) {
    std::memcpy(target.data(), source.data(), source.size());
    return;
  }
  auto in = size_of(from), out = size_of(to);
  if (from == dtype::F32 && to == dtype::BF16) { // the common case, without the double round trip
    for (std::size_t i = 0; i < count; ++i) {
      float v;
      std::memcpy(&v, source.data() + i * 4, 4);
      auto b = float_to_bfloat16(v);
      std::memcpy(target.data() + i * 2, &b, 2);
    }
    return;
  }
  for (std::size_t i = 0; i < count; ++i)
    detail::store_float(target.data() + i * out, to, detail::load_float(source.data() + i * in, from));
}

} // namespace cairn::io
