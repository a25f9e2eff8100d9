// Every supported value type, read and written, and a user-defined one.
#include <boost/json.hpp> // these tests are built with CAIRN_SEPARATE_COMPILATION: cairn only declares JSON types
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <string>

#include "fixtures.hpp"

namespace {

struct all_types {
  bool flag = false;
  std::int8_t tiny = 0;
  std::int32_t medium = 0;
  std::int64_t big = 0;
  std::uint16_t port = 0;
  std::uint64_t huge = 0;
  float ratio = 0;
  double precise = 0;
  std::string text;
  std::filesystem::path file;
  fixture::optimizer_kind kind = fixture::optimizer_kind::adam;
  std::optional<std::int64_t> maybe;
  std::vector<std::string> list;
  std::map<std::string, std::int32_t> table;
  fixture::model_config nested;
  std::optional<fixture::model_config> maybe_nested;
  std::vector<fixture::model_config> nested_list;
};
BOOST_DESCRIBE_STRUCT(all_types, (),
                      (flag, tiny, medium, big, port, huge, ratio, precise, text, file, kind, maybe, list, table,
                       nested, maybe_nested, nested_list))

// A user-defined type: a size written as a string with a unit.
struct byte_size {
  std::uint64_t bytes = 0;
  friend bool operator==(byte_size, byte_size) = default;
};

struct storage_config {
  byte_size budget{1024};
};
BOOST_DESCRIBE_STRUCT(storage_config, (), (budget))

std::vector<std::string> error_texts(cairn::config_error const& e) {
  std::vector<std::string> texts;
  for (auto const& d : e.errors()) texts.push_back(d.to_string());
  return texts;
}

template <class T> std::vector<std::string> errors_of(std::string_view json) {
  try {
    cairn::parse<T>(cairn::parse_json(json));
  } catch (cairn::config_error const& e) {
    return error_texts(e);
  }
  return {};
}

} // namespace

template <> struct cairn::value_traits<byte_size> {
  static constexpr bool textual = true;
  static void read(boost::json::value const& j, byte_size& v, read_context& ctx) {
    if (!j.is_string()) return ctx.error("expected a size such as \"4KiB\"");
    std::string text(j.get_string());
    std::size_t used = 0;
    auto number = std::stoull(text, &used);
    auto unit = text.substr(used);
    if (unit == "KiB")
      v.bytes = number << 10;
    else if (unit == "MiB")
      v.bytes = number << 20;
    else if (unit.empty() || unit == "B")
      v.bytes = number;
    else
      ctx.error("unknown unit '" + unit + "'");
  }
  static boost::json::value write(byte_size v) { return boost::json::string(std::to_string(v.bytes) + "B"); }
  static std::string type_name() { return "size"; }
  static void schema(boost::json::object& s) { s["type"] = "string"; }
};

TEST_CASE("every type reads and writes back equal") {
  auto json = cairn::parse_json(R"({
    "flag": true, "tiny": -128, "medium": 2147483647, "big": -9223372036854775808, "port": 65535,
    "huge": 18446744073709551615, "ratio": 0.5, "precise": 1e-300, "text": "héllo \"quoted\"",
    "file": "/data/run 1/x.json", "kind": "sgd", "maybe": 7, "list": ["a", "b"], "table": {"x": 1, "y.z": 2},
    "nested": {"hidden_size": 8, "layers": 3, "dropout": 0.25}, "maybe_nested": {"layers": 4},
    "nested_list": [{"hidden_size": 1}, {"hidden_size": 2}]
  })");
  auto config = cairn::parse<all_types>(json);
  CHECK(config.flag);
  CHECK(config.tiny == -128);
  CHECK(config.medium == 2147483647);
  CHECK(config.big == std::numeric_limits<std::int64_t>::min());
  CHECK(config.port == 65535);
  CHECK(config.huge == std::numeric_limits<std::uint64_t>::max());
  CHECK(config.ratio == 0.5f);
  CHECK(config.precise == 1e-300);
  CHECK(config.text == "héllo \"quoted\"");
  CHECK(config.file == std::filesystem::path("/data/run 1/x.json"));
  CHECK(config.kind == fixture::optimizer_kind::sgd);
  CHECK(config.maybe == 7);
  CHECK(config.list == std::vector<std::string>{"a", "b"});
  CHECK(config.table == std::map<std::string, std::int32_t>{{"x", 1}, {"y.z", 2}});
  CHECK(config.nested.layers == 3);
  REQUIRE(config.maybe_nested.has_value());
  CHECK(config.maybe_nested->layers == 4);
  CHECK(config.maybe_nested->hidden_size == 64); // unset keys keep their defaults
  REQUIRE(config.nested_list.size() == 2);
  CHECK(config.nested_list[1].hidden_size == 2);

  auto again = cairn::parse<all_types>(cairn::to_json(config));
  CHECK(cairn::compare(config, again).empty());
  CHECK(cairn::to_json(again) == cairn::to_json(config));
  // And through text, as a file would hold it.
  auto text = cairn::to_string(config);
  CHECK(cairn::to_json(cairn::parse<all_types>(cairn::parse_json(text))) == cairn::to_json(config));
}

TEST_CASE("null unsets an optional") {
  auto config = cairn::parse<all_types>(cairn::parse_json(R"({"maybe": null, "maybe_nested": null})"));
  CHECK_FALSE(config.maybe.has_value());
  CHECK_FALSE(config.maybe_nested.has_value());
  CHECK(cairn::to_json(config).at("maybe").is_null());
}

TEST_CASE("integers are range-checked, never wrapped") {
  CHECK(errors_of<all_types>(R"({"medium": 3e9})") ==
        std::vector<std::string>{"medium: 3000000000 is out of range for int32 [-2147483648, 2147483647]"});
  CHECK(errors_of<all_types>(R"({"tiny": 128})") ==
        std::vector<std::string>{"tiny: 128 is out of range for int8 [-128, 127]"});
  CHECK(errors_of<all_types>(R"({"port": -1})") ==
        std::vector<std::string>{"port: -1 is out of range for uint16 [0, 65535]"});
  CHECK(errors_of<all_types>(R"({"big": 18446744073709551615})") ==
        std::vector<std::string>{
            "big: 18446744073709551615 is out of range for int64 [-9223372036854775808, 9223372036854775807]"});
  CHECK(errors_of<all_types>(R"({"medium": 1.5})") ==
        std::vector<std::string>{"medium: expected an integer, got number 1.5"});
  // An integral double is an integer.
  CHECK(cairn::parse<all_types>(cairn::parse_json(R"({"medium": 2e3})")).medium == 2000);
}

TEST_CASE("integer bounds are exact at both ends of every width") {
  auto read = [](char const* text) { return cairn::parse<all_types>(cairn::parse_json(text)); };
  CHECK(read(R"({"tiny": -128.0})").tiny == -128);
  CHECK(read(R"({"tiny": 127})").tiny == 127);
  CHECK(read(R"({"port": -0.0})").port == 0);
  CHECK(read(R"({"big": -9223372036854775808.0})").big == std::numeric_limits<std::int64_t>::min());
  CHECK(read(R"({"big": 9223372036854775807})").big == std::numeric_limits<std::int64_t>::max());
  CHECK(read(R"({"medium": -2147483648})").medium == std::numeric_limits<std::int32_t>::min());
  CHECK(errors_of<all_types>(R"({"tiny": -129})") ==
        std::vector<std::string>{"tiny: -129 is out of range for int8 [-128, 127]"});
  CHECK(errors_of<all_types>(R"({"huge": -1})") ==
        std::vector<std::string>{"huge: -1 is out of range for uint64 [0, 18446744073709551615]"});
  CHECK(errors_of<all_types>(R"({"huge": 1e20})") ==
        std::vector<std::string>{"huge: 1e+20 is out of range for uint64 [0, 18446744073709551615]"});
  CHECK(errors_of<all_types>(R"({"big": 9223372036854775808})") ==
        std::vector<std::string>{
            "big: 9223372036854775808 is out of range for int64 [-9223372036854775808, 9223372036854775807]"});
  CHECK(errors_of<all_types>(R"({"medium": -2147483649})") ==
        std::vector<std::string>{"medium: -2147483649 is out of range for int32 [-2147483648, 2147483647]"});
}

TEST_CASE("floating-point values must be finite and fit their type") {
  auto errors = errors_of<all_types>(R"({"precise": 1e999, "ratio": 1e39})");
  REQUIRE(errors.size() == 2);
  std::sort(errors.begin(), errors.end());
  CHECK(errors[0].starts_with("precise: must be a finite number"));
  CHECK(errors[1].starts_with("ratio: "));
  CHECK(errors[1].find("out of range for float32") != std::string::npos);
  CHECK(errors_of<all_types>(R"({"precise": -1.7976931348623157e308, "ratio": 3.4e38})").empty());
  // An override is read the same way, so `key=1e999` is refused too.
  CHECK_THROWS_WITH_AS(cairn::from_json<all_types>(boost::json::object{}, {"precise=1e999"}),
                       doctest::Contains("precise: must be a finite number"), cairn::config_error);
}

TEST_CASE("type mismatches name the path and what was found") {
  CHECK(errors_of<all_types>(R"({"flag": 1})") == std::vector<std::string>{"flag: expected a boolean, got number 1"});
  CHECK(errors_of<all_types>(R"({"text": false})") == std::vector<std::string>{"text: expected a string, got false"});
  CHECK(errors_of<all_types>(R"({"ratio": "fast"})") ==
        std::vector<std::string>{"ratio: expected a number, got string \"fast\""});
  CHECK(errors_of<all_types>(R"({"kind": "lamb"})") ==
        std::vector<std::string>{"kind: must be one of adam, sgd, got \"lamb\""});
  CHECK(errors_of<all_types>(R"({"list": ["a", 2]})") ==
        std::vector<std::string>{"list[1]: expected a string, got number 2"});
  CHECK(errors_of<all_types>(R"({"table": {"k": "v"}})") ==
        std::vector<std::string>{"table.k: expected an integer, got string \"v\""});
  CHECK(errors_of<all_types>(R"({"nested_list": [{}, {"layers": "x"}]})") ==
        std::vector<std::string>{"nested_list[1].layers: expected an integer, got string \"x\""});
  CHECK(errors_of<all_types>(R"({"nested": []})") ==
        std::vector<std::string>{"nested: expected an object (model_config), got an array"});
  CHECK(errors_of<all_types>(R"([])") == std::vector<std::string>{"expected an object (all_types), got an array"});
}

TEST_CASE("a user-defined type plugs in through value_traits") {
  auto config = cairn::from_string<storage_config>(R"({"budget": "4KiB"})");
  CHECK(config.budget.bytes == 4096);
  CHECK(cairn::to_json(config).at("budget") == "4096B");
  CHECK(errors_of<storage_config>(R"({"budget": "4XB"})") == std::vector<std::string>{"budget: unknown unit 'XB'"});
  // Textual: an override takes the value verbatim.
  CHECK(cairn::from_string<storage_config>("{}", {"budget=2MiB"}).budget.bytes == 2u << 20);
  CHECK(cairn::document<storage_config>().find("budget: size = \"1024B\"") != std::string::npos);
}
