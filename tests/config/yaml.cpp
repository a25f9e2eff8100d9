// YAML config files: read into the JSON document every rule of the config core applies to, the
// YAML 1.2 core schema, anchors and merge keys, errors with line and column, and printing YAML
// that reads back to the same config.
#include <cairn/config/yaml.hpp>
#include <cairn/training/trainer_config.hpp>

#include <boost/json.hpp> // these tests are built with CAIRN_SEPARATE_COMPILATION
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "fixtures.hpp"

namespace {

struct temp_file {
  std::filesystem::path path;
  temp_file(std::string const& name, std::string const& text)
      : path(std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "-" + name)) {
    std::ofstream(path, std::ios::binary) << text;
  }
  ~temp_file() { std::filesystem::remove(path); }
};

std::string error_of(std::string const& text) {
  try {
    cairn::parse_yaml(text, "run.yaml");
  } catch (cairn::config_error const& e) {
    return e.what();
  }
  return "(no error)";
}

} // namespace

TEST_CASE("YAML is an explicit choice: a .yaml config is refused until enable_yaml, then read") {
  // Runs first in this binary: no test case before it has enabled the format.
  temp_file file("plain.yaml", "train_iters: 3\n");
  CHECK_THROWS_WITH_AS((void)cairn::read_config_file(file.path.string()), doctest::Contains("cairn::enable_yaml()"),
                       cairn::config_error);
  CHECK_FALSE(cairn::find_config_file_format("yaml"));
  cairn::enable_yaml();
  cairn::enable_yaml(); // a second call changes nothing
  CHECK(cairn::read_config_file(file.path.string()).at("train_iters") == 3);
}

TEST_CASE("a Fast-LLM trainer config written in YAML loads, old keys included") {
  // The shape of the seed's trainer configs: nested sections, comments, an interval left unset,
  // the pre-rename spellings of the pretrained section.
  temp_file file("fast_llm.yaml", R"(# pretraining run
run:
  experiment_dir: /runs/llama-7b
training:
  train_iters: 100000
  checkpoint:
    interval: 1000
    keep: 5
    keep_every: 10
    callback:
      script: ./upload.sh
      environment: {BUCKET: "s3://ckpt", RETRIES: "3"}
  export:
    interval: 10000
    format: huggingface   # the old name of the external format
    imported_type: llama
    data_type: bfloat16
  shutdown:
    interval: ~
  logs: {interval: 10}
pretrained:
  path: /models/llama-7b
  format: huggingface
  imported_type: llama
  load_config: fast_llm
  load_weights: yes_please_not_a_bool
)");
  std::vector<std::string> deprecated;
  cairn::scoped_diagnostic_sink sink([&](cairn::severity level, cairn::diagnostic const& d) {
    if (level == cairn::severity::deprecation) deprecated.push_back(d.path);
  });
  // One mistake among them: `load_weights: yes_please_not_a_bool` is a string for a bool field.
  try {
    (void)cairn::load<cairn::trainer_config>(file.path);
    FAIL("the string for a bool was accepted");
  } catch (cairn::config_error const& e) {
    CHECK(std::string(e.what()).find("pretrained.model_weights") != std::string::npos);
  }
  auto fixed = cairn::load<cairn::trainer_config>(file.path, {"pretrained.load_weights=false"});
  CHECK(fixed.run.experiment_dir == "/runs/llama-7b");
  CHECK(fixed.training.train_iters == 100000);
  CHECK(fixed.training.checkpoint.interval == 1000);
  CHECK(fixed.training.checkpoint.keep == 5);
  CHECK(fixed.training.checkpoint.callback.environment.at("BUCKET") == "s3://ckpt");
  CHECK(fixed.training.checkpoint.callback.environment.at("RETRIES") == "3");
  CHECK(fixed.training.export_.format == cairn::checkpoint_format::external);
  CHECK(fixed.training.export_.model_type == "llama");
  CHECK(fixed.training.export_.data_type == cairn::data_type::bfloat16);
  CHECK_FALSE(fixed.training.shutdown.interval.has_value());
  CHECK(fixed.training.logs.interval == 10);
  CHECK(fixed.pretrained.load_config == cairn::model_config_type::cairn);
  CHECK_FALSE(fixed.pretrained.model_weights);
  CHECK(std::count(deprecated.begin(), deprecated.end(), "pretrained.imported_type") == 2); // once per load
}

TEST_CASE("the YAML 1.2 core schema: only true/false are booleans, quoted scalars are strings") {
  auto doc = cairn::parse_yaml(R"(
yes_word: yes
no_word: no
on_word: on
date: 2024-01-31
quoted_number: "123"
single_quoted: '1.5'
tagged: !!str 42
integer: -17
octal: 0o17
hex: 0x1F
float: 1.5e-3
dot_float: .5
big: 18446744073709551615
infinite: -.inf
not_a_number: .nan
nothing: ~
empty:
literal_null: null
boolean: True
version: 1.2.3
)");
  auto const& o = doc.as_object();
  CHECK(o.at("yes_word") == "yes");
  CHECK(o.at("no_word") == "no");
  CHECK(o.at("on_word") == "on");
  CHECK(o.at("date") == "2024-01-31");
  CHECK(o.at("quoted_number") == "123");
  CHECK(o.at("single_quoted") == "1.5");
  CHECK(o.at("tagged") == "42");
  CHECK(o.at("integer") == -17);
  CHECK(o.at("octal") == 15);
  CHECK(o.at("hex") == 31);
  CHECK(o.at("float") == 1.5e-3);
  CHECK(o.at("dot_float") == 0.5);
  CHECK(o.at("big").as_uint64() == 18446744073709551615u);
  CHECK(o.at("infinite").as_double() == -INFINITY);
  CHECK(std::isnan(o.at("not_a_number").as_double()));
  CHECK(o.at("nothing").is_null());
  CHECK(o.at("empty").is_null());
  CHECK(o.at("literal_null").is_null());
  CHECK(o.at("boolean") == true);
  CHECK(o.at("version") == "1.2.3");

  // Non-finite numbers reach the config's strict checks, which name the key.
  try {
    (void)cairn::from_json<fixture::trainer_config>(cairn::parse_yaml("optimizer: {learning_rate: .inf}"));
    FAIL("infinity accepted");
  } catch (cairn::config_error const& e) {
    CHECK(std::string(e.what()).find("optimizer.learning_rate") != std::string::npos);
  }
}

TEST_CASE("anchors, aliases and merge keys; the mapping's own keys win over merged ones") {
  auto doc = cairn::parse_yaml(R"(
defaults: &defaults
  interval: 100
  offset: 5
checkpoint:
  <<: *defaults
  offset: 7
export:
  <<: [{interval: 1}, *defaults]
logs: *defaults
)");
  CHECK(doc.at("checkpoint").at("interval") == 100);
  CHECK(doc.at("checkpoint").at("offset") == 7);
  CHECK(doc.at("export").at("interval") == 1); // the first merged mapping wins
  CHECK(doc.at("export").at("offset") == 5);
  CHECK(doc.at("logs") == doc.at("defaults"));
  CHECK_FALSE(doc.at("checkpoint").as_object().contains("<<"));
}

TEST_CASE("errors name the file, the line and the column") {
  CHECK(error_of("a: [1, 2\nb: 3\n").find("run.yaml: invalid YAML") != std::string::npos);
  CHECK(error_of("a: [1, 2\nb: 3\n").find("line 2") != std::string::npos);

  auto duplicate = error_of("model:\n  hidden: 1\n  layers: 2\n  hidden: 3\n");
  CHECK(duplicate.find("duplicate key 'model.hidden' at line 4, column 3") != std::string::npos);
  // The same key spelled differently is the same key.
  CHECK(error_of("a: 1\n\"a\": 2\n").find("duplicate key 'a'") != std::string::npos);

  CHECK(error_of("when: !!timestamp 2024-01-01\n").find("unsupported tag") != std::string::npos);
  CHECK(error_of("x: !custom 1\n").find("unsupported tag '!custom' at 'x'") != std::string::npos);
  CHECK(error_of("x: !!int 1.5\n").find("not a valid !!int") != std::string::npos);
  CHECK(error_of("[a, b]: 1\n").find("a key that is not a scalar at line 1") != std::string::npos);
  CHECK(error_of("a: 1\n---\na: 2\n").find("more than one YAML document") != std::string::npos);
  CHECK(error_of("a: 99999999999999999999999\n").find("integer out of range") != std::string::npos);
  CHECK(error_of("<<: 5\n").find("merge key") != std::string::npos);
  CHECK(error_of("a: \"caf\xe9\"\n").find("not valid UTF-8, or a control character, at line 1, column 8") !=
        std::string::npos);
  CHECK(error_of(std::string("a: b\0c\n", 7)).find("a control character, at line 1, column 5") != std::string::npos);
  CHECK(cairn::parse_yaml("a: \"tab\\there \\x9f\"\n").at("a") == "tab\there \u009f"); // escapes decode to UTF-8
  CHECK(error_of(",..8").find("more than one YAML document") != std::string::npos);    // yaml-cpp's LoadAll loops on it

  // Aliases of aliases: ten lines that would expand to 10^9 values.
  std::string laughs = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    auto n = std::to_string(i), previous = std::to_string(i - 1);
    laughs.append("a").append(n).append(": &a").append(n).append(" [");
    for (int j = 0; j < 10; ++j) laughs.append(j ? ", *a" : "*a").append(previous);
    laughs.append("]\n");
  }
  CHECK(error_of(laughs).find("more than 1000000 values once aliases are expanded") != std::string::npos);

  // A file of comments only is a config of defaults.
  CHECK(cairn::parse_yaml("# nothing yet\n") == boost::json::object{});
}

TEST_CASE("to_yaml prints what parse_yaml reads back to the same document") {
  auto document = boost::json::parse(R"({
    "strings": ["yes", "no", "123", "1.5", "", " lead", "trail ", "a: b", "#c", "- x", "null", "~", ".inf",
                "0x10", "multi\nline", "quote\"d", "tab\there", "plain words", "s3://bucket/key", "ünïcode"],
    "numbers": [0, -3, 1.0, 0.1, 1e300, 18446744073709551615],
    "nested": {"empty_list": [], "empty_object": {}, "list_of_objects": [{"a": 1, "b": [1, 2]}, {"c": null}]},
    "true": true, "key with: colon": false, "a key longer than YAML's 1024 characters": 1
  })");
  document.as_object()[std::string(2000, 'k')] = "long keys are written explicitly";
  auto text = cairn::to_yaml(document);
  CHECK(text.find("  - \"123\"\n") != std::string::npos); // a string that plain would read as a number
  CHECK(cairn::parse_yaml(text) == document);

  // "..." (or "... x") at the start of a line ends a YAML document: a top-level string or a key
  // that starts so is quoted (found by the fuzzer: " ..." read as "...", printed plain, lost).
  for (auto const* s : {"...", "... x", "...x", "---", "--- x"}) {
    CAPTURE(s);
    boost::json::value scalar = s;
    CHECK(cairn::parse_yaml(cairn::to_yaml(scalar)) == scalar);
    boost::json::value keyed = boost::json::object{{s, 1}, {"list", boost::json::array{s}}};
    CHECK(cairn::parse_yaml(cairn::to_yaml(keyed)) == keyed);
  }

  fixture::trainer_config config;
  config.run.experiment_dir = "runs/a b";
  config.optimizer.learning_rate = 2.0;
  config.run.environment = {{"FLAG", "on"}};
  auto yaml = cairn::to_yaml(cairn::to_json(config));
  CHECK(yaml.find("learning_rate: 2.0\n") != std::string::npos);
  auto back = cairn::from_json<fixture::trainer_config>(cairn::parse_yaml(yaml));
  CHECK(cairn::to_json(back) == cairn::to_json(config));
}

TEST_CASE("load, read_config_file and the command line read .yaml and .yml files; --print-config=yaml") {
  temp_file yml("run.yml", "run: {experiment_dir: runs/x}\ntrain_iters: 3\nseed: 0x10\n");
  auto config = cairn::load<fixture::trainer_config>(yml.path.string(), {"model.layers=4"});
  CHECK(config.seed == 16);
  CHECK(config.model.layers == 4);

  std::string argv0 = "trainer", flag = "--config", path = yml.path.string(), print = "--print-config=yaml";
  char const* argv[] = {argv0.c_str(), flag.c_str(), path.c_str(), print.c_str()};
  cairn::command_line_options options;
  options.out = std::tmpfile();
  auto printed = cairn::parse_command_line<fixture::trainer_config>(4, argv, options);
  CHECK(printed.exit_status() == 0);
  std::rewind(options.out);
  std::string text;
  char buffer[4096];
  while (auto n = std::fread(buffer, 1, sizeof buffer, options.out)) text.append(buffer, n);
  std::fclose(options.out);
  CHECK(text.find("train_iters: 3\n") != std::string::npos);
  CHECK(cairn::from_json<fixture::trainer_config>(cairn::parse_yaml(text)).seed == 16);

  // Larger than the limit: refused before it is parsed.
  temp_file large("large.yaml", "a: " + std::string(2048, 'x') + "\n");
  try {
    (void)cairn::read_config_file(large.path.string(), 1024);
    FAIL("a file over the limit was read");
  } catch (cairn::config_error const& e) {
    CHECK(std::string(e.what()).find("large.yaml") != std::string::npos);
  }
}

TEST_CASE("a float too small for a double reads as zero, as JSON reads it; one too large is refused") {
  auto doc = cairn::parse_yaml("tiny: 1e-400\nnegative: -0.0001e-999\nfraction: 0.000e5\nhuge: 1e400\nbig: 999e306\n"
                               "huge_exponent: 1e99999999999999999999\n");
  CHECK(doc.at("tiny") == cairn::parse_json(R"({"x": 1e-400})").at("x"));
  CHECK(doc.at("tiny").as_double() == 0.0);
  CHECK(doc.at("negative").as_double() == 0.0);
  CHECK(doc.at("fraction").as_double() == 0.0);
  for (auto key : {"huge", "big", "huge_exponent"}) CHECK(std::isinf(doc.at(key).as_double()));
  CHECK(cairn::parse_yaml("x: 1.5e-300\n").at("x").as_double() == 1.5e-300); // small, in range: itself
  // In a config, zero is checked as zero; infinity is refused as infinite, .nan as what it is.
  CHECK_THROWS_WITH(
      (void)cairn::from_json<fixture::trainer_config>(cairn::parse_yaml("optimizer: {learning_rate: 1e-400}")),
      doctest::Contains("optimizer.learning_rate: must be > 0, got 0"));
  try {
    (void)cairn::from_json<fixture::trainer_config>(cairn::parse_yaml("optimizer: {learning_rate: .nan}"));
    FAIL("a NaN learning rate was accepted");
  } catch (cairn::config_error const& e) {
    std::string message = e.what();
    CHECK(message.find("must be a finite number") != std::string::npos);
    CHECK(message.find("too large") == std::string::npos); // NaN is not large
  }
}

TEST_CASE("YAML nested deeper than a config can be is refused as such, as JSON is") {
  std::string deep = "seed: " + std::string(40, '[') + std::string(40, ']') + "\n";
  CHECK_THROWS_WITH(cairn::parse_yaml(deep, "deep.yaml"), doctest::Contains("deep.yaml: nested deeper than 32 levels"));
  std::string deeper =
      "seed: " + std::string(1000, '[') + std::string(1000, ']') + "\n"; // yaml-cpp's own limit is beyond
  CHECK_THROWS_WITH(cairn::parse_yaml(deeper, "deep.yaml"), doctest::Contains("nested deeper than 32 levels"));
  CHECK(cairn::parse_yaml("a: [[[[1]]]]\n").at("a").at(0).at(0).at(0).at(0) == 1);
}
