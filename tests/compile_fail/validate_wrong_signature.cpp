// A config's `validate` of a form cairn does not call (here, returning bool) must not compile:
// it would be skipped silently. `void validate(cairn::validation&) const` is one it calls.
#include <cairn/config.hpp>

#include <boost/describe/class.hpp>

struct rate_config {
  double rate = 0.1;
#ifdef CAIRN_EXPECT_FAILURE
  bool validate(cairn::validation&) const { return rate > 0; }
#else
  void validate(cairn::validation& v) const {
    if (!(rate > 0)) v.error("rate", "must be > 0");
  }
#endif
};
BOOST_DESCRIBE_STRUCT(rate_config, (), (rate))

constexpr auto cairn_fields(rate_config const*) {
  return cairn::fields(cairn::field(&rate_config::rate, "A rate.", cairn::hint::core));
}

int main() {
  rate_config config{-1};
  try {
    cairn::validate(config);
  } catch (cairn::config_error const&) {
    return 0; // the const validate ran
  }
  return 1;
}
