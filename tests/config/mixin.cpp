// Configs composed from mixins; a path-less variant turned into the full config by copying
// the shared base subobjects.
#include <cairn/config.hpp>

#include <boost/describe/class.hpp>
#include <boost/describe/enum.hpp>
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <optional>

namespace {

BOOST_DEFINE_ENUM_CLASS(format_kind, distributed, state_dict, external)

struct path_mixin {
  std::filesystem::path path;
};
BOOST_DESCRIBE_STRUCT(path_mixin, (), (path))

struct format_mixin {
  format_kind format = format_kind::distributed;
};
BOOST_DESCRIBE_STRUCT(format_mixin, (), (format))

struct save_options_mixin {
  std::uint64_t parameters_per_file = std::uint64_t{1} << 32;
};
BOOST_DESCRIBE_STRUCT(save_options_mixin, (), (parameters_per_file))

constexpr auto cairn_fields(save_options_mixin const*) {
  using namespace cairn;
  return fields(field(&save_options_mixin::parameters_per_file, "Parameters per file.", hint::feature,
                      check::at_least(std::uint64_t{1} << 20)));
}

struct export_config : format_mixin, save_options_mixin {
  std::optional<std::int64_t> interval;
};
BOOST_DESCRIBE_STRUCT(export_config, (format_mixin, save_options_mixin), (interval))

struct save_config : path_mixin, format_mixin, save_options_mixin {};
BOOST_DESCRIBE_STRUCT(save_config, (path_mixin, format_mixin, save_options_mixin), ())

} // namespace

TEST_CASE("a config composed of mixins reads every mixin's fields and rules") {
  auto config = cairn::from_string<save_config>(R"({"path": "/x", "format": "state_dict"})");
  CHECK(config.path == "/x");
  CHECK(config.format == format_kind::state_dict);
  CHECK_THROWS_WITH_AS(cairn::from_string<save_config>(R"({"parameters_per_file": 5})"),
                       doctest::Contains("parameters_per_file: must be >= 1048576, got 5"), cairn::config_error);
}

TEST_CASE("the path-less variant becomes the full config by copying shared bases") {
  export_config exported;
  exported.format = format_kind::external;
  exported.parameters_per_file = 1 << 21;
  exported.interval = 10;
  save_config start;
  start.path = "/run/export/10";
  auto save = cairn::assign_shared_bases(start, exported);
  CHECK(save.path == "/run/export/10");
  CHECK(save.format == format_kind::external);
  CHECK(save.parameters_per_file == 1u << 21);
}
