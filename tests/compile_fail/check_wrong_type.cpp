// A numeric check on a string field must not compile.
#include <cairn/config.hpp>

#include <boost/describe/class.hpp>

#include <string>

struct named_config {
  std::string name;
};
BOOST_DESCRIBE_STRUCT(named_config, (), (name))

constexpr auto cairn_fields(named_config const*) {
#ifdef CAIRN_EXPECT_FAILURE
  return cairn::fields(cairn::field(&named_config::name, "A name.", cairn::hint::core, cairn::check::positive));
#else
  return cairn::fields(cairn::field(&named_config::name, "A name.", cairn::hint::core, cairn::check::non_empty));
#endif
}

int main() {
  named_config config{"x"};
  cairn::validate(config);
  return 0;
}
