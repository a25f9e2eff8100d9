// cairn-train: a small but real data-parallel trainer built on cairn, to start from.
//
// A multi-layer perceptron learns a fixed random "teacher" network from seeded synthetic data.
// Every rank holds the whole model for the forward and backward passes and averages gradients
// with the others; the Adam optimizer is sharded ZeRO-style: each rank owns a flat slice of
// every parameter, updates it with its slice of the optimizer state, and the slices are gathered
// back. What the checkpoint manager saves is exactly those slices: weights, exp_avg, exp_avg_sq.
//
//     cairn-train [--config FILE.json|FILE.yaml] [key.path=value ...]
//     cairn-train --help | --print-config ... | --schema
//     cairn launch -n 2 -- cairn-train --config examples/train.json run.experiment_dir=runs/a
//
// Deterministic on CPU: the data of iteration i and the initial weights are pure functions of
// the seed, so a run killed at any iteration and resumed ends bitwise identical to an
// uninterrupted one on the same number of ranks.
#include <cairn/cairn.hpp>
#ifdef CAIRN_WITH_NCCL
#include <cairn/comm/nccl.hpp> // comm=nccl
#endif
#ifdef CAIRN_WITH_YAML
#include <cairn/config/yaml.hpp> // --config FILE.yaml, --print-config=yaml
#endif

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <boost/describe/class.hpp>
#include <boost/describe/enum.hpp>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace example {

BOOST_DEFINE_ENUM_CLASS(device_type, cpu, cuda)

/// The model's sizes.
struct mlp_config {
  std::int64_t inputs = 16;
  std::int64_t hidden = 64;
  std::int64_t layers = 2;
  std::int64_t outputs = 4;
};
BOOST_DESCRIBE_STRUCT(mlp_config, (), (inputs, hidden, layers, outputs))

constexpr auto cairn_fields(mlp_config const*) {
  using namespace cairn;
  return fields(field(&mlp_config::inputs, "Input features.", hint::architecture, check::positive),
                field(&mlp_config::hidden, "Width of the hidden layers.", hint::architecture, check::positive),
                field(&mlp_config::layers, "Hidden layers.", hint::architecture, check::in_range(1, 64)),
                field(&mlp_config::outputs, "Outputs.", hint::architecture, check::positive));
}

struct optimizer_config {
  double learning_rate = 3e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
};
BOOST_DESCRIBE_STRUCT(optimizer_config, (), (learning_rate, beta1, beta2, epsilon))

constexpr auto cairn_fields(optimizer_config const*) {
  using namespace cairn;
  return fields(
      field(&optimizer_config::learning_rate, "Adam's learning rate.", hint::core, check::positive),
      field(&optimizer_config::beta1, "Adam's first-moment decay.", hint::optional, check::in_range(0.0, 0.999999)),
      field(&optimizer_config::beta2, "Adam's second-moment decay.", hint::optional, check::in_range(0.0, 0.999999)),
      field(&optimizer_config::epsilon, "Adam's epsilon.", hint::expert, check::positive));
}

struct data_config {
  std::int64_t batch_size = 64;
  double noise = 0.01;
};
BOOST_DESCRIBE_STRUCT(data_config, (), (batch_size, noise))

constexpr auto cairn_fields(data_config const*) {
  using namespace cairn;
  return fields(
      field(&data_config::batch_size, "Samples per iteration, over all ranks.", hint::core, check::positive),
      field(&data_config::noise, "Amplitude of the noise added to the targets.", hint::feature, check::at_least(0.0)));
}

struct testing_config {
  std::optional<std::int64_t> kill_after;
  std::optional<std::int64_t> signal_after;
};
BOOST_DESCRIBE_STRUCT(testing_config, (), (kill_after, signal_after))

constexpr auto cairn_fields(testing_config const*) {
  using namespace cairn;
  return fields(field(&testing_config::kill_after,
                      "Kill the process with SIGKILL right after training this iteration, before it is saved: "
                      "for crash tests.",
                      hint::testing, check::positive),
                field(&testing_config::signal_after,
                      "Rank 0 sends itself SIGTERM right after training this iteration, as a cluster preempting "
                      "the job would: for preemption tests.",
                      hint::testing, check::positive));
}

/// The whole config: cairn's trainer config (run, training, pretrained) plus the example's own.
struct train_config : cairn::trainer_config {
  mlp_config model;
  optimizer_config optimizer;
  data_config data;
  std::uint64_t seed = 1;
  device_type device = device_type::cpu;
  cairn::comm::backend comm = cairn::comm::backend::auto_;
  testing_config testing;
};
BOOST_DESCRIBE_STRUCT(train_config, (cairn::trainer_config), (model, optimizer, data, seed, device, comm, testing))

constexpr auto cairn_fields(train_config const*) {
  using namespace cairn;
  return fields(field(&train_config::model, "The model.", hint::architecture),
                field(&train_config::optimizer, "The optimizer.", hint::core),
                field(&train_config::data, "The synthetic data.", hint::core),
                field(&train_config::seed, "Seed of the data and the initial weights.", hint::core),
                field(&train_config::device, "Where to train: cpu or cuda.", hint::core),
                field(&train_config::comm,
                      "Collectives between ranks: auto (NCCL when device=cuda and cairn was built with NCCL, "
                      "else Gloo), gloo or nccl.",
                      hint::core),
                field(&train_config::testing, "Hooks for tests.", hint::testing));
}

/// The converter of the Hugging Face style export: config.json keys and tensor names.
inline cairn::external::converter<mlp_config> converter() {
  using namespace cairn::external;
  return {"cairn_mlp",
          config_mapping()
              .renamed("inputs", "input_size")
              .renamed("hidden", "hidden_size")
              .renamed("layers", "num_hidden_layers")
              .renamed("outputs", "output_size")
              .constant("architectures", boost::json::array{"CairnMLPForRegression"})
              .constant("hidden_act", "tanh"),
          [](mlp_config const& model) {
            std::vector<weight_rule> rules;
            for (std::int64_t i = 0; i < model.layers; ++i)
              for (auto kind : {"weight", "bias"})
                rules.push_back(renamed("layers." + std::to_string(i) + "." + kind,
                                        "model.layers." + std::to_string(i) + "." + kind));
            rules.push_back(renamed("head.weight", "regressor.weight"));
            rules.push_back(renamed("head.bias", "regressor.bias"));
            return rules;
          }};
}

// --- deterministic data -------------------------------------------------------------------------

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Values uniform in [-scale, scale), a pure function of (seed, stream, element index).
inline at::Tensor uniform(std::vector<std::int64_t> const& shape, std::uint64_t seed, std::uint64_t stream,
                          double scale) {
  auto t = at::empty(shape, at::kFloat);
  auto* data = t.data_ptr<float>();
  auto base = mix(seed ^ mix(stream));
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    double u = double(mix(base + static_cast<std::uint64_t>(i)) >> 11) * 0x1.0p-53;
    data[i] = static_cast<float>((2 * u - 1) * scale);
  }
  return t;
}

enum stream : std::uint64_t { teacher_stream = 1000, init_stream = 2000, data_stream = 1ULL << 32 };

// --- the trainer --------------------------------------------------------------------------------

class trainer {
public:
  trainer(train_config const& cfg, cairn::comm::any_communicator& comm)
      : cfg_(cfg), comm_(comm), device_(cfg.device == device_type::cuda ? c10::kCUDA : c10::kCPU) {
    auto const& m = cfg.model;
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes;
    auto width = m.inputs;
    for (std::int64_t i = 0; i < m.layers; ++i) {
      shapes.push_back({"layers." + std::to_string(i) + ".weight", {m.hidden, width}});
      shapes.push_back({"layers." + std::to_string(i) + ".bias", {m.hidden}});
      width = m.hidden;
    }
    shapes.push_back({"head.weight", {m.outputs, width}});
    shapes.push_back({"head.bias", {m.outputs}});

    state_.shard_names = {"weights", "exp_avg", "exp_avg_sq"};
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      auto const& [name, shape] = shapes[k];
      auto fan_in = shape.size() == 2 ? shape[1] : shape[0];
      auto full = uniform(shape, cfg.seed, init_stream + k, 1.0 / std::sqrt(double(fan_in))).to(device_);
      // This rank's flat (ZeRO) slice of the weights; its optimizer state starts at zero.
      cairn::add_parameter(state_, name, full,
                           cairn::flat_slice({shape.begin(), shape.end()}, comm.rank(), comm.size()));
      full_.push_back(full.requires_grad_(true));
    }
  }

  cairn::model_state& state() noexcept { return state_; }

  /// Rebuilds every rank's whole parameters from the weight shards (after a load).
  void gather_weights() {
    at::AutoGradMode no_grad(false);
    for (std::size_t k = 0; k < full_.size(); ++k) {
      auto pieces = comm_.all_gather(state_.parameters[k].shards[0].to(comm_.device()));
      full_[k].view({-1}).copy_(at::cat(pieces).to(device_));
    }
  }

  /// One iteration: forward and backward on this rank's slice of the batch, gradients summed
  /// over the ranks, Adam on this rank's shards, weights gathered. Returns the batch's loss.
  double step(std::int64_t iteration) {
    auto [x, y] = batch(data_stream + 2 * static_cast<std::uint64_t>(iteration));
    auto local = loss_sum(x, y);
    for (auto& p : full_)
      if (p.grad().defined()) p.grad().zero_();
    local.backward();

    std::vector<at::Tensor> grads;
    for (auto& p : full_) grads.push_back(p.grad().view({-1}));
    auto flat = at::cat(grads).to(comm_.device());
    comm_.all_reduce(flat, cairn::comm::reduce_op::sum);
    flat = flat.to(device_);

    at::AutoGradMode no_grad(false);
    auto const& o = cfg_.optimizer;
    auto t = static_cast<double>(iteration);
    auto correction1 = 1 - std::pow(o.beta1, t), correction2 = 1 - std::pow(o.beta2, t);
    std::int64_t offset = 0;
    for (std::size_t k = 0; k < full_.size(); ++k) {
      auto& p = state_.parameters[k];
      auto begin = static_cast<std::int64_t>(p.layout.shard.flat->begin);
      auto g = flat.slice(0, offset + begin, offset + begin + p.shards[0].numel());
      auto& w = p.shards[0];
      auto& m = p.shards[1];
      auto& v = p.shards[2];
      m.mul_(o.beta1).add_(g, 1 - o.beta1);
      v.mul_(o.beta2).addcmul_(g, g, 1 - o.beta2);
      auto denominator = (v / correction2).sqrt_().add_(o.epsilon);
      w.addcdiv_(m, denominator, -o.learning_rate / correction1);
      offset += full_[k].numel();
    }
    gather_weights();

    auto total = local.detach().reshape({1}).to(comm_.device());
    comm_.all_reduce(total, cairn::comm::reduce_op::sum);
    return total.to(at::kCPU).item<double>();
  }

  /// The mean loss over `batches` held-out batches.
  double validate(std::int64_t batches) {
    at::AutoGradMode no_grad(false);
    double sum = 0;
    for (std::int64_t b = 0; b < batches; ++b) {
      auto [x, y] = batch(data_stream - 2 - 2 * static_cast<std::uint64_t>(b));
      auto total = loss_sum(x, y).reshape({1}).to(comm_.device());
      comm_.all_reduce(total, cairn::comm::reduce_op::sum);
      sum += total.to(at::kCPU).item<double>();
    }
    return sum / double(batches);
  }

private:
  /// This rank's rows of the batch of `stream`: inputs, and the teacher's outputs plus noise.
  std::pair<at::Tensor, at::Tensor> batch(std::uint64_t stream) {
    auto const& m = cfg_.model;
    auto b = cfg_.data.batch_size;
    auto x = uniform({b, m.inputs}, cfg_.seed, stream, 1.0);
    auto w1 = uniform({32, m.inputs}, cfg_.seed, teacher_stream, 1.0 / std::sqrt(double(m.inputs)));
    auto w2 = uniform({m.outputs, 32}, cfg_.seed, teacher_stream + 1, 1.0 / std::sqrt(32.0));
    auto y = at::matmul(at::tanh(at::matmul(x, w1.t())), w2.t()) +
             uniform({b, m.outputs}, cfg_.seed, stream + 1, cfg_.data.noise);
    auto rows = [&](int r) { return b * r / comm_.size(); };
    auto begin = rows(comm_.rank()), end = rows(comm_.rank() + 1);
    return {x.slice(0, begin, end).to(device_), y.slice(0, begin, end).to(device_)};
  }

  /// This rank's share of the batch's mean squared error.
  at::Tensor loss_sum(at::Tensor const& x, at::Tensor const& y) {
    auto h = x;
    std::size_t k = 0;
    for (std::int64_t i = 0; i < cfg_.model.layers; ++i, k += 2)
      h = at::tanh(at::matmul(h, full_[k].t()) + full_[k + 1]);
    auto out = at::matmul(h, full_[k].t()) + full_[k + 1];
    return (out - y).pow(2).sum() / double(cfg_.data.batch_size * cfg_.model.outputs);
  }

  train_config const& cfg_;
  cairn::comm::any_communicator& comm_;
  c10::Device device_;
  std::vector<at::Tensor> full_; // whole parameters, on every rank
  cairn::model_state state_;     // this rank's shards of weights and optimizer state
};

int train(train_config cfg) {
  if (cfg.device == device_type::cuda && !at::hasCUDA())
    throw cairn::config_error(std::vector<cairn::diagnostic>{
        {"device", "cuda is not available: this libtorch was built without CUDA or sees no GPU"}});
  [[maybe_unused]] auto backend = cairn::comm::backend::gloo; // read only where NCCL is built in
  try {
    backend = cairn::comm::resolve_backend(cfg.comm, cfg.device == device_type::cuda, cairn::comm::built_with_nccl);
  } catch (cairn::error const& e) {
    throw cairn::config_error(std::vector<cairn::diagnostic>{{"comm", e.what()}});
  }
  auto env = cairn::comm::environment_or_single();
  auto comm = [&] {
#ifdef CAIRN_WITH_NCCL
    if (backend == cairn::comm::backend::nccl)
      return cairn::comm::any_communicator(cairn::comm::make_nccl(env, cfg.run.timeout()));
#endif
    return env.world_size > 1 ? cairn::comm::any_communicator(cairn::comm::make_gloo(env, cfg.run.timeout()))
                              : cairn::comm::any_communicator(cairn::comm::single_process());
  }();
  if (cfg.data.batch_size < comm.size())
    throw cairn::config_error(std::vector<cairn::diagnostic>{
        {"data.batch_size", "must be at least the number of ranks (" + std::to_string(comm.size()) + ")"}});
  bool leader = comm.rank() == 0;

  // Resume when there is a checkpoint; else initialise from `pretrained`, whose config may
  // change the model before it is built; else start fresh.
  auto plan = cairn::plan_start(cfg, &train_config::model, [&](std::filesystem::path const& path) {
    return cairn::external::load_config(converter(), path, cfg.pretrained.model_type);
  });
  trainer model(cfg, comm);
  cairn::manager_options options;
  options.program_config = cairn::to_json(cfg);
  cairn::checkpoint_manager<cairn::comm::any_communicator> manager(cfg.training, cfg.run.experiment_dir, comm, options);
  manager.set_exporter([&](cairn::model_state const& state, cairn::comm::any_communicator& c,
                           cairn::checkpoint_save_config const& save) {
    cairn::external::save(state, c, converter(), cfg.model, save);
  });
  auto start = cairn::start_run(
      manager, model.state(), comm, plan, cfg.pretrained,
      [&](cairn::model_state& state, cairn::comm::any_communicator& c, cairn::checkpoint_load_config const& load) {
        cairn::external::load(state, c, converter(), cfg.model, load);
      });
  if (start.kind != cairn::start_kind::fresh) model.gather_weights();
  if (leader && start.kind == cairn::start_kind::resumed)
    std::printf("resumed from %s at iteration %lld\n", start.path.c_str(), static_cast<long long>(start.iteration));
  if (leader && start.kind == cairn::start_kind::pretrained) std::printf("initialised from %s\n", start.path.c_str());
  manager.preflight(model.state());

  auto const& training = cfg.training;
  auto started = std::chrono::steady_clock::now();
  double loss = 0;
  for (auto iteration = start.iteration + 1; iteration <= training.train_iters; ++iteration) {
    loss = model.step(iteration);
    if (leader &&
        (training.logs.enabled(iteration) || iteration == start.iteration + 1 || iteration == training.train_iters)) {
      auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      std::printf("iteration %lld/%lld: loss %.6f (%.2f ms/iteration)\n", static_cast<long long>(iteration),
                  static_cast<long long>(training.train_iters), loss,
                  1000 * seconds / double(iteration - start.iteration));
      std::fflush(stdout);
    }
    if (training.validation.enabled(iteration)) {
      auto validation = model.validate(training.validation.iterations);
      if (leader) std::printf("iteration %lld: validation loss %.6f\n", static_cast<long long>(iteration), validation);
    }
    if (cfg.testing.kill_after == iteration) std::raise(SIGKILL);
    if (cfg.testing.signal_after == iteration && leader) std::raise(SIGTERM);
    if (manager.step(iteration, model.state(), {{"loss", loss}})) {
      if (manager.preempted()) {
        if (leader) std::printf("stopped by a signal after iteration %lld\n", static_cast<long long>(iteration));
        return cairn::preempted_exit_status;
      }
      if (iteration < training.train_iters) {
        if (leader) std::printf("shutdown after iteration %lld\n", static_cast<long long>(iteration));
        return 0;
      }
    }
  }
  manager.finish();
  if (leader && start.iteration >= training.train_iters)
    std::printf("nothing to train: resumed at iteration %lld, training.train_iters is %lld\n",
                static_cast<long long>(start.iteration), static_cast<long long>(training.train_iters));
  else if (leader)
    std::printf("done: %lld iterations, final loss %.6f\n", static_cast<long long>(training.train_iters), loss);
  return 0;
}

/// `cairn-train convert key=value…`: `cairn convert`, plus the external format through this
/// model's converter, both ways.
int convert(std::vector<std::string> arguments) {
  bool external_output = false, optimizer_given = false;
  for (auto const& a : arguments) {
    external_output = external_output || a == "output.format=external";
    optimizer_given = optimizer_given || a.starts_with("output.optimizer_state=");
  }
  if (external_output && !optimizer_given) arguments.push_back("output.optimizer_state=false"); // it holds none
  auto config = cairn::from_json<cairn::convert_config>(boost::json::object{}, arguments);
  cairn::comm::any_communicator comm(cairn::comm::single_process{});
  cairn::external::model_program<mlp_config> program{
      [&](mlp_config const& model) {
        train_config cfg;
        cfg.model = model;
        return trainer(cfg, comm).state();
      },
      [](mlp_config const& model) {
        train_config cfg;
        cfg.model = model;
        return cairn::to_json(cfg);
      },
      [](boost::json::value const& stored) { return cairn::parse_lenient<train_config>(stored).config.model; }};
  std::printf("%s\n", cairn::external::convert(config, converter(), program).c_str());
  return 0;
}

/// What `run` returns, or 2 for a config error and 1 for any other, each printed after `who`.
template <class Run> int exit_status(char const* who, Run&& run) {
  try {
    return run();
  } catch (cairn::config_error const& e) {
    std::fprintf(stderr, "%s: invalid configuration: %s\n", who, e.what());
    return 2;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "%s: error: %s\n", who, e.what());
    return 1;
  }
}

} // namespace example

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "convert")
    return example::exit_status("cairn-train convert", [&] { return example::convert({argv + 2, argv + argc}); });
  cairn::command_line_options options;
  options.program = "cairn-train";
  options.description = "Trains the example model, checkpointing, resuming and exporting as configured.\n"
                        "Also: cairn-train convert input.path=... input.format=... output.path=... output.format=...";
  options.flags = {{"--device", "device"}};
  auto cfg = cairn::parse_command_line<example::train_config>(argc, argv, options);
  if (!cfg) return cfg.exit_status();
  return example::exit_status("cairn-train", [&] { return example::train(std::move(*cfg)); });
}
