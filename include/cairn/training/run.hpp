#pragma once
// cairn: requires libtorch

// The run policy every trainer needs: resume from the run's own newest good checkpoint, else
// start from `pretrained` as its config says, else start fresh; and the run bound once, which
// carries it out:
//
//     cairn::training_run run(cfg, &my_config::model, comm);      // may apply pretrained's config
//     my_model model(cfg);                                        // built from the final config
//     for (auto it = run.start(model.state()) + 1; it <= cfg.training.train_iters; ++it) {
//       model.train_step(it);
//       if (auto stop = run.step(it, model.state())) return stop.exit_status();
//     }

#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/external.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/save_load.hpp>
#include <cairn/checkpoint/stored_config.hpp>
#include <cairn/config/compare.hpp>
#include <cairn/config/json.hpp>
#include <cairn/training/manager.hpp>
#include <cairn/training/trainer_config.hpp>

#include <boost/describe/members.hpp>
#include <boost/mp11/algorithm.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace cairn {

namespace detail {
/// Whether the JSON object `config` holds a value at `path` (`attention.heads`).
inline bool stored_at(boost::json::value const& config, std::string_view path) {
  auto const* at = &config;
  while (!path.empty()) {
    auto dot = path.find('.');
    auto const* object = at->if_object();
    if (!object) return false;
    at = object->if_contains(path.substr(0, dot));
    if (!at) return false;
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
  }
  return true;
}
} // namespace detail

/// How a run starts.
enum class start_kind {
  fresh,      ///< from the model's own initialisation
  resumed,    ///< from the newest good checkpoint of its experiment directory
  pretrained, ///< from the checkpoint `pretrained` names
};

/// Where a run starts: decided by `plan_start`, carried out by `start_run`.
struct start_plan {
  start_kind kind = start_kind::fresh;
};

/// Decides, before the model is built, where the run `cfg` starts: resumed when its experiment
/// directory holds a complete checkpoint, else from `pretrained` when it names a path and asks
/// for the model weights, else fresh. When `pretrained` names a path, the config its checkpoint
/// stores is applied to `cfg` as `pretrained.load_config` says on every start, resumed or not
/// (as the seed applies it at validation), so a resumed run has the architecture it was
/// started with. `model` names the program's model config. For the external format,
/// `external_model` reads the model config of the checkpoint (through the program's converter,
/// e.g. `cairn::external::load_config`). Every rank calls it on the shared directory.
template <class Program, class Model> start_plan
plan_start(Program& cfg, Model Program::*model,
           std::type_identity_t<std::function<Model(std::filesystem::path const&)>> const& external_model = {}) {
  trainer_config const& run = cfg;
  if (run.has_pretrained()) {
    auto const& pretrained = run.pretrained;
    boost::json::value stored;
    if (pretrained.format == checkpoint_format::external) {
      if (!external_model)
        throw checkpoint_error(checkpoint_errc::needs_converter,
                               "pretrained.format is external: plan_start needs the model's converter");
      auto as_stored = cfg;
      as_stored.*model = external_model(resolve_save(pretrained.path));
      stored = to_json(as_stored);
    } else {
      stored = read_stored_metadata(pretrained.path, pretrained.format).config;
    }
    apply_stored_config(cfg, stored, model, pretrained.load_config, pretrained.path.string());
  }
  if (!run.run.experiment_dir.empty() &&
      !save_directory(experiment_layout{run.run.experiment_dir}.checkpoints()).complete().empty())
    return {start_kind::resumed};
  if (run.has_pretrained() && run.pretrained.model_weights) return {start_kind::pretrained};
  return {start_kind::fresh};
}

/// Where a run started: how, from which iteration (0 unless resumed) and which checkpoint.
struct run_start {
  start_kind kind = start_kind::fresh;
  std::int64_t iteration = 0;
  std::filesystem::path path;
};

/// Carries out `plan` on the built model's `state`: resumes through `manager` (which also
/// removes what interrupted saves left), or loads `pretrained` (its weights, and its optimizer
/// state when `optimizer_state` asks; the external format through `load_external`, typically
/// `cairn::external::load` with the program's converter), or leaves the state as it is (a
/// pretrained config without `model_weights` initialises, as in the seed). Collective.
template <comm::communicator Comm>
run_start start_run(checkpoint_manager<Comm>& manager, model_state& state, Comm& comm, start_plan plan,
                    checkpoint_load_config const& pretrained,
                    std::type_identity_t<std::function<void(model_state&, Comm&, checkpoint_load_config const&)>> const&
                        load_external = {}) {
  if (auto resumed = manager.resume(state)) return {start_kind::resumed, resumed->iteration, resumed->path};
  if (plan.kind != start_kind::pretrained) return {};
  if (pretrained.format == checkpoint_format::external) {
    if (!load_external)
      throw checkpoint_error(checkpoint_errc::needs_converter,
                             "pretrained.format is external: start_run needs the model's converter");
    load_external(state, comm, pretrained);
  } else {
    load_checkpoint(state, comm, pretrained);
  }
  return {start_kind::pretrained, 0, pretrained.path};
}

/// A run bound once: a trainer's whole config, its communicator and (where it saves or loads the
/// external format) its model's converter. Built before the model (it applies `pretrained`'s
/// stored config to the config, as `load_config` says), it stores the program's config with
/// every save, starts the run (resume, else pretrained, else fresh) and says after every step
/// whether the run must stop. Every rank builds one and makes the same calls (they are
/// collective). `comm` must outlive it.
///
/// For tests of programs built on it, the environment variable CAIRN_TEST_SIGNAL=NAME@N[:R]
/// (NAME a signal such as TERM or KILL) makes rank R (every rank when not given) raise that
/// signal right after iteration N is trained, before it is saved.
class training_run {
  /// The name of `Config`'s member `model` (its key in the config).
  template <class Config, class Model> static std::string member_name(Model Config::*model) {
    std::string name;
    boost::mp11::mp_for_each<boost::describe::describe_members<Config, boost::describe::mod_public>>([&](auto d) {
      if constexpr (std::is_same_v<std::remove_cv_t<decltype(d.pointer)>, Model Config::*>)
        if (d.pointer == model) name = d.name;
    });
    return name;
  }

public:
  template <class Config, class Model>
  training_run(Config& cfg, Model Config::*model, comm::communicator_ref comm, manager_options options = {})
      : training_run(cfg, model, comm, std::nullopt, std::move(options)) {}

  template <class Config, class Model>
  training_run(Config& cfg, Model Config::*model, comm::communicator_ref comm,
               std::type_identity_t<std::optional<external::converter<Model>>> const& converter,
               manager_options options = {})
      : comm_(comm) {
    plan_ = plan_start(cfg, model, [&](std::filesystem::path const& path) {
      if (!converter)
        throw checkpoint_error(checkpoint_errc::needs_converter,
                               "pretrained.format is external: this program gives its training_run no converter");
      return external::load_config_to_load(*converter, path, cfg.pretrained.model_type);
    });
    if (converter) converter_ = external::bind(*converter, cfg.*model);
    config_ = cfg;
    options.program_config = to_json(cfg); // the final config, pretrained's applied
    if (!options.architecture_check)
      options.architecture_check = [mine = cfg.*model, key = member_name(model),
                                    from_pretrained =
                                        cfg.has_pretrained() && loads_architecture(cfg.pretrained.load_config)](
                                       boost::json::value const& stored, std::string const& path) {
        std::vector<diagnostic> out;
        Model theirs = mine;
        auto const* object = stored.if_object();
        auto const* part = object ? object->if_contains(key) : nullptr;
        if (!part || !part->is_object()) return out; // a checkpoint of another program: its load says what does not fit
        try {
          theirs = parse_lenient<Model>(*part).config;
        } catch (config_error const&) {
          return out; // not a config of this program's model: its load says what does not fit
        }
        for (auto const& d : compare(theirs, mine, field_selection::architecture)) {
          if (!detail::stored_at(*part, d.path)) continue; // a key the checkpoint does not record: nothing to compare
          auto name = key + "." + d.path;
          out.push_back({name, d.left + " in the checkpoint " + path + ", " + d.right + " here" +
                                   (from_pretrained ? " (from pretrained.path, whose architecture "
                                                      "pretrained.load_config applies)"
                                                    : "") +
                                   ": a resume builds the model it saved; run with " + name + "=" + d.left +
                                   (from_pretrained ? " and pretrained.load_config=none" : "") +
                                   ", or start another experiment (run.experiment_dir)"});
        }
        return out;
      };
    finish_construction(std::move(options));
  }

  training_run(training_run const&) = delete;
  training_run& operator=(training_run const&) = delete;

  /// Starts the run on the state of the model built from the final config: resumed from its
  /// newest complete checkpoint, else loaded from `pretrained`, else as it is. Returns the
  /// iteration it starts after (0 unless resumed). Checks, before step one, what would fail
  /// later (`checkpoint_manager::preflight`). Collective.
  CAIRN_DECL std::int64_t start(model_state& state);

  /// How the run started (after `start`).
  [[nodiscard]] run_start const& started() const noexcept { return started_; }

  /// Called after iteration `iteration` is trained: saves and exports on their schedules, and
  /// says whether the run must stop (a shutdown, a stop signal, the last iteration: the saves of
  /// a stop are done, the manager finished). `metrics` are stored with any save of it.
  /// Collective.
  CAIRN_DECL stop_reason step(std::int64_t iteration, model_state const& state, boost::json::value const& metrics = {});

  /// Waits for a save in flight and the callbacks. Collective; `step` does it when it stops.
  void finish() { manager_->finish(); }

  [[nodiscard]] basic_checkpoint_manager& manager() noexcept { return *manager_; }
  /// Saves, loads and plans with the program's config and converter bound.
  [[nodiscard]] CAIRN_DECL checkpointer checkpoints() const;

private:
  CAIRN_DECL void finish_construction(manager_options options);
  CAIRN_DECL void log_progress(std::int64_t iteration, boost::json::value const& metrics);

  comm::communicator_ref comm_;
  trainer_config config_; // the run's part of the program's config
  start_plan plan_;
  std::optional<external::model_converter> converter_;
  boost::json::value program_config_;
  std::unique_ptr<basic_checkpoint_manager> manager_;
  run_start started_;
  std::optional<std::pair<int, std::int64_t>> test_signal_; // CAIRN_TEST_SIGNAL: signal, iteration
  std::optional<int> test_signal_rank_;
  bool log_progress_ = true;
  std::int64_t logged_iteration_ = 0;                 // the iteration of the last progress line (or the start)
  std::chrono::steady_clock::time_point logged_at_{}; // and when
};

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/training/impl/run.ipp>
#endif
