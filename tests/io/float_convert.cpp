// Element type conversions on the way out: exact where they can be, round-to-nearest-even
// where they cannot.
#include <cairn/io/float_convert.hpp>

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using namespace cairn::io;

TEST_CASE("every half and bfloat16 value survives a round trip through float") {
  for (std::uint32_t i = 0; i <= 0xffff; ++i) {
    auto bits = static_cast<std::uint16_t>(i);
    float h = half_to_float(bits);
    float b = bfloat16_to_float(bits);
    if (std::isnan(h))
      CHECK(std::isnan(half_to_float(float_to_half(h))));
    else
      REQUIRE(float_to_half(h) == bits);
    if (std::isnan(b))
      CHECK(std::isnan(bfloat16_to_float(float_to_bfloat16(b))));
    else
      REQUIRE(float_to_bfloat16(b) == bits);
  }
}

TEST_CASE("known half values") {
  CHECK(float_to_half(1.0f) == 0x3c00);
  CHECK(float_to_half(-2.0f) == 0xc000);
  CHECK(float_to_half(65504.0f) == 0x7bff);                     // largest finite
  CHECK(float_to_half(65520.0f) == 0x7c00);                     // rounds to infinity
  CHECK(float_to_half(std::ldexp(1.0f, -24)) == 0x0001);        // smallest subnormal
  CHECK(float_to_half(std::ldexp(1.0f, -25)) == 0x0000);        // halfway to it: ties to even, zero
  CHECK(float_to_half(std::ldexp(1.5f, -25)) == 0x0001);        // above halfway: rounds up
  CHECK(float_to_half(1.0f + std::ldexp(1.0f, -11)) == 0x3c00); // tie between 1 and the next: even
  CHECK(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  CHECK(half_to_float(0x3555) == doctest::Approx(0.333251953125));
}

TEST_CASE("known bfloat16 values") {
  CHECK(float_to_bfloat16(1.0f) == 0x3f80);
  CHECK(float_to_bfloat16(std::bit_cast<float>(0x3f808000u)) == 0x3f80); // tie: to even
  CHECK(float_to_bfloat16(std::bit_cast<float>(0x3f818000u)) == 0x3f82); // tie: to even, up
  CHECK(float_to_bfloat16(std::bit_cast<float>(0x3f808001u)) == 0x3f81); // above the tie
  CHECK(float_to_bfloat16(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(std::isnan(bfloat16_to_float(float_to_bfloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("buffer conversion between the floating types") {
  std::vector<double> source{1.0, -0.5, 3.0e38, 1.0e-3};
  std::vector<float> as_float(4);
  convert(std::as_bytes(std::span(source)), dtype::F64, std::as_writable_bytes(std::span(as_float)), dtype::F32);
  CHECK(as_float == std::vector<float>{1.0f, -0.5f, 3.0e38f, 1.0e-3f});
  std::vector<std::uint16_t> as_bf16(4);
  convert(std::as_bytes(std::span(as_float)), dtype::F32, std::as_writable_bytes(std::span(as_bf16)), dtype::BF16);
  CHECK(as_bf16[0] == 0x3f80);
  std::vector<std::uint16_t> as_half(4);
  convert(std::as_bytes(std::span(as_bf16)), dtype::BF16, std::as_writable_bytes(std::span(as_half)), dtype::F16);
  CHECK(as_half[0] == 0x3c00);
  CHECK(as_half[1] == 0xb800);
  CHECK(as_half[2] == 0x7c00); // 3e38 overflows half
}

TEST_CASE("conversions that make no sense are refused") {
  CHECK_FALSE(convertible(dtype::I32, dtype::F32));
  CHECK_FALSE(convertible(dtype::F32, dtype::F8_E4M3));
  CHECK(convertible(dtype::I32, dtype::I32));
  std::vector<std::int32_t> ints{1};
  std::vector<float> out(1);
  CHECK_THROWS_WITH_AS(
      convert(std::as_bytes(std::span(ints)), dtype::I32, std::as_writable_bytes(std::span(out)), dtype::F32),
      "cannot convert I32 to F32", cairn::error);
}
