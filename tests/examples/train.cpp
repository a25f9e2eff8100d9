// End to end: the example trainer and the cairn tool as a user runs them. Runs killed at an
// iteration and resumed end bitwise identical to uninterrupted ones; a run resumed on another
// number of ranks ends close; exports inspect, verify and initialise new runs; bad configs are
// refused before training with every error and its key.
#include <cairn/checkpoint/directory.hpp>
#include <cairn/io/safetensors.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <vector>

#include "io/temp_dir.hpp"

extern char** environ;

namespace {

struct result {
  int status;
  std::string output; // stdout and stderr together
};

enum class group { inherited, own };

/// Starts `argv` with its output to `log`; its pid. With group::own, as a shell starts a job: a
/// process group of its own.
pid_t start(std::vector<std::string> argv, std::filesystem::path const& log, group in = group::inherited) {
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  if (in == group::own) {
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);
  }
  pid_t pid = 0;
  int spawned = ::posix_spawn(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(spawned == 0);
  return pid;
}

/// Waits for `pid`: its exit status (128 + the signal that ended it).
int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

result run(std::vector<std::string> argv, std::filesystem::path const& log) {
  auto status = wait_for(start(std::move(argv), log));
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  return {status, text.str()};
}

std::string text_of(std::filesystem::path const& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The command line of cairn-train on `ranks` ranks (through `cairn launch` when more than one).
std::vector<std::string> train_command(int ranks, std::filesystem::path const& dir,
                                       std::vector<std::string> const& overrides) {
  std::vector<std::string> argv;
  if (ranks > 1) argv = {CAIRN_TOOL, "launch", "-n", std::to_string(ranks), "--"};
  argv.insert(argv.end(), {CAIRN_TRAIN, "run.experiment_dir=" + dir.string()});
  argv.insert(argv.end(), overrides.begin(), overrides.end());
  return argv;
}

/// Sets an environment variable for the programs the test starts while it lives.
struct scoped_environment {
  std::string name;
  scoped_environment(std::string key, std::string const& value) : name(std::move(key)) {
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  scoped_environment(scoped_environment const&) = delete;
  scoped_environment& operator=(scoped_environment const&) = delete;
  ~scoped_environment() { ::unsetenv(name.c_str()); }
};

/// cairn-train on `ranks` ranks, to its end.
result train(int ranks, std::filesystem::path const& dir, std::vector<std::string> const& overrides) {
  auto argv = train_command(ranks, dir, overrides);
  std::filesystem::create_directories(dir);
  auto out = run(argv, dir / ("train-" + std::to_string(::time(nullptr)) + "-" + std::to_string(rand()) + ".log"));
  if (out.status != 0 && out.status != 137) MESSAGE(out.output);
  return out;
}

result tool(std::vector<std::string> args, std::filesystem::path const& log) {
  args.insert(args.begin(), CAIRN_TOOL);
  return run(args, log);
}

/// Every tensor of a safetensors file, name and bytes, with its checksum: what a save holds,
/// without the identity of the save (which differs between any two saves).
std::string tensors_of(std::filesystem::path const& path) {
  cairn::io::safetensors_file file(path);
  std::string out;
  for (auto const& t : file.tensors()) {
    auto bytes = file.bytes(t);
    out += t.name + ":" + file.metadata().at(cairn::io::checksum_key(t.name)) + ":";
    out.append(reinterpret_cast<char const*>(bytes.data()), bytes.size());
  }
  return out;
}

/// Every float of every tensor named `*/weights` in the rank files of a distributed checkpoint,
/// by parameter, in flat order (the ranks' flat slices concatenated).
std::map<std::string, std::vector<float>> weights_of(std::filesystem::path const& checkpoint) {
  std::map<std::string, std::vector<float>> out;
  for (int rank = 0; std::filesystem::exists(checkpoint / ("rank_" + std::to_string(rank) + ".safetensors")); ++rank) {
    cairn::io::safetensors_file file(checkpoint / ("rank_" + std::to_string(rank) + ".safetensors"));
    for (auto const& t : file.tensors()) {
      if (!t.name.ends_with("/weights")) continue;
      auto bytes = file.bytes(t);
      auto& values = out[t.name];
      auto first = values.size();
      values.resize(first + bytes.size() / sizeof(float));
      std::memcpy(values.data() + first, bytes.data(), bytes.size());
    }
  }
  return out;
}

std::vector<std::string> const base{"training.train_iters=12",    "training.checkpoint.interval=4",
                                    "training.logs.interval=4",   "model.hidden=32",
                                    "training.checkpoint.keep=3", "seed=7"};

std::vector<std::string> plus(std::vector<std::string> a, std::vector<std::string> const& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

} // namespace

TEST_CASE("--help, --schema and --print-config describe the config without training") {
  temp_dir tmp;
  auto help = run({CAIRN_TRAIN, "--help"}, tmp / "help");
  CHECK(help.status == 0);
  CHECK(help.output.find("checkpoint: checkpoint_config") != std::string::npos);
  CHECK(help.output.find("hidden: int64 = 64  [architecture") != std::string::npos);
  CHECK(help.output.find("Width of the hidden layers.") != std::string::npos);
  auto schema = run({CAIRN_TRAIN, "--schema"}, tmp / "schema");
  CHECK(schema.status == 0);
  CHECK(schema.output.find("\"$schema\"") != std::string::npos);
  auto printed =
      run({CAIRN_TRAIN, "--print-config", "run.experiment_dir=x", "training.train_iters=3", "model.hidden=8"},
          tmp / "print");
  CHECK(printed.status == 0);
  CHECK(printed.output.find("\"hidden\": 8") != std::string::npos);
  CHECK(printed.output.find("\"train_iters\": 3") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists("x"));

#ifdef CAIRN_WITH_YAML
  // The YAML example is the JSON example.
  auto examples = std::filesystem::path(CAIRN_TEST_DATA_DIR) / ".." / "examples";
  auto from_json = run({CAIRN_TRAIN, "--config", (examples / "train.json").string(), "--print-config"}, tmp / "json");
  auto from_yaml = run({CAIRN_TRAIN, "--config", (examples / "train.yaml").string(), "--print-config"}, tmp / "yaml");
  CHECK(from_json.status == 0);
  CHECK(from_yaml.status == 0);
  CHECK(from_json.output == from_yaml.output);
  auto as_yaml = run({CAIRN_TRAIN, "--config", (examples / "train.json").string(), "--print-config=yaml"}, tmp / "y");
  CHECK(as_yaml.output.find("\n  train_iters: 200\n") != std::string::npos);
#endif
}

TEST_CASE("a bad config is refused before training, with every error and its key") {
  temp_dir tmp;
  auto bad = run({CAIRN_TRAIN, "run.experiment_dir=" + (tmp / "run").string(), "training.train_iters=5",
                  "training.checkpoint.keep=0", "model.layers=0", "optimizer.learning_rate=-1", "data.batchsize=3"},
                 tmp / "bad");
  CHECK(bad.status == 2);
  for (auto key : {"training.checkpoint.keep", "model.layers", "optimizer.learning_rate", "data.batchsize"})
    CHECK(bad.output.find(key) != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(tmp / "run" / "checkpoints"));
  // NCCL asked for where it cannot be had: refused before anything starts, naming the key.
  auto nccl = run({CAIRN_TRAIN, "run.experiment_dir=" + (tmp / "nccl").string(), "comm=nccl"}, tmp / "nccl.log");
  CHECK(nccl.status == 2);
  CHECK(nccl.output.find("comm: comm=nccl") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(tmp / "nccl" / "checkpoints"));
  // A learning rate a double holds whose first step overflows the float32 weights: refused
  // before training, naming the key (not libtorch's "cannot be converted to type float").
  auto huge = run({CAIRN_TRAIN, "run.experiment_dir=" + (tmp / "huge").string(), "optimizer.learning_rate=1e38"},
                  tmp / "huge.log");
  CHECK(huge.status == 2);
  CHECK(huge.output.find("optimizer.learning_rate: ") != std::string::npos);
  CHECK(huge.output.find("past the largest float32") != std::string::npos);
  auto unknown = run({CAIRN_TRAIN, "--frobnicate"}, tmp / "unknown");
  CHECK(unknown.status == 2);
  CHECK(unknown.output.find("unknown argument '--frobnicate'") != std::string::npos);
}

TEST_CASE("a run killed at any iteration and resumed ends bitwise identical to an uninterrupted one") {
  temp_dir tmp;
  for (int ranks : {1, 2}) {
    CAPTURE(ranks);
    auto reference = tmp / ("reference-" + std::to_string(ranks));
    auto trained = train(ranks, reference, base);
    REQUIRE(trained.status == 0);
    CHECK(trained.output.find("final loss") != std::string::npos);
    auto expected = tensors_of(reference / "checkpoints" / "12" / "rank_0.safetensors");
    REQUIRE(!expected.empty());
    int resumes = 0;
    for (int kill_after : {2, 5, 11}) {
      CAPTURE(kill_after);
      auto dir = tmp / ("killed-" + std::to_string(ranks) + "-" + std::to_string(kill_after));
      // Every rank killed right after training that iteration, before it is saved.
      scoped_environment hook("CAIRN_TEST_SIGNAL", "KILL@" + std::to_string(kill_after));
      auto killed = train(ranks, dir, base);
      CHECK(killed.status != 0);
      // Saves are asynchronous: a checkpoint is complete once a later iteration committed it.
      auto complete = cairn::save_directory(dir / "checkpoints").complete();
      ::unsetenv("CAIRN_TEST_SIGNAL");
      auto resumed = train(ranks, dir, base);
      REQUIRE(resumed.status == 0);
      if (!complete.empty()) {
        ++resumes;
        CHECK(resumed.output.find("resumed from " + (dir / "checkpoints" / std::to_string(complete.back())).string() +
                                  " ") != std::string::npos);
      }
      for (int r = 0; r < ranks; ++r) {
        auto file = "rank_" + std::to_string(r) + ".safetensors";
        CHECK(tensors_of(dir / "checkpoints" / "12" / file) == tensors_of(reference / "checkpoints" / "12" / file));
      }
    }
    CHECK(resumes >= 1);
  }
}

TEST_CASE("a run without checkpoints is warned about once") {
  temp_dir tmp;
  auto out = train(1, tmp / "run", {"training.train_iters=2", "training.checkpoint.interval=null", "model.hidden=8"});
  REQUIRE(out.status == 0);
  auto first = out.output.find("checkpoints are disabled");
  REQUIRE(first != std::string::npos);
  CHECK(out.output.find("checkpoints are disabled", first + 1) == std::string::npos);
}

TEST_CASE("a run checkpointed on two ranks resumes on one and ends close to a one-rank run") {
  temp_dir tmp;
  auto options = plus(base, {"training.train_iters=20"});
  REQUIRE(train(1, tmp / "one", options).status == 0);
  REQUIRE(train(2, tmp / "moved", plus(base, {"training.train_iters=10"})).status == 0);

  // The dry run first, from the trainer's layouts for one rank: every parameter reshards, rank 0
  // reads both rank files; another hidden size, or a save without optimizer state, is refused
  // (exit 2) naming each problem, before anything is loaded.
  auto layout = [&](std::vector<std::string> overrides, std::string const& name) {
    std::vector<std::string> argv{CAIRN_TRAIN, "layout", "--world-size", "1",
                                  "run.experiment_dir=" + (tmp / "moved").string()}; // the run's own arguments
    argv.insert(argv.end(), overrides.begin(), overrides.end());
    auto out = run(argv, tmp / (name + ".log"));
    REQUIRE(out.status == 0);
    std::ofstream(tmp / name) << out.output;
    return (tmp / name).string();
  };
  auto saved = (tmp / "moved" / "checkpoints" / "10").string();
  auto planned = tool({"plan", "--checkpoint", saved, "--layout", layout(options, "one.json")}, tmp / "plan");
  CHECK(planned.status == 0);
  CHECK(planned.output.find("resharded, 6 parameters") != std::string::npos);
  CHECK(planned.output.find("rank_0.safetensors") != std::string::npos);
  CHECK(planned.output.find("rank_1.safetensors") != std::string::npos);
  auto other = tool({"plan", "--checkpoint", saved, "--layout", layout(plus(options, {"model.hidden=48"}), "h.json")},
                    tmp / "plan2");
  CHECK(other.status == 2);
  CHECK(other.output.find("layers.0.weight: has shape [32, 16] in the checkpoint, [48, 16] in the run") !=
        std::string::npos);
  CHECK(other.output.find(" reads ") == std::string::npos); // refused: no read plan
  CHECK(other.output.find("the load would be refused") != std::string::npos);
  auto weights_only = tmp / "weights_only";
  REQUIRE(tool({"convert", "input.path=" + saved, "input.format=distributed", "output.path=" + weights_only.string(),
                "output.format=state_dict", "output.optimizer_state=false"},
               tmp / "convert")
              .status == 0);
  auto lacking =
      tool({"plan", "--checkpoint", weights_only.string(), "--layout", (tmp / "one.json").string()}, tmp / "plan3");
  CHECK(lacking.status == 2);
  CHECK(lacking.output.find("exp_avg: state shard not in the checkpoint (it holds weights)") != std::string::npos);
  // The files are looked at too (headers, not data): one missing is a refused load.
  auto partial = tmp / "partial";
  std::filesystem::copy(saved, partial);
  std::filesystem::remove(partial / "rank_1.safetensors");
  auto missing =
      tool({"plan", "--checkpoint", partial.string(), "--layout", (tmp / "one.json").string()}, tmp / "plan4");
  CHECK(missing.status == 2);
  CHECK(missing.output.find("rank_1.safetensors: missing") != std::string::npos);

  auto resumed = train(1, tmp / "moved", options);
  REQUIRE(resumed.status == 0);
  CHECK(resumed.output.find("resumed from") != std::string::npos);

  auto a = weights_of(tmp / "one" / "checkpoints" / "20");
  auto b = weights_of(tmp / "moved" / "checkpoints" / "20");
  REQUIRE(a.size() == b.size());
  REQUIRE(!a.empty());
  double worst = 0;
  for (auto const& [name, values] : a) {
    REQUIRE(b[name].size() == values.size());
    for (std::size_t i = 0; i < values.size(); ++i)
      worst = std::max(worst, std::abs(double(values[i]) - double(b[name][i])));
  }
  MESSAGE("largest weight difference after 2 -> 1 rank resume: " << worst);
  CHECK(worst < 1e-3); // summation order differs: close, not bitwise
}

TEST_CASE("ZeRO stages 0 and 1 train bitwise alike, and each resumes the other's checkpoints") {
  temp_dir tmp;
  REQUIRE(train(2, tmp / "zero1", plus(base, {"parallel.zero_stage=1"})).status == 0);
  REQUIRE(train(2, tmp / "zero0", plus(base, {"parallel.zero_stage=0"})).status == 0);
  REQUIRE(train(2, tmp / "moved", plus(base, {"parallel.zero_stage=1", "training.train_iters=8"})).status == 0);
  auto resumed = train(2, tmp / "moved", plus(base, {"parallel.zero_stage=0"}));
  REQUIRE(resumed.status == 0);
  CHECK(resumed.output.find("resumed from") != std::string::npos);
  auto expected = weights_of(tmp / "zero1" / "checkpoints" / "12");
  REQUIRE(!expected.empty());
  CHECK(weights_of(tmp / "zero0" / "checkpoints" / "12") == expected);
  CHECK(weights_of(tmp / "moved" / "checkpoints" / "12") == expected);
  // At stage 0 every rank holds every tensor; each is written once, by one rank or the other.
  auto stage0 = tmp / "zero0" / "checkpoints" / "12";
  auto tensors = [](std::filesystem::path const& file) { return cairn::io::safetensors_file(file).tensors().size(); };
  auto first = tensors(stage0 / "rank_0.safetensors"), second = tensors(stage0 / "rank_1.safetensors");
  CHECK(first > 0);
  CHECK(second > 0);
  CHECK(first + second == 3 * expected.size()); // weights, exp_avg, exp_avg_sq of each parameter, once
}

namespace {

/// The loss the run in `log` printed for iteration `it`, or NaN.
double loss_at(std::string const& log, std::int64_t it) {
  auto key = "iteration " + std::to_string(it) + "/";
  auto at = log.find(key);
  if (at == std::string::npos) return std::nan("");
  auto loss = log.find("loss ", at);
  return loss == std::string::npos ? std::nan("") : std::stod(log.substr(loss + 5));
}

/// Every tensor of every rank file of a distributed checkpoint: weights and optimizer state.
std::vector<std::string> rank_files_of(std::filesystem::path const& checkpoint) {
  std::vector<std::string> out;
  for (int rank = 0; std::filesystem::exists(checkpoint / ("rank_" + std::to_string(rank) + ".safetensors")); ++rank)
    out.push_back(tensors_of(checkpoint / ("rank_" + std::to_string(rank) + ".safetensors")));
  return out;
}

} // namespace

TEST_CASE("TP=2 x DP=2 at ZeRO-1 resumes bitwise; under TP=1 x DP=4, TP=4 x DP=1 or two stages, within 1e-5") {
  temp_dir tmp;
  // Three hidden layers: column-, row-, column-parallel, and a row-parallel head.
  auto grid = plus(base, {"model.layers=3", "parallel.tensor=2", "parallel.zero_stage=1", "training.logs.interval=1"});
  auto straight = train(4, tmp / "straight", grid);
  REQUIRE(straight.status == 0);
  REQUIRE(train(4, tmp / "stopped", plus(grid, {"training.train_iters=8"})).status == 0);
  auto resumed = train(4, tmp / "stopped", grid);
  REQUIRE(resumed.status == 0);
  CHECK(resumed.output.find("resumed from") != std::string::npos);
  auto expected = rank_files_of(tmp / "straight" / "checkpoints" / "12");
  REQUIRE(expected.size() == 4);
  CHECK(rank_files_of(tmp / "stopped" / "checkpoints" / "12") == expected); // weights, exp_avg, exp_avg_sq

  // The same model on one rank: the grid's math is the model's, up to the order of its sums.
  auto alone = train(1, tmp / "alone", plus(base, {"model.layers=3", "training.logs.interval=1"}));
  REQUIRE(alone.status == 0);
  for (std::int64_t it : {1, 6, 12}) CHECK(std::abs(loss_at(alone.output, it) - loss_at(straight.output, it)) <= 1e-5);

  // Iteration 8's checkpoint under other grids: the dry run reshards it, the run resumes it and
  // its next loss is the straight run's within 1e-5 (the order of the sums changes).
  auto saved = tmp / "stopped" / "checkpoints" / "8";
  struct other {
    std::string name;
    std::vector<std::string> parallel;
  };
  for (auto const& [name, parallel] :
       {other{"tp1_dp4", {"parallel.tensor=1"}}, other{"tp4_dp1", {"parallel.tensor=4"}},
        other{"pp2_dp2_zero0", {"parallel.tensor=1", "parallel.pipeline=2", "parallel.zero_stage=0"}},
        other{"tp2_pp2_zero3", {"parallel.tensor=2", "parallel.pipeline=2", "parallel.zero_stage=3"}}}) {
    CAPTURE(name);
    auto options = plus(plus(grid, parallel), {"training.train_iters=9"});
    std::vector<std::string> layout{CAIRN_TRAIN, "layout", "--world-size", "4",
                                    "run.experiment_dir=" + (tmp / name).string()};
    auto printed = run(plus(layout, options), tmp / (name + ".json"));
    REQUIRE(printed.status == 0);
    auto planned = tool({"plan", "--checkpoint", saved.string(), "--layout", (tmp / (name + ".json")).string()},
                        tmp / (name + ".plan"));
    CHECK(planned.status == 0);
    CHECK(planned.output.find("layout: resharded") != std::string::npos);
    if (name == "tp1_dp4") { // refused: another hidden size; a save without the optimizer state the run needs
      auto wider = run(plus(layout, plus(options, {"model.hidden=48"})), tmp / "wider.json");
      REQUIRE(wider.status == 0);
      auto refused =
          tool({"plan", "--checkpoint", saved.string(), "--layout", (tmp / "wider.json").string()}, tmp / "wider.plan");
      CHECK(refused.status == 2);
      CHECK(refused.output.find("layers.0.weight: has shape [32, 16] in the checkpoint, [48, 16] in the run") !=
            std::string::npos);
      CHECK(refused.output.find("layers.1.weight: has shape [32, 32] in the checkpoint, [48, 48] in the run") !=
            std::string::npos);
      auto weights_only = tmp / "weights_only";
      REQUIRE(
          tool({"convert", "input.path=" + saved.string(), "input.format=distributed",
                "output.path=" + weights_only.string(), "output.format=distributed", "output.optimizer_state=false"},
               tmp / "convert")
              .status == 0);
      auto lacking =
          tool({"plan", "--checkpoint", weights_only.string(), "--layout", (tmp / (name + ".json")).string()},
               tmp / "lacking.plan");
      CHECK(lacking.status == 2);
      CHECK(lacking.output.find("exp_avg: state shard not in the checkpoint (it holds weights)") != std::string::npos);
      CHECK(lacking.output.find("exp_avg_sq: state shard not in the checkpoint") != std::string::npos);
    }
    std::filesystem::create_directories(tmp / name / "checkpoints");
    std::filesystem::copy(saved, tmp / name / "checkpoints" / "8");
    auto moved = train(4, tmp / name, options);
    REQUIRE(moved.status == 0);
    CHECK(moved.output.find("resumed from") != std::string::npos);
    CHECK(std::abs(loss_at(moved.output, 9) - loss_at(straight.output, 9)) <= 1e-5);
  }

  // A grid that does not fit the job or the model is refused before training, naming its key.
  auto misfit = train(4, tmp / "misfit", plus(base, {"parallel.tensor=3"}));
  CHECK(misfit.status == 2);
  CHECK(misfit.output.find("parallel.tensor: tensor x pipeline x data is 3 x 1 x 1 = 3 ranks; the job has 4") !=
        std::string::npos);
  auto wide = train(2, tmp / "wide", plus(base, {"parallel.tensor=2", "model.hidden=1"}));
  CHECK(wide.status == 2);
  CHECK(wide.output.find("parallel.tensor: is 2, more than model.hidden (1)") != std::string::npos);
}

TEST_CASE("a shutdown exits 0 after its checkpoint; an export inspects, verifies and initialises a new run") {
  temp_dir tmp;
  auto dir = tmp / "run";
  auto options = plus(base, {"training.shutdown.interval=8", "training.export.interval=8",
                             "training.export.format=external"}); // model_type: the program's converter
  auto first = train(2, dir, options);
  REQUIRE(first.status == 0);
  CHECK(first.output.find("shutdown after iteration 8") != std::string::npos);
  CHECK(std::filesystem::exists(dir / "checkpoints" / "8" / "complete.json"));
  CHECK_FALSE(std::filesystem::exists(dir / "checkpoints" / "12"));
  auto second = train(2, dir, options);
  REQUIRE(second.status == 0);
  CHECK(std::filesystem::exists(dir / "checkpoints" / "12" / "complete.json"));
  auto exported = dir / "export" / "12";
  CHECK(std::filesystem::exists(exported / "config.json"));
  CHECK(std::filesystem::exists(exported / "model.safetensors"));

  auto inspect = tool({"inspect", exported.string()}, tmp / "inspect");
  CHECK(inspect.status == 0);
  CHECK(inspect.output.find("regressor.weight") != std::string::npos);
  CHECK(inspect.output.find("model.layers.0.weight") != std::string::npos);
  CHECK(tool({"verify", exported.string()}, tmp / "verify").status == 0);
  auto verified = tool({"verify", (dir / "checkpoints" / "12").string()}, tmp / "verify2");
  CHECK(verified.status == 0);
  CHECK(verified.output.find("ok (2 files)") != std::string::npos);

  // The experiment directory: a line for each save and export, an unfinished one with its reason.
  std::filesystem::create_directories(dir / "checkpoints" / "16");
  auto listed = tool({"inspect", dir.string()}, tmp / "inspect-experiment");
  CHECK(listed.status == 0);
  INFO(listed.output);
  auto line = [&](std::string const& start) {
    auto at = listed.output.find(start);
    return at == std::string::npos ? std::string() : listed.output.substr(at, listed.output.find('\n', at) - at);
  };
  CHECK(listed.output.find("experiment: " + dir.string() + "\n") != std::string::npos);
  CHECK(listed.output.find((dir / "checkpoints").string() + ": 4 saves\n") != std::string::npos);
  CHECK(line("  8 ").find("checkpoint  complete: yes finite: yes 3 files, ") != std::string::npos);
  CHECK(line("  12 ").find("checkpoint  complete: yes finite: yes 3 files, ") != std::string::npos);
  CHECK(line("  16 ").find("complete: no ") != std::string::npos);
  CHECK(listed.output.find("no completion marker") != std::string::npos);
  CHECK(listed.output.find((dir / "export").string() + ": ") != std::string::npos);
  CHECK(listed.output.rfind("export      complete: yes finite: yes") != std::string::npos);
  std::filesystem::remove(dir / "checkpoints" / "16");

  // A new run (of another width in its own config) initialises from the export: load_config
  // "architecture" takes the export's sizes.
  auto fresh = train(1, tmp / "fine-tune",
                     {"training.train_iters=2", "model.hidden=64", "pretrained.path=" + exported.string(),
                      "pretrained.format=external"}); // model_type: from the export's config.json
  REQUIRE(fresh.status == 0);
  CHECK(fresh.output.find("initialised from") != std::string::npos);
  // The same from a checkpoint of the run (two ranks' shards into one): its stored metadata
  // carries the config, and the weights only fit once its sizes are taken.
  auto checkpoint = dir / "checkpoints" / "12";
  auto described = tool({"inspect", checkpoint.string()}, tmp / "inspect2");
  CHECK(described.output.find("saved by 2 ranks") != std::string::npos);
  auto from_checkpoint = train(1, tmp / "from-checkpoint",
                               {"training.train_iters=2", "model.hidden=64", "pretrained.path=" + checkpoint.string(),
                                "pretrained.format=distributed"});
  REQUIRE(from_checkpoint.status == 0);
  CHECK(from_checkpoint.output.find("initialised from") != std::string::npos);

  // A run started from a pretrained checkpoint of another architecture checkpoints, and resumes:
  // the pretrained config applies on every start, as in the seed.
  std::vector<std::string> fine_tune{"training.train_iters=4", "training.checkpoint.interval=2", "model.hidden=64",
                                     "pretrained.path=" + checkpoint.string(), "pretrained.format=distributed"};
  auto interrupted = train(1, tmp / "fine-tune-2", plus(fine_tune, {"training.train_iters=2"}));
  REQUIRE(interrupted.status == 0);
  auto continued = train(1, tmp / "fine-tune-2", fine_tune);
  REQUIRE(continued.status == 0);
  CHECK(continued.output.find("resumed from " + (tmp / "fine-tune-2" / "checkpoints" / "2").string()) !=
        std::string::npos);
  auto one_rank = tool({"inspect", (tmp / "fine-tune-2" / "checkpoints" / "4").string()}, tmp / "inspect3");
  CHECK(one_rank.output.find("saved by 1 rank\n") != std::string::npos);
  // Without model_weights, the pretrained config applies and the weights are initialised.
  auto config_only = train(1, tmp / "config-only", plus(fine_tune, {"pretrained.model_weights=false"}));
  REQUIRE(config_only.status == 0);
  CHECK(config_only.output.find("initialised from") == std::string::npos);

  // The external format through the model's converter, both ways: export -> state_dict ->
  // export again, the same tensors.
  auto as_state_dict = tmp / "as-state-dict";
  auto converted = run({CAIRN_TRAIN, "convert", "input.path=" + exported.string(), "input.format=external",
                        "output.path=" + as_state_dict.string(), "output.format=state_dict"},
                       tmp / "convert1");
  REQUIRE(converted.status == 0);
  CHECK(tool({"verify", as_state_dict.string()}, tmp / "verify4").status == 0);
  auto back = tmp / "back";
  REQUIRE(run({CAIRN_TRAIN, "convert", "input.path=" + as_state_dict.string(), "input.format=state_dict",
               "output.path=" + back.string(), "output.format=external"},
              tmp / "convert2")
              .status == 0);
  CHECK(tensors_of(back / "model.safetensors") == tensors_of(exported / "model.safetensors"));
  CHECK(text_of(back / "config.json") == text_of(exported / "config.json"));
  // Not into its own input.
  auto onto = run({CAIRN_TRAIN, "convert", "input.path=" + back.string(), "input.format=external",
                   "output.path=" + back.string(), "output.format=state_dict"},
                  tmp / "convert3");
  CHECK(onto.status == 2);
  CHECK(onto.output.find("overlaps the input") != std::string::npos);

  // A damaged export fails verification, naming the file.
  {
    auto file = exported / "model.safetensors";
    auto size = std::filesystem::file_size(file);
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size - 2));
    f.put('\x55');
  }
  auto broken = tool({"verify", exported.string()}, tmp / "verify3");
  CHECK(broken.status != 0);
  CHECK(broken.output.find("model.safetensors") != std::string::npos);
}

TEST_CASE("a signal stops a 2-rank run after a checkpoint of its iteration (exit 75); resumed, it ends bitwise equal") {
  temp_dir tmp;
  auto reference = tmp / "reference";
  REQUIRE(train(2, reference, base).status == 0);

  // SIGTERM raised on rank 0 alone after iteration 5 (off the checkpoint schedule): every rank
  // stops there, after checkpoint 5.
  auto dir = tmp / "signalled";
  result stopped;
  {
    scoped_environment hook("CAIRN_TEST_SIGNAL", "TERM@5:0");
    stopped = train(2, dir, base);
  }
  CHECK(stopped.status == 75);
  CHECK(stopped.output.find("stopped by a signal after iteration 5") != std::string::npos);
  // The run says which signal, once (rank 0), and what to do.
  auto said = "stopped by SIGTERM after iteration 5, its checkpoint saved: run the same command again to resume "
              "(exit status 75)";
  CHECK(stopped.output.find(said) != std::string::npos);
  CHECK(stopped.output.find(said) == stopped.output.rfind(said));
  CHECK(cairn::save_directory(dir / "checkpoints").complete().back() == 5);
  auto resumed = train(2, dir, base);
  REQUIRE(resumed.status == 0);
  CHECK(resumed.output.find("resumed from " + (dir / "checkpoints" / "5").string() + " ") != std::string::npos);
  for (auto file : {"rank_0.safetensors", "rank_1.safetensors"})
    CHECK(tensors_of(dir / "checkpoints" / "12" / file) == tensors_of(reference / "checkpoints" / "12" / file));
}

TEST_CASE("SIGTERM to the launcher of a running job, and a second job on its directory") {
  temp_dir tmp;
  auto dir = tmp / "job";
  std::filesystem::create_directories(dir);
  std::vector<std::string> endless{"training.train_iters=1000000", "training.checkpoint.interval=100000",
                                   "training.logs.interval=1", "model.hidden=32", "seed=7"};
  auto log = dir / "job.log";
  auto job = start(train_command(2, dir, endless), log);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (text_of(log).find("iteration 20/") == std::string::npos && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(text_of(log).find("iteration 20/") != std::string::npos);

  // One writer per experiment directory: a second job fails before step one, naming the holder.
  auto second = train(1, dir, endless);
  CHECK(second.status != 0);
  CHECK(second.output.find("in use by another run (host ") != std::string::npos);
  CHECK(second.output.find("iteration 1/") == std::string::npos);

  ::kill(job, SIGTERM);
  CHECK(wait_for(job) == 75);
  auto complete = cairn::save_directory(dir / "checkpoints").complete();
  REQUIRE(complete.size() == 1);
  auto stopped_at = complete.back();
  CHECK(stopped_at >= 20);
  CHECK(text_of(log).find("stopped by a signal after iteration " + std::to_string(stopped_at)) != std::string::npos);

  // Resumed to two iterations past the stop, it ends where a job that never stopped ends.
  auto to = std::vector<std::string>{"training.train_iters=" + std::to_string(stopped_at + 2)};
  REQUIRE(train(2, dir, plus(endless, to)).status == 0);
  auto reference = tmp / "reference";
  REQUIRE(train(2, reference, plus(endless, to)).status == 0);
  auto last = std::to_string(stopped_at + 2);
  for (auto file : {"rank_0.safetensors", "rank_1.safetensors"})
    CHECK(tensors_of(dir / "checkpoints" / last / file) == tensors_of(reference / "checkpoints" / last / file));
}

namespace {

/// The children of process `pid`.
std::vector<pid_t> children_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> out;
  for (pid_t child = 0; in >> child;) out.push_back(child);
  return out;
}

void wait_for_line(std::filesystem::path const& log, std::string const& text) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (text_of(log).find(text) == std::string::npos && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(text_of(log).find(text) != std::string::npos);
}

} // namespace

TEST_CASE("one stop request, however delivered, gives one graceful stop with its checkpoint") {
  temp_dir tmp;
  std::vector<std::string> endless{"training.train_iters=1000000", "training.checkpoint.interval=100000",
                                   "training.logs.interval=1", "model.hidden=16", "seed=7"};
  struct delivery {
    std::string name;
    std::function<void(pid_t)> send;
  };
  std::vector<delivery> deliveries{
      // Ctrl-C at a terminal: the job's whole process group.
      {"SIGINT to the process group", [](pid_t job) { ::kill(-job, SIGINT); }},
      // A scheduler or a cgroup stop: every process of the job, each rank directly and again
      // through the launcher a moment later.
      {"SIGTERM to every process",
       [](pid_t job) {
         auto ranks = children_of(job);
         REQUIRE(ranks.size() == 2);
         for (auto rank : ranks) ::kill(rank, SIGTERM);
         ::kill(job, SIGTERM);
       }},
      // SLURM's warning ahead of a preemption (--signal=USR1@60), to the launcher.
      {"SIGUSR1 to the launcher", [](pid_t job) { ::kill(job, SIGUSR1); }},
      // A closed terminal or ssh session.
      {"SIGHUP to the launcher", [](pid_t job) { ::kill(job, SIGHUP); }},
  };
  int n = 0;
  for (auto const& d : deliveries) {
    CAPTURE(d.name);
    auto dir = tmp / ("job-" + std::to_string(n++));
    std::filesystem::create_directories(dir);
    auto log = dir / "job.log";
    auto job = start(train_command(2, dir, endless), log, group::own);
    wait_for_line(log, "iteration 10/");
    d.send(job);
    CHECK(wait_for(job) == 75);
    auto complete = cairn::save_directory(dir / "checkpoints").complete();
    REQUIRE(complete.size() == 1);
    CHECK(complete.back() >= 10);
    CHECK(text_of(log).find("stopped by a signal after iteration " + std::to_string(complete.back())) !=
          std::string::npos);
    CHECK_FALSE(cairn::save_directory(dir / "checkpoints").problem(complete.back()));
  }
}

TEST_CASE("when every checkpoint fails its completion check the run stops, naming each, and deletes none") {
  temp_dir tmp;
  auto dir = tmp / "run";
  REQUIRE(train(1, dir, base).status == 0);
  auto complete = cairn::save_directory(dir / "checkpoints").complete();
  REQUIRE(complete == std::vector<std::int64_t>{4, 8, 12});
  for (auto it : complete) {
    auto file = dir / "checkpoints" / std::to_string(it) / "rank_0.safetensors";
    std::filesystem::resize_file(file, std::filesystem::file_size(file) - 1);
  }
  // A pretrained checkpoint that would load: it must not be used in their place either.
  auto pretrained = tmp / "pretrained";
  REQUIRE(train(1, pretrained, base).status == 0);
  for (auto const& extra :
       {std::vector<std::string>{},
        std::vector<std::string>{"pretrained.path=" + (pretrained / "checkpoints" / "12").string()}}) {
    auto again = train(1, dir, plus(plus(base, {"training.train_iters=20"}), extra));
    CHECK(again.status == 1);
    for (auto it : complete)
      CHECK(again.output.find((dir / "checkpoints" / std::to_string(it)).string() + ": ") != std::string::npos);
    CHECK(again.output.find("none was deleted") != std::string::npos);
    CHECK(again.output.find("iteration 1/") == std::string::npos);
    CHECK(again.output.find("initialised from") == std::string::npos);
    CHECK(cairn::save_directory(dir / "checkpoints").complete() == complete);
  }
}

TEST_CASE("a run resumed at or past train_iters says there is nothing to train") {
  temp_dir tmp;
  auto dir = tmp / "run";
  REQUIRE(train(1, dir, base).status == 0);
  auto again = train(1, dir, plus(base, {"training.train_iters=10"}));
  CHECK(again.status == 0);
  CHECK(again.output.find("nothing to train: resumed at iteration 12, training.train_iters is 10") !=
        std::string::npos);
  CHECK(again.output.find("final loss 0.000000") == std::string::npos);
}

TEST_CASE("a resume with another model says once which config keys differ, and loads nothing") {
  temp_dir tmp;
  auto dir = tmp / "run";
  REQUIRE(train(1, dir, base).status == 0); // three checkpoints, of model.hidden 32
  auto other = train(1, dir, plus(base, {"model.hidden=48", "model.layers=3"}));
  CHECK(other.status != 0);
  CHECK(other.output.find("model.hidden: 32 in the checkpoint ") != std::string::npos);
  CHECK(other.output.find(", 48 here: a resume builds the model it saved; run with model.hidden=32, or start "
                          "another experiment (run.experiment_dir)") != std::string::npos);
  CHECK(other.output.find("model.layers: 2 in the checkpoint ") != std::string::npos);
  CHECK(other.output.find("2 config errors") != std::string::npos); // said once, not per checkpoint
  CHECK(other.output.find("shape") == std::string::npos);
  CHECK(other.output.find("skipped") == std::string::npos);
  CHECK(train(1, dir, plus(base, {"training.train_iters=14"})).status == 0); // the checkpoints are all there
}

TEST_CASE("the experiment lock never follows a symbolic link, and the collective timeout is a key") {
  temp_dir tmp;
  auto dir = tmp / "run";
  std::filesystem::create_directories(dir);
  std::ofstream(tmp / "precious.txt") << "keep me";
  std::filesystem::create_symlink(tmp / "precious.txt", dir / ".cairn.lock");
  auto refused = train(1, dir, base);
  CHECK(refused.status == 1);
  CHECK(refused.output.find((dir / ".cairn.lock").string() + ": is a symbolic link") != std::string::npos);
  CHECK(text_of(tmp / "precious.txt") == "keep me");

  auto printed = run({CAIRN_TRAIN, "--print-config", "run.collective_timeout=30"}, tmp / "print");
  CHECK(printed.status == 0);
  CHECK(printed.output.find("\"collective_timeout\": 30") != std::string::npos);
  CHECK(run({CAIRN_TRAIN, "--print-config", "run.collective_timeout=0"}, tmp / "print0").status == 2);
}

TEST_CASE("ranks that do not share the experiment directory are refused before any checkpoint, naming each") {
  // Each rank is given a directory of its own, as nodes whose experiment_dir is a local disk.
  temp_dir tmp;
  std::string command = CAIRN_TRAIN;
  for (auto const& o : base) command += " " + o;
  command += " run.experiment_dir=" + (tmp / "local").string() + "/$RANK training.train_iters=4";
  auto r = run({CAIRN_TOOL, "launch", "-n", "2", "--", "sh", "-c", command}, tmp / "log");
  CHECK(r.status != 0);
  CHECK(r.output.find("is not shared by every rank") != std::string::npos);
  CHECK(r.output.find("rank 1 on ") != std::string::npos); // the rank and its host
  CHECK(r.output.find("mount one shared filesystem at the same path on every node") != std::string::npos);
  for (auto rank : {"0", "1"}) { // nothing trained or saved, no probe left behind
    CHECK_FALSE(std::filesystem::exists(tmp / "local" / rank / "checkpoints" / "4"));
    if (std::filesystem::exists(tmp / "local" / rank))
      for (auto const& entry : std::filesystem::directory_iterator(tmp / "local" / rank))
        CHECK(entry.path().filename().string().find(".cairn-shared-") == std::string::npos);
  }
  // A shared directory passes the same check (every other test runs it too), and leaves no probe behind.
  REQUIRE(train(2, tmp / "shared", plus(base, {"training.train_iters=2"})).status == 0);
  for (auto const& entry : std::filesystem::directory_iterator(tmp / "shared"))
    CHECK(entry.path().filename().string().find(".cairn-shared-") == std::string::npos);
}
