// Interval arithmetic: firing, counting, sub-intervals, offsets reduced at validation.
#include <cairn/config.hpp>
#include <cairn/training/interval.hpp>

#include <doctest/doctest.h>

namespace {

cairn::interval_config every(std::int64_t interval, std::int64_t offset = 0) {
  cairn::interval_config config;
  config.interval = interval;
  config.offset = offset;
  cairn::validate(config);
  return config;
}

} // namespace

TEST_CASE("an unset interval is disabled everywhere") {
  cairn::interval_config off;
  CHECK_FALSE(off.enabled());
  CHECK_FALSE(off.enabled(0));
  CHECK_FALSE(off.enabled(100));
  CHECK(off.count(1000) == 0);
  CHECK(off.describe() == "(disabled)");
}

TEST_CASE("firings and counts") {
  auto config = every(10, 3);
  CHECK(config.enabled());
  CHECK_FALSE(config.enabled(0));
  CHECK(config.enabled(3));
  CHECK_FALSE(config.enabled(10));
  CHECK(config.enabled(13));
  CHECK(config.enabled(103));
  CHECK(config.count(2) == 0);
  CHECK(config.count(3) == 1);
  CHECK(config.count(12) == 1);
  CHECK(config.count(13) == 2);
  CHECK(config.count(103) == 11);
}

TEST_CASE("an offset larger than the interval is reduced modulo it at validation") {
  auto config = cairn::from_string<cairn::interval_config>(R"({"interval": 10, "offset": 25})");
  CHECK(config.offset == 5);
  CHECK(config.enabled(5));
  CHECK(config.enabled(25));
  CHECK_FALSE(config.enabled(20));
}

TEST_CASE("a negative offset or a non-positive interval is refused") {
  CHECK_THROWS_WITH_AS(cairn::from_string<cairn::interval_config>(R"({"interval": 0})"),
                       "1 config error:\n  interval: must be > 0, got 0", cairn::config_error);
  CHECK_THROWS_WITH_AS(cairn::from_string<cairn::interval_config>(R"({"interval": 5, "offset": -1})"),
                       "1 config error:\n  offset: must be >= 0, got -1", cairn::config_error);
}

TEST_CASE("sub-intervals: every firing of one is a firing of the other") {
  CHECK(every(20).is_sub_interval(every(10)));
  CHECK_FALSE(every(10).is_sub_interval(every(20)));
  CHECK_FALSE(every(15).is_sub_interval(every(10)));
  CHECK(every(10).is_sub_interval(every(10)));
  // Offsets must agree modulo the coarser-grained interval.
  CHECK(every(20, 5).is_sub_interval(every(10, 5)));
  CHECK(every(20, 15).is_sub_interval(every(10, 5)));
  CHECK_FALSE(every(20, 0).is_sub_interval(every(10, 5)));
  CHECK_FALSE(every(20, 5).is_sub_interval(every(10, 0)));
  // A disabled interval fires never, so it is a sub-interval of anything; nothing enabled
  // is a sub-interval of a disabled one.
  cairn::interval_config off;
  CHECK(off.is_sub_interval(every(10)));
  CHECK(off.is_sub_interval(off));
  CHECK_FALSE(every(10).is_sub_interval(off));
}

TEST_CASE("sub-interval checks hold by brute force over many iterations") {
  for (std::int64_t a = 1; a <= 12; ++a)
    for (std::int64_t oa = 0; oa < a; ++oa)
      for (std::int64_t b = 1; b <= 12; ++b)
        for (std::int64_t ob = 0; ob < b; ++ob) {
          auto x = every(a, oa), y = every(b, ob);
          bool brute = true;
          for (std::int64_t i = 0; i < 300; ++i)
            if (x.enabled(i) && !y.enabled(i)) brute = false;
          CHECK_MESSAGE(x.is_sub_interval(y) == brute, a, "/", oa, " vs ", b, "/", ob);
        }
}

TEST_CASE("the problem of a bad sub-interval names both intervals") {
  CHECK(every(15).sub_interval_problem(every(10), "shutdown", "checkpoint") ==
        "shutdown (every 15 iterations from 0) is not a sub-interval of checkpoint (every 10 iterations from 0): "
        "every shutdown must fall on a checkpoint");
  CHECK_FALSE(every(20).sub_interval_problem(every(10), "shutdown", "checkpoint").has_value());
}
