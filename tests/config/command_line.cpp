// parse_command_line: --config, overrides in order, flags, --help, --schema, --print-config, and
// every refusal answered with exit status 2 and a message naming what is wrong.
#include <boost/json.hpp> // these tests are built with CAIRN_SEPARATE_COMPILATION
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "fixtures.hpp"

namespace {

/// Runs parse_command_line on `arguments` (argv[0] included), capturing what it prints.
struct captured {
  cairn::command_line_result<fixture::trainer_config> result{0};
  std::string out, err;
};

std::string drain(std::FILE* f) {
  std::string text;
  std::rewind(f);
  char buffer[4096];
  while (auto n = std::fread(buffer, 1, sizeof buffer, f)) text.append(buffer, n);
  std::fclose(f);
  return text;
}

captured run(std::vector<std::string> arguments, cairn::command_line_options options = {}) {
  std::vector<char const*> argv;
  for (auto const& a : arguments) argv.push_back(a.c_str());
  options.out = std::tmpfile();
  options.err = std::tmpfile();
  REQUIRE(options.out);
  REQUIRE(options.err);
  captured c;
  c.result = cairn::parse_command_line<fixture::trainer_config>(static_cast<int>(argv.size()), argv.data(), options);
  c.out = drain(options.out);
  c.err = drain(options.err);
  return c;
}

struct temp_file {
  std::filesystem::path path;
  temp_file(std::string const& name, std::string const& text)
      : path(std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "-" + name)) {
    std::ofstream(path) << text;
  }
  ~temp_file() { std::filesystem::remove(path); }
};

} // namespace

TEST_CASE("a config file, then overrides in order, and flags that set one key") {
  temp_file file("run.json", R"({"run": {"experiment_dir": "runs/a"}, "seed": 5, "train_iters": 10})");
  cairn::command_line_options options;
  options.flags = {{"--seed", "seed"}};
  auto c =
      run({"/opt/bin/trainer", "--config", file.path.string(), "seed=6", "--seed", "7", "model.layers=3"}, options);
  REQUIRE(c.result);
  CHECK(c.result->seed == 7); // the later setting wins
  CHECK(c.result->model.layers == 3);
  CHECK(c.result->train_iters == 10);
  CHECK(c.result->run.experiment_dir == "runs/a");
  CHECK(c.out.empty());
  CHECK(c.err.empty());

  auto equals = run({"trainer", "--config=" + file.path.string(), "--seed=8"}, options);
  REQUIRE(equals.result);
  CHECK(equals.result->seed == 8);

  auto none = run({"trainer"});
  REQUIRE(none.result);
  CHECK(none.result->seed == 1234);
}

TEST_CASE("--help prints the usage and the documentation tree; --schema the JSON Schema; both exit 0") {
  cairn::command_line_options options;
  options.description = "Trains a thing.";
  auto help = run({"/opt/bin/trainer", "--help", "seed=oops"}, options);
  CHECK_FALSE(help.result);
  CHECK(help.result.exit_status() == 0);
  CHECK(help.out.starts_with("Trains a thing.\n\nusage: trainer [--config FILE]"));
  CHECK(help.out.find("learning_rate") != std::string::npos);
  CHECK(help.out.find("Peak learning rate.") != std::string::npos);

  auto schema = run({"trainer", "--schema"});
  CHECK(schema.result.exit_status() == 0);
  auto parsed = boost::json::parse(schema.out);
  CHECK(parsed.at("properties").as_object().contains("optimizer"));
}

TEST_CASE("--print-config prints the resolved, validated config as JSON and exits 0") {
  auto c = run({"trainer", "--print-config", "seed=9", "run.experiment_dir=x", "train_iters=3"});
  CHECK_FALSE(c.result);
  CHECK(c.result.exit_status() == 0);
  auto printed = boost::json::parse(c.out);
  CHECK(printed.at("seed") == 9);
  CHECK(printed.at("optimizer").at("learning_rate") == 1e-3);
  CHECK(cairn::from_json<fixture::trainer_config>(printed).seed == 9); // reads back

  // Validation runs before printing: an invalid config prints errors, not a config.
  auto invalid = run({"trainer", "--print-config", "train_iters=3"});
  CHECK(invalid.result.exit_status() == 2);
  CHECK(invalid.out.empty());
  CHECK(invalid.err.find("run.experiment_dir") != std::string::npos);
}

TEST_CASE("every refusal exits 2 and names what is wrong") {
  auto unknown = run({"trainer", "--frob"});
  CHECK(unknown.result.exit_status() == 2);
  CHECK(unknown.err.find("trainer: unknown argument '--frob'") != std::string::npos);
  CHECK(unknown.err.find("usage: trainer") != std::string::npos);

  CHECK(run({"trainer", "positional"}).err.find("unknown argument 'positional'") != std::string::npos);
  CHECK(run({"trainer", "=5"}).result.exit_status() == 2);
  CHECK(run({"trainer", "--config"}).err.find("--config needs a file") != std::string::npos);
  CHECK(run({"trainer", "--config", "a.json", "--config", "b.json"}).err.find("--config given twice") !=
        std::string::npos);
  CHECK(run({"trainer", "--print-config=toml"}).err.find("unknown format 'toml'") != std::string::npos);

  auto missing = run({"trainer", "--config", "/nonexistent/run.json"});
  CHECK(missing.result.exit_status() == 2);
  CHECK(missing.err.find("/nonexistent/run.json") != std::string::npos);

  // Every config error at once, each with its key path.
  auto bad = run({"trainer", "model.layers=0", "optimizer.learning_rate=-1", "nope=1"});
  CHECK(bad.result.exit_status() == 2);
  CHECK(bad.err.find("trainer: invalid configuration") != std::string::npos);
  CHECK(bad.err.find("model.layers") != std::string::npos);
  CHECK(bad.err.find("optimizer.learning_rate") != std::string::npos);
  CHECK(bad.err.find("nope") != std::string::npos);
}
