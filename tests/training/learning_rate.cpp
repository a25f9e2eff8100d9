// The learning-rate schedule: a linear warmup, then constant, linear or cosine decay to a minimum,
// each in iterations of its own; checked against the formulas written out here.
#include <cairn/config.hpp>
#include <cairn/training/learning_rate.hpp>

#include <boost/json/value.hpp>
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

cairn::learning_rate_config schedule(boost::json::object given) {
  return cairn::from_json<cairn::learning_rate_config>(boost::json::value(std::move(given)));
}

} // namespace

TEST_CASE("a linear warmup from 0 to base, then the base rate when it does not decay") {
  auto s = schedule({{"base", 0.1}, {"warmup_iterations", 4}});
  CHECK(s.at(1) == doctest::Approx(0.025));
  CHECK(s.at(2) == doctest::Approx(0.05));
  CHECK(s.at(4) == 0.1);
  CHECK(s.at(5) == 0.1);
  CHECK(s.at(100000) == 0.1);
  CHECK(schedule({}).at(1) == 1e-3); // no warmup, constant: the base from the first iteration
}

TEST_CASE("linear and cosine decay over their own iterations after the warmup, then the minimum") {
  double const base = 0.1, minimum = 0.01;
  auto linear = schedule({{"base", base},
                          {"warmup_iterations", 10},
                          {"decay", "linear"},
                          {"decay_iterations", 100},
                          {"minimum", minimum}});
  auto cosine = schedule({{"base", base},
                          {"warmup_iterations", 10},
                          {"decay", "cosine"},
                          {"decay_iterations", 100},
                          {"minimum", minimum}});
  for (int it : {11, 35, 60, 85, 110}) {
    double t = (it - 10) / 100.0;
    CAPTURE(it);
    CHECK(linear.at(it) == doctest::Approx(minimum + (base - minimum) * (1 - t)));
    CHECK(cosine.at(it) == doctest::Approx(minimum + (base - minimum) * (1 + std::cos(M_PI * t)) / 2));
  }
  CHECK(cosine.at(60) == doctest::Approx((base + minimum) / 2)); // half way: the middle
  CHECK(linear.at(110) == doctest::Approx(minimum));
  for (int it : {111, 200, 1000000}) {
    CHECK(linear.at(it) == minimum);
    CHECK(cosine.at(it) == minimum);
  }
  // Its own count: the curve does not depend on how long the run is (train_iters is not an input).
  CHECK(cosine.at(10) == base);
}

TEST_CASE("a schedule that cannot be is refused, naming the key") {
  auto errors = [](boost::json::object given) {
    std::vector<std::string> out;
    try {
      (void)schedule(std::move(given));
    } catch (cairn::config_error const& e) {
      for (auto const& d : e.errors()) out.push_back(d.path + ": " + d.message);
    }
    return out;
  };
  auto no_length = errors({{"decay", "cosine"}});
  REQUIRE(no_length.size() == 1);
  CHECK(no_length[0].starts_with("decay_iterations: must be > 0 when decay is linear or cosine"));
  auto above = errors({{"base", 0.1}, {"minimum", 0.2}});
  REQUIRE(above.size() == 1);
  CHECK(above[0].starts_with("minimum: must be at most base"));
  auto style = errors({{"decay", "exponential"}});
  REQUIRE(style.size() == 1);
  CHECK(style[0].starts_with("decay:"));
  auto negative = errors({{"warmup_iterations", -1}});
  REQUIRE(negative.size() == 1);
  CHECK(negative[0].starts_with("warmup_iterations:"));
}
