// Reading configs from JSON values, text and files; writing all fields or only changes.
#include <boost/json.hpp> // these tests are built with CAIRN_SEPARATE_COMPILATION: cairn only declares JSON types
#include <doctest/doctest.h>

#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

#include "fixtures.hpp"
#include "io/temp_dir.hpp"

namespace {

struct temp_file {
  std::filesystem::path path;
  explicit temp_file(std::string const& content) {
    path = std::filesystem::temp_directory_path() / ("cairn_json_io_" + std::to_string(::getpid()) + ".json");
    std::ofstream(path) << content;
  }
  temp_file(temp_file const&) = delete;
  temp_file& operator=(temp_file const&) = delete;
  ~temp_file() { std::filesystem::remove(path); }
};

std::string message_of(auto&& action) {
  try {
    action();
  } catch (cairn::config_error const& e) {
    return e.what();
  }
  return "no error";
}

} // namespace

TEST_CASE("unknown keys are errors by default, naming the key and a likely fix") {
  auto text = message_of(
      [] { cairn::from_string<fixture::trainer_config>(R"({"model": {"hiden_size": 3}, "optimiser": {}})"); });
  CHECK(text == "2 config errors:\n"
                "  model.hiden_size: unknown key in model_config; did you mean 'hidden_size'?\n"
                "  optimiser: unknown key in trainer_config; did you mean 'optimizer'?");
}

TEST_CASE("lenient parsing collects unknown keys instead") {
  auto result = cairn::parse_lenient<fixture::trainer_config>(
      cairn::parse_json(R"({"seed": 7, "wandb": {"project": "x"}, "model": {"hiden_size": 3, "layers": 5}})"));
  CHECK(result.config.seed == 7);
  CHECK(result.config.model.layers == 5);
  CHECK(result.unknown_keys == std::vector<std::string>{"model.hiden_size", "wandb"});
  // Type errors are still errors.
  CHECK_THROWS_AS(cairn::parse_lenient<fixture::trainer_config>(cairn::parse_json(R"({"seed": "x"})")),
                  cairn::config_error);
}

TEST_CASE("parse reads without validating; validate is a later phase") {
  auto config = cairn::parse<fixture::trainer_config>(cairn::parse_json(R"({"logs": {"interval": 0}})"));
  CHECK(config.logs.interval == 0);
  CHECK_THROWS_WITH_AS(cairn::validate(config), doctest::Contains("logs.interval: must be > 0, got 0"),
                       cairn::config_error);
}

TEST_CASE("writing only what changed, and reading it back") {
  fixture::trainer_config config;
  CHECK(cairn::to_json(config, cairn::output::changed) == boost::json::object{});
  config.model.layers = 6;
  config.logs.interval.reset();
  config.run.environment["A"] = "1";
  auto changed = cairn::to_json(config, cairn::output::changed);
  CHECK(changed == cairn::parse_json(R"({"run": {"environment": {"A": "1"}}, "model": {"layers": 6},
                                         "logs": {"interval": null}})"));
  auto again = cairn::from_json<fixture::trainer_config>(changed);
  CHECK(cairn::compare(config, again).empty());
}

TEST_CASE("to_string writes indented JSON in field order with plain numbers") {
  fixture::optimizer_config config;
  CHECK(cairn::to_string(config) == "{\n"
                                    "  \"kind\": \"adam\",\n"
                                    "  \"learning_rate\": 0.001,\n"
                                    "  \"betas\": [\n"
                                    "    0.9,\n"
                                    "    0.999\n"
                                    "  ]\n"
                                    "}\n");
}

TEST_CASE("load reads a file and applies overrides on top") {
  temp_file file(R"({"run": {"experiment_dir": "/tmp/exp"}, "train_iters": 10, "model": {"layers": 3}})");
  auto config = cairn::load<fixture::trainer_config>(file.path, {"model.layers=4", "seed=1"});
  CHECK(config.run.experiment_dir == "/tmp/exp");
  CHECK(config.train_iters == 10);
  CHECK(config.model.layers == 4);
  CHECK(config.seed == 1);
}

TEST_CASE("JSON syntax errors name the file, line and column") {
  temp_file file("{\n  \"seed\": 1,\n  \"model\": {\"layers\": }\n}");
  auto text = message_of([&] { cairn::load<fixture::trainer_config>(file.path); });
  CHECK(text.find(file.path.string() + ": invalid JSON at line 3, column 23") != std::string::npos);
  CHECK(message_of([] { cairn::from_string<fixture::trainer_config>("{} {}"); }) ==
        "1 config error:\n  <string>: unexpected text after the JSON value at line 1, column 4");
}

TEST_CASE("a missing file is an error naming it") {
  auto text = message_of([] { cairn::load<fixture::trainer_config>("/nonexistent/run.json"); });
  CHECK(text == "1 config error:\n  /nonexistent/run.json: cannot open: No such file or directory");
}

TEST_CASE("a key given twice in one object is an error naming its path, however it is spelt") {
  CHECK(message_of([] { cairn::from_string<fixture::trainer_config>(R"({"seed": 1, "seed": 2})"); }) ==
        "1 config error:\n  <string>: duplicate key 'seed'");
  // An escaped spelling of the same key, nested and inside an array.
  CHECK(message_of([] {
          cairn::from_string<fixture::trainer_config>(R"({"model": {"layers": 1, "l\u0061yers": 2}})");
        }) == "1 config error:\n  <string>: duplicate key 'model.layers'");
  CHECK_THROWS_WITH_AS(cairn::parse_json(R"({"a": [{"k": 1}, {"k": 1, "k": 2}]})", "f.json"),
                       "1 config error:\n  f.json: duplicate key 'a[1].k'", cairn::config_error);
  CHECK_THROWS_AS(cairn::parse_json("{\"\\ud83d\\ude00\": 1, \"\xf0\x9f\x98\x80\": 2}"), cairn::config_error);
  CHECK_THROWS_AS(cairn::parse_json(R"({"a\"b": 1, "a\u0022b": 2})"), cairn::config_error);
  CHECK_NOTHROW(cairn::parse_json(R"({"a\"b": 1, "a\\b": 2, "x": "k\": 1"})"));
  // The same key in different objects is fine.
  CHECK_NOTHROW(cairn::parse_json(R"({"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 1}, {"k": 2}]})"));
}

TEST_CASE("a config file larger than 64 MiB, a device or a FIFO is refused before anything is read") {
  if (std::filesystem::exists("/dev/zero")) {
    auto text = message_of([] { cairn::load<fixture::trainer_config>("/dev/zero"); });
    CHECK(text == "1 config error:\n  /dev/zero: not a regular file (a FIFO, socket or device): refused");
  }
  temp_dir tmp;
  auto sparse = tmp / "huge.json";
  { std::ofstream(sparse) << "{}"; }
  std::filesystem::resize_file(sparse, std::uint64_t{8} << 30); // 8 GiB, sparse: nothing is allocated
  CHECK(message_of([&] { cairn::load<fixture::trainer_config>(sparse); }) ==
        "1 config error:\n  " + sparse.string() + ": 8589934592 bytes, larger than the limit of 64 MiB");
  CHECK(message_of([&] { cairn::read_json_file(sparse); }) ==
        "1 config error:\n  " + sparse.string() + ": 8589934592 bytes, larger than the limit of 1024 MiB");
  // A FIFO would block a reader that opened it plainly until something wrote to it.
  auto fifo = tmp / "fifo.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  CHECK(message_of([&] { cairn::load<fixture::trainer_config>(fifo); }) ==
        "1 config error:\n  " + fifo.string() + ": not a regular file (a FIFO, socket or device): refused");
  CHECK(message_of([&] { cairn::read_json_file(tmp.path); }) ==
        "1 config error:\n  " + tmp.path.string() + ": a directory, not a file");
}

TEST_CASE("duplicate keys are found in time linear in the keys") {
  // 200,000 keys in one object: a check comparing each key with those before it made ~2e10
  // string comparisons (minutes); a linear one a few hundred milliseconds.
  std::string text = "{";
  for (int i = 0; i < 200000; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\": 0";
  CHECK_NOTHROW(cairn::parse_json(text + "}"));
  CHECK_THROWS_WITH_AS(cairn::parse_json(text + ", \"k199999\": 1}", "big.json"),
                       "1 config error:\n  big.json: duplicate key 'k199999'", cairn::config_error);
}
