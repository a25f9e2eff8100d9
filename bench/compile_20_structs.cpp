// The compile-time benchmark's translation unit: cairn/config.hpp, 20 described structs, and
// a program that parses, validates, writes and documents them.
#include <cairn/config.hpp>

#include <boost/describe/class.hpp>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#define BENCH_STRUCT(name)                                                                                             \
  struct name {                                                                                                        \
    std::int32_t count = 1;                                                                                            \
    double rate = 0.5;                                                                                                 \
    std::string label = #name;                                                                                         \
    std::optional<std::int64_t> interval;                                                                              \
    std::vector<std::int32_t> sizes{1, 2};                                                                             \
  };                                                                                                                   \
  BOOST_DESCRIBE_STRUCT(name, (), (count, rate, label, interval, sizes))                                               \
  constexpr auto cairn_fields(name const*) {                                                                           \
    using namespace cairn;                                                                                             \
    return fields(field(&name::count, "Count.", hint::core, check::positive),                                          \
                  field(&name::rate, "Rate.", hint::feature, check::in_range(0.0, 1.0)),                               \
                  field(&name::label, "Label.", hint::optional, check::non_empty),                                     \
                  field(&name::interval, "Interval.", hint::feature, check::positive),                                 \
                  field(&name::sizes, "Sizes.", hint::expert, check::non_empty));                                      \
  }

BENCH_STRUCT(s00)
BENCH_STRUCT(s01)
BENCH_STRUCT(s02)
BENCH_STRUCT(s03)
BENCH_STRUCT(s04)
BENCH_STRUCT(s05)
BENCH_STRUCT(s06)
BENCH_STRUCT(s07)
BENCH_STRUCT(s08)
BENCH_STRUCT(s09)
BENCH_STRUCT(s10)
BENCH_STRUCT(s11)
BENCH_STRUCT(s12)
BENCH_STRUCT(s13)
BENCH_STRUCT(s14)
BENCH_STRUCT(s15)
BENCH_STRUCT(s16)
BENCH_STRUCT(s17)
BENCH_STRUCT(s18)

struct s19 {
  s00 a0;
  s01 a1;
  s02 a2;
  s03 a3;
  s04 a4;
  s05 a5;
  s06 a6;
  s07 a7;
  s08 a8;
  s09 a9;
  s10 a10;
  s11 a11;
  s12 a12;
  s13 a13;
  s14 a14;
  s15 a15;
  s16 a16;
  s17 a17;
  s18 a18;
};
BOOST_DESCRIBE_STRUCT(s19, (), (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18))

int main(int argc, char** argv) {
  std::vector<std::string> overrides(argv + 1, argv + argc);
  auto config = cairn::from_string<s19>("{}", overrides);
  std::fputs(cairn::to_string(config, cairn::output::changed).c_str(), stdout);
  std::fputs(cairn::document<s19>().c_str(), stdout);
  return 0;
}
