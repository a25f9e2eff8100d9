// The run bound once: built from a trainer's whole config, it stores that config with every save,
// starts the run (resumed, else pretrained, else fresh) and says why it stops.
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/comm/gloo.hpp>
#include <cairn/comm/single_process.hpp>
#include <cairn/config/json.hpp>
#include <cairn/training/run.hpp>

#include <ATen/ATen.h>
#include <boost/describe/class.hpp>
#include <doctest/doctest.h>

#include <csignal>
#include <cstdlib>
#include <string>

#include "forked_ranks.hpp"
#include "io/temp_dir.hpp"

namespace {

struct tiny_model_config {
  std::int64_t width = 4;
};
BOOST_DESCRIBE_STRUCT(tiny_model_config, (), (width))
constexpr auto cairn_fields(tiny_model_config const*) {
  using namespace cairn;
  return fields(field(&tiny_model_config::width, "Width.", hint::architecture, check::positive));
}

struct tiny_config : cairn::trainer_config {
  tiny_model_config model;
};
BOOST_DESCRIBE_STRUCT(tiny_config, (cairn::trainer_config), (model))

/// A model of `width` weights, each `value`.
cairn::model_state state_of(tiny_model_config const& model, float value) {
  return cairn::whole_state({{"w", at::full({model.width}, value)}}, {"exp_avg"});
}

/// A run of 6 iterations in `dir`, a checkpoint every 2, with `overrides` on top.
tiny_config config(std::filesystem::path const& dir, std::vector<std::string> overrides = {}) {
  overrides.insert(overrides.begin(),
                   {"run.experiment_dir=" + dir.string(), "training.train_iters=6", "training.checkpoint.interval=2"});
  return cairn::from_json<tiny_config>(boost::json::object{}, overrides);
}

cairn::comm::single_process comm;

} // namespace

TEST_CASE("a run stops at the last iteration (finished), at a shutdown and on a signal, each with its status") {
  temp_dir tmp;
  SUBCASE("finished") {
    auto cfg = config(tmp / "run");
    cairn::training_run run(cfg, &tiny_config::model, comm);
    auto state = state_of(cfg.model, 1);
    CHECK(run.start(state) == 0);
    CHECK(run.started().kind == cairn::start_kind::fresh);
    for (std::int64_t it = 1; it < 6; ++it) CHECK_FALSE(run.step(it, state));
    auto stop = run.step(6, state);
    CHECK(stop.kind() == cairn::stop_reason::finished);
    CHECK(stop.exit_status() == 0);
    CHECK(cairn::save_directory(tmp / "run" / "checkpoints").complete() == std::vector<std::int64_t>{2, 4, 6});
  }
  SUBCASE("a shutdown") {
    auto cfg = config(tmp / "run", {"training.shutdown.interval=4"});
    cairn::training_run run(cfg, &tiny_config::model, comm);
    auto state = state_of(cfg.model, 1);
    run.start(state);
    for (std::int64_t it = 1; it < 4; ++it) CHECK_FALSE(run.step(it, state));
    CHECK(run.step(4, state).kind() == cairn::stop_reason::shutdown);
  }
  SUBCASE("a signal: exit status 75, after a checkpoint of that iteration") {
    auto cfg = config(tmp / "run");
    cairn::training_run run(cfg, &tiny_config::model, comm);
    auto state = state_of(cfg.model, 1);
    run.start(state);
    CHECK_FALSE(run.step(1, state));
    std::raise(SIGUSR1);
    auto stop = run.step(3, state);
    CHECK(stop.kind() == cairn::stop_reason::signal);
    CHECK(stop.exit_status() == cairn::preempted_exit_status);
    CHECK(stop.signal_number() == SIGUSR1);
    CHECK(cairn::signal_name(stop.signal_number()) == "SIGUSR1");
    CHECK(cairn::save_directory(tmp / "run" / "checkpoints").complete() == std::vector<std::int64_t>{3});
  }
}

TEST_CASE(
    "the run says how training goes at training.logs.interval: iteration, metrics, time per iteration, time left") {
  temp_dir tmp;
  std::vector<std::string> said;
  cairn::scoped_diagnostic_sink sink([&](cairn::severity level, cairn::diagnostic const& d) {
    if (level == cairn::severity::info && d.message.starts_with("iteration ")) said.push_back(d.message);
  });
  auto cfg = config(tmp / "run", {"training.logs.interval=2"});
  cairn::training_run run(cfg, &tiny_config::model, comm);
  auto state = state_of(cfg.model, 1);
  run.start(state);
  for (std::int64_t it = 1; it <= 6; ++it)
    (void)run.step(it, state, boost::json::object{{"loss", 0.5 / double(it)}, {"note", "text"}});
  REQUIRE(said.size() == 3); // 2, 4, 6
  CHECK(said[0].starts_with("iteration 2/6: loss 0.25 ("));
  CHECK(said[0].find(" ms/iteration, 0:00:") != std::string::npos);
  CHECK(said[0].ends_with(" left)"));
  CHECK(said[2].starts_with("iteration 6/6: loss 0.0833333 ("));
  CHECK(said[2].find("left") == std::string::npos); // nothing left
  CHECK(said[1].find("note") == std::string::npos); // numbers only

  said.clear(); // a trainer that prints its own turns it off
  auto quiet_cfg = config(tmp / "quiet", {"training.logs.interval=2"});
  cairn::manager_options options;
  options.log_progress = false;
  cairn::training_run quiet(quiet_cfg, &tiny_config::model, comm, options);
  auto quiet_state = state_of(quiet_cfg.model, 1);
  quiet.start(quiet_state);
  for (std::int64_t it = 1; it <= 6; ++it) (void)quiet.step(it, quiet_state);
  CHECK(said.empty());
}

TEST_CASE("a resume with another model is refused before loading, naming the key and where its value came from") {
  temp_dir tmp;
  auto train = [&](tiny_config cfg) {
    cairn::training_run run(cfg, &tiny_config::model, comm);
    auto state = state_of(cfg.model, 1);
    for (auto it = run.start(state) + 1; it <= 6; ++it) (void)run.step(it, state);
  };
  train(config(tmp / "a"));                    // width 4: checkpoints 2, 4, 6
  train(config(tmp / "p", {"model.width=8"})); // width 8, to serve as pretrained
  auto refusal = [&](tiny_config cfg) -> std::string {
    cairn::training_run run(cfg, &tiny_config::model, comm);
    auto state = state_of(cfg.model, 1);
    try {
      run.start(state);
    } catch (cairn::config_error const& e) {
      return e.what();
    }
    return "started";
  };
  auto overridden = refusal(config(tmp / "a", {"model.width=8"}));
  CHECK(overridden.find("model.width: 4 in the checkpoint " + (tmp / "a" / "checkpoints" / "6").string() +
                        ", 8 here: a resume builds the model it saved; run with model.width=4, or start another "
                        "experiment (run.experiment_dir)") != std::string::npos);
  auto pretrained = refusal(config(tmp / "a", {"pretrained.path=" + (tmp / "p" / "checkpoints" / "6").string()}));
  CHECK(pretrained.find("8 here (from pretrained.path, whose architecture pretrained.load_config applies): a resume "
                        "builds the model it saved; run with model.width=4 and pretrained.load_config=none") !=
        std::string::npos);
  CHECK(cairn::save_directory(tmp / "a" / "checkpoints").complete() == std::vector<std::int64_t>{2, 4, 6});
}

TEST_CASE("every save stores the program's whole config, so that it serves as pretrained with load_config=model") {
  temp_dir tmp;
  {
    auto cfg = config(tmp / "first", {"model.width=8"});
    cairn::training_run run(cfg, &tiny_config::model, comm);
    auto state = state_of(cfg.model, 2.5f);
    run.start(state);
    for (std::int64_t it = 1; it <= 6; ++it) run.step(it, state);
  }
  auto stored = cairn::read_stored_metadata(tmp / "first" / "checkpoints" / "6", cairn::checkpoint_format::distributed);
  CHECK(stored.config.at("model").at("width") == 8);
  CHECK(stored.metadata.at("iteration") == 6);
  CHECK(stored.iteration == 6);

  // A new run asks for width 4; load_config=model takes the stored width 8, and its weights.
  auto cfg = config(tmp / "second", {"model.width=4"});
  cfg.pretrained.path = tmp / "first" / "checkpoints" / "6";
  cfg.pretrained.load_config = cairn::model_config_type::model;
  cairn::training_run run(cfg, &tiny_config::model, comm);
  CHECK(cfg.model.width == 8); // applied before the model is built
  auto state = state_of(cfg.model, 0);
  CHECK(run.start(state) == 0);
  CHECK(run.started().kind == cairn::start_kind::pretrained);
  CHECK(state.parameters[0].shards[0].equal(at::full({8}, 2.5f)));
  // Once it has checkpoints of its own, it resumes from them.
  for (std::int64_t it = 1; it <= 2; ++it) run.step(it, state);
}

TEST_CASE("the test hook raises the signal it names after the iteration it names, and refuses what it cannot read") {
  temp_dir tmp;
  ::setenv("CAIRN_TEST_SIGNAL", "USR1@2", 1);
  {
    auto cfg = config(tmp / "run");
    cairn::training_run run(cfg, &tiny_config::model, comm);
    auto state = state_of(cfg.model, 1);
    run.start(state);
    CHECK_FALSE(run.step(1, state));
    CHECK(run.step(2, state).kind() == cairn::stop_reason::signal);
  }
  ::setenv("CAIRN_TEST_SIGNAL", "FROB@x", 1);
  auto cfg = config(tmp / "other");
  CHECK_THROWS_AS(cairn::training_run(cfg, &tiny_config::model, comm), cairn::config_error);
  ::unsetenv("CAIRN_TEST_SIGNAL");
}

TEST_CASE("ranks holding one same part of a parameter, not replicated, are refused at start, before step one") {
  // Data parallelism without `replicated`: every rank builds the whole state. It used to train
  // until the first save, which failed on every rank naming neither the fix nor the step.
  temp_dir tmp;
  auto status = forked_ranks::run(2, [&](int) {
    auto gloo = cairn::comm::gloo_from_environment(std::chrono::seconds(30));
    auto cfg = config(tmp / "data-parallel");
    cairn::training_run run(cfg, &tiny_config::model, gloo);
    auto state = state_of(cfg.model, 1);
    try {
      run.start(state);
      std::fprintf(stderr, "started\n");
      return 1;
    } catch (cairn::error const& e) {
      std::string what = e.what();
      bool named = what.find("'w': the ranks' shards overlap in 4 elements (ranks 0 and 1 hold the same part of "
                             "it") != std::string::npos &&
                   what.find("mark it replicated") != std::string::npos;
      if (!named) std::fprintf(stderr, "%s\n", what.c_str());
      return named ? 0 : 2;
    }
  });
  CHECK(status == 0);
  CHECK_FALSE(std::filesystem::exists(tmp / "data-parallel" / "checkpoints"));
  // Marked replicated, the same run starts, trains and saves.
  status = forked_ranks::run(2, [&](int) {
    auto gloo = cairn::comm::gloo_from_environment(std::chrono::seconds(30));
    auto cfg = config(tmp / "replicated");
    cairn::training_run run(cfg, &tiny_config::model, gloo);
    auto state = state_of(cfg.model, 1);
    state.parameters[0].layout.replicated = true;
    if (run.start(state) != 0) return 1;
    for (std::int64_t it = 1; it <= 6; ++it)
      if (auto stop = run.step(it, state)) return it == 6 ? stop.exit_status() : 1;
    return 1;
  });
  CHECK(status == 0);
  CHECK(std::filesystem::exists(tmp / "replicated" / "checkpoints" / "2" / "complete.json"));
}
