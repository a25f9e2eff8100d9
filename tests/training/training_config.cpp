// The training-loop configs: retention, exports, shutdown and alert rules, the trainer-level
// config, and a config file a user of the seed's system could have written.
#include <cairn/config.hpp>
#include <cairn/training.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

using iterations = std::vector<std::int64_t>;

namespace {

std::vector<std::string> warnings_of(auto&& action) {
  std::vector<std::string> seen;
  cairn::scoped_diagnostic_sink sink([&](cairn::severity s, cairn::diagnostic const& d) {
    if (s == cairn::severity::warning) seen.push_back(d.to_string());
  });
  action();
  return seen;
}

} // namespace

TEST_CASE("resume checkpoints keep 5 by default; exports keep all") {
  CHECK(cairn::checkpoint_config{}.keep == 5);
  CHECK_FALSE(cairn::export_config{}.keep.has_value());
  CHECK(cairn::export_config{}.to_delete({1, 2, 3, 4, 5, 6, 7}).empty());
}

TEST_CASE("keep deletes all but the newest saves") {
  cairn::checkpoint_config config;
  config.interval = 10;
  config.keep = 2;
  CHECK(config.to_delete({}) == iterations{});
  CHECK(config.to_delete({10, 20}) == iterations{});
  CHECK(config.to_delete({30, 10, 20, 40}) == iterations{10, 20});
}

TEST_CASE("keep_every keeps every n-th save forever, not counted in keep") {
  cairn::checkpoint_config config;
  config.interval = 10;
  config.keep = 2;
  config.keep_every = 3;
  // The seed's get_count: (iteration - offset) // interval + 1, so iteration 20 is count 3.
  CHECK(config.count(20) == 3);
  CHECK(config.kept_forever(20));
  CHECK(config.kept_forever(50));
  CHECK_FALSE(config.kept_forever(30));
  CHECK_FALSE(config.kept_forever(35)); // not a firing (a final save off the schedule)
  CHECK(config.to_delete({10, 20, 30, 40, 50, 60, 70, 80}) == iterations{10, 30, 40});
  // The two newest non-permanent saves stay, whatever the permanent ones in between.
  CHECK(config.to_delete({10, 20, 30}) == iterations{});
  config.offset = 5; // firings at 5, 15, 25...: the third is 25
  CHECK(config.kept_forever(25));
  CHECK_FALSE(config.kept_forever(30));
}

TEST_CASE("a save off the schedule (a final save at a stop) is never counted nor deleted") {
  cairn::checkpoint_config config;
  config.interval = 10;
  config.keep = 1;
  CHECK(config.to_delete({10, 20, 25}) == iterations{10});
  CHECK(config.to_delete({25, 30}) == iterations{});
}

namespace {

/// The seed's retention, from its formulas (fast_llm/engine/training/config.py: IntervalConfig
/// and TrainingCheckpointBaseConfig.to_delete), with Python's floor division and modulo.
struct seed_schedule {
  std::int64_t interval, offset;
  std::optional<std::int64_t> keep, keep_every;

  static std::int64_t floor_div(std::int64_t a, std::int64_t b) {
    return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
  }
  static std::int64_t py_mod(std::int64_t a, std::int64_t b) { return a - b * floor_div(a, b); }
  [[nodiscard]] bool enabled(std::int64_t it) const { return py_mod(it - offset, interval) == 0; }
  [[nodiscard]] std::int64_t get_count(std::int64_t it) const { return floor_div(it - offset, interval) + 1; }
  [[nodiscard]] iterations to_delete(iterations its) const {
    if (!keep) return {};
    iterations on_schedule, counted;
    for (auto it : its)
      if (enabled(it)) on_schedule.push_back(it);
    for (auto it : on_schedule)
      if (!keep_every || py_mod(get_count(it), *keep_every) != 0) counted.push_back(it);
    if (static_cast<std::int64_t>(counted.size()) <= *keep) return {};
    return iterations(counted.begin(), counted.end() - *keep);
  }
};

/// What is left on disk after a run of `length` iterations that saves where `saves` says,
/// applying `to_delete` after every save, as the seed's trainer does.
template <class Schedule> iterations left_after(Schedule const& schedule, std::int64_t length, bool final_save) {
  iterations disk;
  for (std::int64_t it = 1; it <= length; ++it) {
    if (!(schedule.enabled(it) || (final_save && it == length))) continue;
    disk.push_back(it);
    for (auto gone : schedule.to_delete(disk)) std::erase(disk, gone);
  }
  return disk;
}

} // namespace

TEST_CASE("retention matches the seed's to_delete over many schedules") {
  // The example of the seed's formulas: interval 10, offset 0, keep 3, keep_every 4, 120
  // iterations.
  cairn::checkpoint_config example;
  example.interval = 10;
  example.keep = 3;
  example.keep_every = 4;
  CHECK(left_after(example, 120, true) == iterations{30, 70, 90, 100, 110, 120});

  int cases = 0;
  for (std::int64_t interval = 1; interval <= 6; ++interval)
    for (std::int64_t offset = 0; offset < interval; ++offset)
      for (std::int64_t keep = 0; keep <= 3; ++keep)
        for (std::int64_t keep_every = 0; keep_every <= 3; ++keep_every)
          for (std::int64_t length : {1, 7, 13, 24})
            for (bool final_save : {false, true}) {
              auto kept = keep ? std::optional<std::int64_t>(keep) : std::nullopt;
              auto every = keep_every ? std::optional<std::int64_t>(keep_every) : std::nullopt;
              cairn::checkpoint_config mine;
              mine.interval = interval;
              mine.offset = offset;
              mine.keep = kept;
              mine.keep_every = every;
              seed_schedule seed{interval, offset, kept, every};
              CAPTURE(interval);
              CAPTURE(offset);
              CAPTURE(keep);
              CAPTURE(keep_every);
              CAPTURE(length);
              CAPTURE(final_save);
              CHECK(left_after(mine, length, final_save) == left_after(seed, length, final_save));
              ++cases;
            }
  CHECK(cases == 21 * 4 * 4 * 4 * 2);
}

TEST_CASE("the resume checkpoint always saves weights and optimizer state, distributed") {
  auto save = cairn::checkpoint_config{}.save_config("/exp/checkpoints/100");
  CHECK(save.path == "/exp/checkpoints/100");
  CHECK(save.format == cairn::checkpoint_format::distributed);
  CHECK(save.model_weights);
  CHECK(save.optimizer_state);
}

TEST_CASE("an export is fully configurable and becomes a save config with the trainer's path") {
  auto config = cairn::from_string<cairn::training_config>(
      R"({"export": {"interval": 50, "format": "state_dict", "optimizer_state": true, "data_type": "float16",
                     "parameters_per_file": 2097152, "keep": 2}})");
  auto save = config.export_.save_config("/exp/export/50");
  CHECK(save.path == "/exp/export/50");
  CHECK(save.format == cairn::checkpoint_format::state_dict);
  CHECK(save.optimizer_state);
  CHECK(save.data_type == cairn::data_type::float16);
  CHECK(save.parameters_per_file == 2097152);
  // The member is export_ (a C++ keyword); the key is "export".
  CHECK(cairn::to_json(config).as_object().contains("export"));
}

TEST_CASE("an export that asks for optimizer state in the external format is refused before launch") {
  CHECK_THROWS_WITH_AS(
      cairn::from_string<cairn::training_config>(
          R"({"export": {"interval": 50, "format": "external", "model_type": "llama", "optimizer_state": true}})"),
      "1 config error:\n  export.optimizer_state: the external format cannot hold optimizer state; use distributed or "
      "state_dict",
      cairn::config_error);
}

TEST_CASE("shutdown must be a sub-interval of checkpoints, alerts of logs") {
  try {
    cairn::from_string<cairn::training_config>(
        R"({"checkpoint": {"interval": 100}, "shutdown": {"interval": 150}, "logs": {"interval": 10},
            "alerts": {"interval": 25}})");
    FAIL("accepted");
  } catch (cairn::config_error const& e) {
    REQUIRE(e.errors().size() == 2);
    CHECK(e.errors()[0] == cairn::diagnostic{"shutdown.interval",
                                             "shutdown (every 150 iterations from 0) is not a sub-interval of "
                                             "checkpoint (every 100 iterations from 0): every shutdown must fall "
                                             "on a checkpoint"});
    CHECK(e.errors()[1] == cairn::diagnostic{"alerts.interval",
                                             "alert (every 25 iterations from 0) is not a sub-interval of metric log "
                                             "(every 10 iterations from 0): every alert must fall on a metric log"});
  }
  CHECK_THROWS_AS(cairn::from_string<cairn::training_config>(R"({"shutdown": {"interval": 100}})"),
                  cairn::config_error); // checkpoints disabled: a shutdown would have nothing to resume from
  CHECK_NOTHROW(cairn::from_string<cairn::training_config>(
      R"({"checkpoint": {"interval": 100}, "shutdown": {"interval": 300}, "alerts": {"interval": 500}})"));
}

TEST_CASE("a run that trains but never checkpoints gets a warning at validation") {
  CHECK(warnings_of([] { cairn::from_string<cairn::training_config>(R"({"train_iters": 100})"); }) ==
        std::vector<std::string>{
            "checkpoint.interval: checkpoints are disabled: a crash loses all progress since the start"});
  CHECK(warnings_of([] {
          cairn::from_string<cairn::training_config>(R"({"train_iters": 100, "checkpoint": {"interval": 10}})");
        }).empty());
}

TEST_CASE("validation needs iterations when enabled") {
  CHECK_THROWS_WITH_AS(cairn::from_string<cairn::training_config>(R"({"validation": {"interval": 10}})"),
                       "1 config error:\n  validation.iterations: must be > 0 when validation is enabled",
                       cairn::config_error);
}

TEST_CASE("checkpoints or exports without an experiment directory are an error") {
  CHECK_THROWS_WITH_AS(cairn::from_string<cairn::trainer_config>(R"({"training": {"checkpoint": {"interval": 10}}})"),
                       "1 config error:\n  run.experiment_dir: required: this run saves checkpoints or exports",
                       cairn::config_error);
  CHECK_THROWS_AS(cairn::from_string<cairn::trainer_config>(R"({"training": {"export": {"interval": 10}}})"),
                  cairn::config_error);
  CHECK_NOTHROW(cairn::from_string<cairn::trainer_config>(R"({})"));
  // As in the seed: a run that trains without saving anything needs no directory.
  CHECK_NOTHROW(cairn::from_string<cairn::trainer_config>(R"({"training": {"train_iters": 100}})"));
}

TEST_CASE("a config file written for the seed's system loads") {
  std::vector<std::string> deprecations;
  cairn::scoped_diagnostic_sink sink([&](cairn::severity s, cairn::diagnostic const& d) {
    if (s == cairn::severity::deprecation) deprecations.push_back(d.path);
  });
  std::string file = CAIRN_TEST_DATA_DIR; // appended, not `+`: GCC 12 warns falsely on the temporary
  file += "/data/seed_style_trainer.json";
  auto config = cairn::load<cairn::trainer_config>(file);
  CHECK(config.training.checkpoint.keep == 3);
  CHECK(config.training.export_.format == cairn::checkpoint_format::external);
  CHECK(config.training.export_.model_type == "llama");
  CHECK(config.pretrained.format == cairn::checkpoint_format::external);
  CHECK(config.pretrained.model_type == "llama");
  CHECK(config.pretrained.model_weights);
  CHECK_FALSE(config.pretrained.optimizer_state);
  CHECK(config.pretrained.load_config == cairn::model_config_type::model);
  CHECK(config.has_pretrained());
  CHECK(deprecations == std::vector<std::string>{"training.export.imported_type", "training.export.format",
                                                 "training.export.load_weights", "pretrained.imported_type",
                                                 "pretrained.format", "pretrained.override_architecture",
                                                 "pretrained.load_full_base_model_config", "pretrained.load_weights",
                                                 "pretrained.load_optimizer"});
}

TEST_CASE("the documentation tree of the trainer config prints, with the old spellings") {
  auto doc = cairn::document<cairn::trainer_config>();
  CHECK(doc.starts_with("trainer_config\n  run: run_config  [core]\n"));
  CHECK(doc.find("    export: export_config  [feature]") != std::string::npos);
  CHECK(doc.find("      keep: optional<int64> = 5  [feature, > 0]") != std::string::npos);
  CHECK(doc.find("    load_config: model_config_type = \"architecture\"  [core, one of none, architecture, model, "
                 "cairn]") != std::string::npos);
  CHECK(doc.find("override_architecture, load_full_base_model_config, load_full_fast_llm_config -> load_config") !=
        std::string::npos);
}
