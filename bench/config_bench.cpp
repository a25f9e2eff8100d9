// Parse + validate time of a 200-field nested config, against Boost.JSON's own parse of the
// same text in the same run.
//
//     build/bin/cairn-bench-config [repetitions]
#include <cairn/config.hpp>

#include <boost/describe/class.hpp>
#include <boost/json/parse.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace bench {

// 20 fields of mixed types, each with a check.
struct block_config {
  std::int32_t a0 = 1, a1 = 2, a2 = 3, a3 = 4, a4 = 5;
  double b0 = 0.1, b1 = 0.2, b2 = 0.3, b3 = 0.4, b4 = 0.5;
  std::string c0 = "x", c1 = "y", c2 = "z", c3 = "w", c4 = "v";
  std::optional<std::int64_t> d0 = 10, d1 = 20, d2, d3 = 40, d4;
};
BOOST_DESCRIBE_STRUCT(block_config, (),
                      (a0, a1, a2, a3, a4, b0, b1, b2, b3, b4, c0, c1, c2, c3, c4, d0, d1, d2, d3, d4))

constexpr auto cairn_fields(block_config const*) {
  using namespace cairn;
  using b = block_config;
  return fields(field(&b::a0, "a0", hint::core, check::positive), field(&b::a1, "a1", hint::core, check::positive),
                field(&b::a2, "a2", hint::core, check::positive), field(&b::a3, "a3", hint::core, check::positive),
                field(&b::a4, "a4", hint::core, check::in_range(1, 100)),
                field(&b::b0, "b0", hint::core, check::in_range(0.0, 1.0)),
                field(&b::b1, "b1", hint::core, check::in_range(0.0, 1.0)),
                field(&b::b2, "b2", hint::core, check::in_range(0.0, 1.0)),
                field(&b::b3, "b3", hint::core, check::in_range(0.0, 1.0)),
                field(&b::b4, "b4", hint::core, check::in_range(0.0, 1.0)),
                field(&b::c0, "c0", hint::core, check::non_empty), field(&b::c1, "c1", hint::core, check::non_empty),
                field(&b::c2, "c2", hint::core, check::non_empty), field(&b::c3, "c3", hint::core, check::non_empty),
                field(&b::c4, "c4", hint::core, check::non_empty), field(&b::d0, "d0", hint::core, check::positive),
                field(&b::d1, "d1", hint::core, check::positive), field(&b::d2, "d2", hint::core, check::positive),
                field(&b::d3, "d3", hint::core, check::positive), field(&b::d4, "d4", hint::core, check::positive));
}

struct group_config {
  block_config first, second;
};
BOOST_DESCRIBE_STRUCT(group_config, (), (first, second))

// 5 groups of 2 blocks of 20 fields: 200 fields, three levels deep.
struct big_config {
  group_config g0, g1, g2, g3, g4;
};
BOOST_DESCRIBE_STRUCT(big_config, (), (g0, g1, g2, g3, g4))

} // namespace bench

namespace {

template <class F> double median_microseconds(int repetitions, F&& f) {
  std::vector<double> times;
  for (int i = 0; i < repetitions; ++i) {
    auto start = std::chrono::steady_clock::now();
    f();
    times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(times.begin(), times.begin() + repetitions / 2, times.end());
  return times[static_cast<std::size_t>(repetitions / 2)];
}

} // namespace

int main(int argc, char** argv) {
  int repetitions = argc > 1 ? std::atoi(argv[1]) : 2001;
  // Every field written, with values other than the defaults.
  bench::big_config reference;
  reference.g3.second.a4 = 42;
  reference.g1.first.c2 = "changed";
  auto text = cairn::detail::compact(cairn::to_json(reference));
  auto document = boost::json::parse(text);

  std::size_t sink = 0;
  double json_parse = median_microseconds(repetitions, [&] { sink += boost::json::parse(text).as_object().size(); });
  double from_value = median_microseconds(repetitions, [&] {
    auto config = cairn::from_json<bench::big_config>(document);
    sink += static_cast<std::size_t>(config.g3.second.a4);
  });
  double from_text = median_microseconds(repetitions, [&] {
    auto config = cairn::from_string<bench::big_config>(text);
    sink += static_cast<std::size_t>(config.g3.second.a4);
  });

  std::printf("config: 200 fields in 3 levels, %zu bytes of JSON, median of %d runs\n", text.size(), repetitions);
  std::printf("  boost::json::parse of the text (baseline)   %8.1f us\n", json_parse);
  std::printf("  parse + validate from a json::value         %8.1f us  (%.2fx the baseline)\n", from_value,
              from_value / json_parse);
  std::printf("  parse + validate from text                  %8.1f us  (%.2fx the baseline)\n", from_text,
              from_text / json_parse);
  return sink == 0 ? 1 : 0;
}
