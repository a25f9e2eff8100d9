// A stranger's trainer: a torch::nn::Module trained by a stock libtorch optimizer, or by a loop of
// its own, checkpointed through each constructor of a state. What is saved is what training
// wrote, a load writes into what training reads, and a run resumed from a save goes on bitwise
// as if it had never stopped (losses, weights, optimizer buffers, step counts).
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/load_plan.hpp>
#include <cairn/checkpoint/module.hpp>
#include <cairn/checkpoint/save_load.hpp>
#include <cairn/comm/single_process.hpp>

#include <ATen/ops/full.h>
#include <doctest/doctest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "../io/temp_dir.hpp"

namespace {

cairn::comm::single_process comm;

using optimizer_factory = std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<at::Tensor>)>;

/// A model of the trainer's own and a stock optimizer; the data of iteration `i` seeded by `i`.
struct trainer {
  torch::nn::Sequential net;
  std::unique_ptr<torch::optim::Optimizer> optimizer;

  trainer(optimizer_factory const& make, int seed) : net(nullptr) {
    torch::manual_seed(seed);
    net = torch::nn::Sequential(torch::nn::Linear(4, 8), torch::nn::Tanh(), torch::nn::Linear(8, 2));
    optimizer = make(net->parameters());
  }

  double step(int iteration) {
    torch::manual_seed(1000 + iteration);
    auto x = torch::randn({16, 4});
    auto y = torch::randn({16, 2});
    optimizer->zero_grad();
    auto loss = (net->forward(x) - y).pow(2).mean();
    loss.backward();
    optimizer->step();
    return loss.item<double>();
  }
};

bool bitwise_equal(at::Tensor const& a, at::Tensor const& b) {
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.numel() * a.element_size()) == 0;
}

/// Whether every tensor of two states (weights and optimizer buffers) is bitwise the same.
bool same_state(cairn::model_state const& a, cairn::model_state const& b) {
  if (a.shard_names != b.shard_names || a.parameters.size() != b.parameters.size()) return false;
  for (std::size_t p = 0; p < a.parameters.size(); ++p)
    for (std::size_t s = 0; s < a.shard_names.size(); ++s)
      if (!bitwise_equal(a.parameters[p].shards[s], b.parameters[p].shards[s])) return false;
  return true;
}

bool same_parameters(torch::nn::Module const& a, torch::nn::Module const& b) {
  auto pa = a.parameters(), pb = b.parameters();
  if (pa.size() != pb.size()) return false;
  for (std::size_t i = 0; i < pa.size(); ++i)
    if (!bitwise_equal(pa[i], pb[i])) return false;
  return true;
}

void save(cairn::model_state const& state, std::filesystem::path const& path, int iteration,
          cairn::checkpoint_format format = cairn::checkpoint_format::distributed) {
  cairn::checkpoint_save_config config;
  config.path = path;
  config.format = format;
  config.optimizer_state = true;
  cairn::save_checkpoint(state, comm, config, {}, boost::json::object{{"iteration", iteration}});
}

cairn::checkpoint_metadata load(cairn::model_state& state, std::filesystem::path const& path,
                                bool optimizer_state = true,
                                cairn::checkpoint_format format = cairn::checkpoint_format::distributed) {
  cairn::checkpoint_load_config config;
  config.path = path;
  config.format = format;
  config.optimizer_state = optimizer_state;
  return cairn::load_checkpoint(state, comm, config);
}

struct optimizer_case {
  char const* name;
  optimizer_factory make;
  std::vector<std::string> shards; ///< after `weights`, as libtorch names them
};

std::vector<optimizer_case> optimizers() {
  using namespace torch::optim;
  auto of = [](auto options) {
    return [options](std::vector<at::Tensor> p) -> std::unique_ptr<Optimizer> {
      using O = std::decay_t<decltype(options)>;
      if constexpr (std::is_same_v<O, SGDOptions>)
        return std::make_unique<SGD>(p, options);
      else if constexpr (std::is_same_v<O, AdamOptions>)
        return std::make_unique<Adam>(p, options);
      else if constexpr (std::is_same_v<O, AdamWOptions>)
        return std::make_unique<AdamW>(p, options);
      else if constexpr (std::is_same_v<O, RMSpropOptions>)
        return std::make_unique<RMSprop>(p, options);
      else
        return std::make_unique<Adagrad>(p, options);
    };
  };
  return {
      {"SGD", of(SGDOptions(0.1)), {}},
      {"SGD momentum, dampening",
       of(SGDOptions(0.1).momentum(0.9).dampening(0.25).weight_decay(1e-3)),
       {"momentum_buffer"}},
      {"SGD nesterov", of(SGDOptions(0.1).momentum(0.8).nesterov(true)), {"momentum_buffer"}},
      {"Adam", of(AdamOptions(1e-2)), {"exp_avg", "exp_avg_sq"}},
      {"Adam AMSGrad",
       of(AdamOptions(1e-2).amsgrad(true).weight_decay(1e-2)),
       {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}},
      {"AdamW", of(AdamWOptions(1e-2)), {"exp_avg", "exp_avg_sq"}},
      {"AdamW AMSGrad", of(AdamWOptions(1e-2).amsgrad(true)), {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}},
      {"RMSprop", of(RMSpropOptions(1e-2)), {"square_avg"}},
      {"RMSprop centered, momentum",
       of(RMSpropOptions(1e-2).momentum(0.5).centered(true)),
       {"square_avg", "momentum_buffer", "grad_avg"}},
      {"Adagrad", of(AdagradOptions(1e-1).lr_decay(0.01).initial_accumulator_value(0.1)), {"sum"}},
  };
}

} // namespace

TEST_CASE("every stock optimizer: saved at iteration k and resumed, a run goes on bitwise like an uninterrupted one") {
  for (auto const& o : optimizers()) {
    for (int k : {0, 1, 3}) { // 0: before the first step, where libtorch has not made its buffers yet
      for (auto format : {cairn::checkpoint_format::distributed, cairn::checkpoint_format::state_dict}) {
        CAPTURE(o.name);
        CAPTURE(k);
        CAPTURE(cairn::format_name(format));
        temp_dir dir;
        trainer original(o.make, 0);
        auto state = cairn::optimizer_state(*original.net, *original.optimizer); // before the first step
        std::vector<std::string> names{"weights"};
        names.insert(names.end(), o.shards.begin(), o.shards.end());
        REQUIRE(state.shard_names == names);
        std::vector<double> losses;
        if (k == 0) save(state, dir / "k", 0, format);
        for (int i = 1; i <= 6; ++i) {
          losses.push_back(original.step(i));
          if (i == k) save(state, dir / "k", k, format);
        }

        // Uninterrupted, the run's own reference: built the same, trained the same, no state.
        trainer reference(o.make, 0);
        std::vector<double> reference_losses;
        for (int i = 1; i <= 6; ++i) reference_losses.push_back(reference.step(i));
        CHECK(reference_losses == losses); // building the state changed nothing in how it trains
        CHECK(same_parameters(*reference.net, *original.net));

        trainer resumed(o.make, 99); // other initial weights, a fresh optimizer
        auto into = cairn::optimizer_state(*resumed.net, *resumed.optimizer);
        CHECK_FALSE(same_parameters(*resumed.net, *original.net));
        load(into, dir / "k", true, format);
        std::vector<double> resumed_losses(losses.begin(), losses.begin() + k);
        for (int i = k + 1; i <= 6; ++i) resumed_losses.push_back(resumed.step(i));
        CHECK(resumed_losses == losses);
        CHECK(same_parameters(*resumed.net, *original.net));
        save(state, dir / "a", 6, format); // the optimizers' buffers now, through each state
        save(into, dir / "b", 6, format);
        auto a = cairn::optimizer_state(*reference.net, *reference.optimizer); // a third view of the same
        CHECK(same_state(state, into));
        CHECK(same_state(state, a));
      }
    }
  }
}

TEST_CASE("the step counts are saved with the checkpoint and restored by its load") {
  temp_dir dir;
  auto adam = [](std::vector<at::Tensor> p) { return std::make_unique<torch::optim::Adam>(p); };
  trainer original(adam, 0);
  auto state = cairn::optimizer_state(*original.net, *original.optimizer);
  for (int i = 1; i <= 4; ++i) original.step(i);
  save(state, dir / "4", 7); // the iteration is not the step count: the step count is what is restored
  trainer resumed(adam, 1);
  auto into = cairn::optimizer_state(*resumed.net, *resumed.optimizer);
  auto metadata = load(into, dir / "4");
  CHECK(metadata.metadata.at("optimizer_state").at("optimizer") == "Adam");
  CHECK(metadata.metadata.at("optimizer_state").at("step") == 4);
  CHECK(resumed.optimizer->state().size() == 4);
  for (auto const& entry : resumed.optimizer->state())
    CHECK(static_cast<torch::optim::AdamParamState const&>(*entry.second).step() == 4);
}

TEST_CASE("SGD's first momentum buffer is the first gradient itself: -0.0 stays -0.0, as without a state") {
  // A weight whose gradient is -0.0: libtorch copies it into the buffer at the first step; a
  // buffer made early (zero) and updated would hold +0.0.
  torch::nn::Linear layer(torch::nn::LinearOptions(1, 1).bias(false));
  torch::optim::SGD sgd(layer->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  auto state = cairn::optimizer_state(*layer, sgd);
  CHECK(sgd.state().empty());              // left to SGD
  (layer->weight * -0.0).sum().backward(); // the first gradient: no zero_grad before it, which would add +0.0
  REQUIRE(std::signbit(layer->weight.grad().item<float>()));
  sgd.step();
  temp_dir dir;
  save(state, dir / "1", 1); // takes SGD's buffer into the state
  CHECK(std::signbit(state.shard("weight", "momentum_buffer").item<float>()));
  auto const& buffer = static_cast<torch::optim::SGDParamState const&>(*sgd.state().begin()->second).momentum_buffer();
  CHECK(std::signbit(buffer.item<float>()));
  buffer.fill_(0.5); // the state views SGD's buffer now
  CHECK(state.shard("weight", "momentum_buffer").item<float>() == 0.5f);
}

TEST_CASE("a load of the weights alone starts the optimizer afresh, as a fresh optimizer from those weights") {
  for (auto const& o : optimizers()) {
    CAPTURE(o.name);
    temp_dir dir;
    trainer original(o.make, 0);
    auto state = cairn::optimizer_state(*original.net, *original.optimizer);
    for (int i = 1; i <= 3; ++i) original.step(i);
    save(state, dir / "3", 3);

    trainer continued(o.make, 5);
    for (int i = 1; i <= 2; ++i) continued.step(i); // an optimizer with history of its own
    auto into = cairn::optimizer_state(*continued.net, *continued.optimizer);
    load(into, dir / "3", /*optimizer_state=*/false);
    CHECK(same_parameters(*continued.net, *original.net));

    trainer fresh(o.make, 5);
    {
      at::NoGradGuard no_grad;
      auto from = original.net->parameters(), to = fresh.net->parameters();
      for (std::size_t i = 0; i < to.size(); ++i) to[i].copy_(from[i]);
    }
    for (int i = 4; i <= 6; ++i) CHECK(continued.step(i) == fresh.step(i));
    CHECK(same_parameters(*continued.net, *fresh.net));
  }
}

TEST_CASE("a checkpoint saved without step counts resumes Adam at its iteration's step, as set_adam_step did") {
  temp_dir dir;
  auto adam = [](std::vector<at::Tensor> p) { return std::make_unique<torch::optim::Adam>(p); };
  trainer original(adam, 0);
  auto state = cairn::optimizer_state(*original.net, *original.optimizer);
  for (int i = 1; i <= 3; ++i) original.step(i);
  auto without = state;
  without.hooks.reset(); // what cairn saved before it stored them
  save(without, dir / "3", 3);
  trainer resumed(adam, 1);
  auto into = cairn::optimizer_state(*resumed.net, *resumed.optimizer);
  load(into, dir / "3");
  for (int i = 4; i <= 6; ++i) CHECK(original.step(i) == resumed.step(i));
  CHECK(same_parameters(*original.net, *resumed.net));
}

TEST_CASE("a checkpoint whose optimizer_state record is not what a save writes is refused, naming it") {
  temp_dir dir;
  auto adam = [](std::vector<at::Tensor> p) { return std::make_unique<torch::optim::Adam>(p); };
  trainer original(adam, 0);
  auto state = cairn::optimizer_state(*original.net, *original.optimizer);
  auto without = state;
  without.hooks.reset();
  for (auto const& [label, record] : std::vector<std::pair<char const*, boost::json::value>>{
           {"negative", boost::json::object{{"step", -1}}},
           {"text", boost::json::object{{"step", "3"}}},
           {"not an object", boost::json::array{1, 2}},
           {"no step", boost::json::object{{"optimizer", "Adam"}}}}) {
    CAPTURE(label);
    cairn::checkpoint_save_config config;
    config.path = dir / label;
    config.optimizer_state = true;
    cairn::save_checkpoint(without, comm, config, {}, boost::json::object{{"optimizer_state", record}});
    trainer resumed(adam, 1);
    auto into = cairn::optimizer_state(*resumed.net, *resumed.optimizer);
    try {
      load(into, dir / label);
      FAIL("loaded");
    } catch (cairn::checkpoint_error const& e) {
      CHECK(std::string(e.what()).find("optimizer_state") != std::string::npos);
    }
  }
}

TEST_CASE("what optimizer_state refuses, it names") {
  torch::nn::Sequential net(torch::nn::Linear(2, 2), torch::nn::Linear(2, 2));
  auto message = [&](torch::optim::Optimizer& o) -> std::string {
    try {
      (void)cairn::optimizer_state(*net, o);
    } catch (cairn::error const& e) {
      return e.what();
    }
    return "accepted";
  };
  torch::optim::LBFGS lbfgs(net->parameters());
  CHECK(message(lbfgs).find("LBFGS is not supported") != std::string::npos);

  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(net[0]->parameters(),
                      std::make_unique<torch::optim::AdamOptions>(torch::optim::AdamOptions().amsgrad(true)));
  groups.emplace_back(net[1]->parameters(), std::make_unique<torch::optim::AdamOptions>(torch::optim::AdamOptions()));
  torch::optim::Adam mixed(groups);
  CHECK(message(mixed).find("parameter groups") != std::string::npos);

  auto stray = torch::zeros({3}, torch::requires_grad());
  torch::optim::SGD foreign({stray}, torch::optim::SGDOptions(0.1));
  CHECK(message(foreign).find("not a parameter of the module") != std::string::npos);
}

TEST_CASE("a frozen parameter, not in the optimizer, is saved and loaded with its weights") {
  temp_dir dir;
  torch::manual_seed(0);
  torch::nn::Sequential net(torch::nn::Linear(2, 2), torch::nn::Linear(2, 2));
  torch::optim::Adam adam(net[1]->parameters());
  auto state = cairn::optimizer_state(*net, adam);
  save(state, dir / "0", 0);
  torch::manual_seed(1);
  torch::nn::Sequential other(torch::nn::Linear(2, 2), torch::nn::Linear(2, 2));
  torch::optim::Adam other_adam(other[1]->parameters());
  auto into = cairn::optimizer_state(*other, other_adam);
  load(into, dir / "0");
  CHECK(same_parameters(*net, *other));
}

// --- the other constructors: the new user's pattern, module -> state -> train -> save -> fresh module -> load

namespace {

/// Trains `net` 3 steps with plain SGD of libtorch on what the model computes with.
void train(torch::nn::Module& net, std::function<at::Tensor(at::Tensor)> forward) {
  torch::optim::SGD sgd(net.parameters(), torch::optim::SGDOptions(0.1));
  for (int i = 1; i <= 3; ++i) {
    torch::manual_seed(i);
    auto x = torch::randn({8, 4});
    sgd.zero_grad();
    forward(x).pow(2).mean().backward();
    sgd.step();
  }
}

std::vector<std::pair<std::string, at::Tensor>> named(torch::nn::Module const& net) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (auto const& item : net.named_parameters()) out.emplace_back(item.key(), item.value());
  return out;
}

/// The module's parameters made views of the state's tensors: what a state that owns its
/// tensors asks of the model.
void bind_module(torch::nn::Module& net, cairn::model_state& state) {
  at::NoGradGuard no_grad;
  for (auto const& item : net.named_parameters()) {
    auto& weights = state.shard(item.key(), "weights");
    weights.copy_(item.value().detach().reshape({-1})); // a fresh state's (zero) or a copy: the module's values
    item.value().set_data(weights.view(item.value().sizes()));
  }
}

} // namespace

TEST_CASE("every constructor of a state: what is trained is what is saved, and a load reaches the fresh model") {
  using builder = std::function<cairn::model_state(torch::nn::Linear&)>;
  std::vector<std::pair<char const*, builder>> constructors{
      {"whole_state", [](torch::nn::Linear& m) { return cairn::whole_state(named(*m), {"momentum_buffer"}); }},
      {"add_parameter of a whole tensor",
       [](torch::nn::Linear& m) {
         cairn::model_state state;
         for (auto const& [name, t] : named(*m))
           cairn::add_parameter(state, name, t, cairn::shard_layout::whole({t.sizes().begin(), t.sizes().end()}));
         return state;
       }},
      {"add_parameter_copy, the model bound to the state's tensors",
       [](torch::nn::Linear& m) {
         cairn::model_state state;
         for (auto const& [name, t] : named(*m))
           cairn::add_parameter_copy(state, name, t, cairn::shard_layout::whole({t.sizes().begin(), t.sizes().end()}));
         bind_module(*m, state);
         return state;
       }},
      {"add_parameter of a shape, the model bound to the state's tensors",
       [](torch::nn::Linear& m) {
         cairn::model_state state;
         for (auto const& [name, t] : named(*m)) {
           std::vector<std::uint64_t> shape(t.sizes().begin(), t.sizes().end());
           cairn::add_parameter(state, name, shape, {cairn::shard_layout::whole(shape), false});
         }
         bind_module(*m, state);
         return state;
       }},
      {"optimizer_state", [](torch::nn::Linear& m) {
         static std::vector<std::unique_ptr<torch::optim::SGD>> kept; // lives as long as the state's views
         kept.push_back(std::make_unique<torch::optim::SGD>(m->parameters(), torch::optim::SGDOptions(0.1)));
         return cairn::optimizer_state(*m, *kept.back());
       }}};
  for (auto const& [label, build] : constructors) {
    CAPTURE(label);
    temp_dir dir;
    torch::manual_seed(0);
    torch::nn::Linear model(4, 3);
    auto state = build(model);
    auto initial = model->weight.detach().clone();
    train(*model, [&](at::Tensor x) { return model->forward(x); });
    REQUIRE_FALSE(model->weight.detach().equal(initial));
    save(state, dir / "3", 3);

    torch::manual_seed(7);
    torch::nn::Linear fresh(4, 3);
    auto into = build(fresh);
    load(into, dir / "3");
    CHECK(bitwise_equal(fresh->weight.detach(), model->weight.detach())); // the trained weights, not the initial
    CHECK(bitwise_equal(fresh->bias.detach(), model->bias.detach()));
    CHECK(fresh->forward(at::ones({1, 4})).equal(model->forward(at::ones({1, 4}))));
  }
}

TEST_CASE("add_parameter views a contiguous shard and refuses one it cannot view, naming the copy") {
  auto whole = at::arange(24, at::kFloat).view({6, 4});
  cairn::model_state state;
  auto& rows = cairn::add_parameter(state, "rows", whole, cairn::split_rows({6, 4}, 1, 2));
  whole[4][1] = -1.0f; // training writes into the tensor: the state sees it
  CHECK(rows.shards[0].view({3, 4})[1][1].item<float>() == -1.0f);
  auto& flat = cairn::add_parameter(state, "flat", whole, cairn::flat_slice({6, 4}, 1, 3));
  CHECK(flat.shards[0].data_ptr<float>() == whole.data_ptr<float>() + 8);
  try {
    cairn::add_parameter(state, "columns", whole, cairn::split_columns({6, 4}, 0, 2));
    FAIL("a block of columns viewed");
  } catch (cairn::checkpoint_error const& e) {
    CHECK(std::string(e.what()).find("'columns'") != std::string::npos);
    CHECK(std::string(e.what()).find("add_parameter_copy") != std::string::npos);
  }
  auto& copy = cairn::add_parameter_copy(state, "columns", whole, cairn::split_columns({6, 4}, 0, 2));
  whole[0][0] = 100.0f;
  CHECK(copy.shards[0][0].item<float>() == 0.0f); // the state's own
  try {
    (void)cairn::whole_state({{"t", whole.t()}});
    FAIL("a transposed tensor viewed");
  } catch (cairn::checkpoint_error const& e) {
    CHECK(std::string(e.what()).find("'t' is not contiguous") != std::string::npos);
  }
  try {
    (void)state.shard("rows", "exp_avg");
    FAIL("a shard that is not there");
  } catch (cairn::checkpoint_error const& e) {
    CHECK(std::string(e.what()).find("no shard 'exp_avg' (its shards: weights)") != std::string::npos);
  }
}

namespace {

/// A model with a branch some steps leave unused: libtorch 1.x's zero_grad keeps its gradient
/// (zero) once made, and an optimizer goes on updating it with it (momentum, decay).
struct branching : torch::nn::Module {
  torch::nn::Linear main{nullptr}, side{nullptr};
  branching()
      : main(register_module("main", torch::nn::Linear(4, 2))), side(register_module("side", torch::nn::Linear(4, 2))) {
  }
};

struct branching_trainer {
  std::shared_ptr<branching> net;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  branching_trainer(optimizer_factory const& make, int seed) {
    torch::manual_seed(seed);
    net = std::make_shared<branching>();
    optimizer = make(net->parameters());
  }
  double step(int iteration) {
    torch::manual_seed(1000 + iteration);
    auto x = torch::randn({16, 4});
    optimizer->zero_grad();
    auto y = net->main(x);
    if (iteration % 3 == 0) y = y + net->side(x); // the side branch at iterations 3 and 6 only
    auto loss = y.pow(2).mean();
    loss.backward();
    optimizer->step();
    return loss.item<double>();
  }
};

} // namespace

TEST_CASE("a branch some steps leave unused: the resumed run updates it as the uninterrupted one does") {
  for (auto const& o : optimizers()) {
    CAPTURE(o.name);
    temp_dir dir;
    branching_trainer original(o.make, 0);
    auto state = cairn::optimizer_state(*original.net, *original.optimizer);
    std::vector<double> losses;
    for (int i = 1; i <= 6; ++i) {
      losses.push_back(original.step(i));
      if (i == 4) save(state, dir / "4", 4); // the side branch has a gradient (zero since step 4)
    }
    branching_trainer resumed(o.make, 9);
    auto into = cairn::optimizer_state(*resumed.net, *resumed.optimizer);
    load(into, dir / "4");
    for (int i = 5; i <= 6; ++i) CHECK(resumed.step(i) == losses[static_cast<std::size_t>(i - 1)]);
    CHECK(same_parameters(*resumed.net, *original.net));
  }
}

TEST_CASE("a module's buffers (BatchNorm's running statistics) are saved and loaded with its parameters") {
  temp_dir dir;
  auto make = [](int seed) {
    torch::manual_seed(seed);
    return torch::nn::Sequential(torch::nn::Linear(4, 8), torch::nn::BatchNorm1d(8), torch::nn::Linear(8, 1));
  };
  auto net = make(0);
  torch::optim::Adam adam(net->parameters());
  auto state = cairn::optimizer_state(*net, adam);
  CHECK(state.find("1.running_mean") != nullptr);
  CHECK(state.find("1.num_batches_tracked") != nullptr);
  for (int i = 1; i <= 3; ++i) {
    auto x = torch::randn({16, 4});
    adam.zero_grad();
    net->forward(x).pow(2).mean().backward();
    adam.step();
  }
  save(state, dir / "3", 3);
  auto fresh = make(5);
  torch::optim::Adam fresh_adam(fresh->parameters());
  auto into = cairn::optimizer_state(*fresh, fresh_adam);
  load(into, dir / "3");
  net->eval();
  fresh->eval();
  auto x = torch::randn({4, 4});
  CHECK(bitwise_equal(fresh->forward(x), net->forward(x)));
}

TEST_CASE("a checkpoint of another optimizer, or an optimizer changed since its state was built, is refused") {
  temp_dir dir;
  auto adam = [](std::vector<at::Tensor> p) { return std::make_unique<torch::optim::Adam>(p); };
  auto adamw = [](std::vector<at::Tensor> p) { return std::make_unique<torch::optim::AdamW>(p); };
  trainer original(adam, 0);
  auto state = cairn::optimizer_state(*original.net, *original.optimizer);
  original.step(1);
  save(state, dir / "1", 1);
  trainer other(adamw, 1); // the same shards, another optimizer
  auto into = cairn::optimizer_state(*other.net, *other.optimizer);
  try {
    load(into, dir / "1");
    FAIL("Adam's state loaded into AdamW");
  } catch (cairn::checkpoint_error const& e) {
    CHECK(std::string(e.what()).find("is of Adam, and this state's optimizer is AdamW: load the weights alone") !=
          std::string::npos);
  }
  load(into, dir / "1", /*optimizer_state=*/false); // the named fix

  auto extra = torch::zeros({3}, torch::requires_grad());
  original.optimizer->add_param_group(torch::optim::OptimizerParamGroup({extra}));
  try {
    save(state, dir / "2", 2);
    FAIL("saved a state that misses a group");
  } catch (cairn::checkpoint_error const& e) {
    CHECK(std::string(e.what()).find("build the state again") != std::string::npos);
  }
}

TEST_CASE("a save's items: saved_items reads them on any world size, and a plan on another names those dropped") {
  temp_dir dir;
  auto state = cairn::whole_state({{"w", at::ones({4})}});
  state.items["cursor"] = "64";
  state.items["generator"] = std::string("\x01\x02", 2);
  save(state, dir / "1", 1);
  auto saved = cairn::saved_items(dir / "1");
  REQUIRE(saved.size() == 1);
  CHECK(saved[0] == state.items);

  cairn::run_layout run;
  run.shard_names = {"weights"};
  auto one = state.layout();
  one.parameters[0].replicated = true;
  run.ranks = {one};
  CHECK(cairn::plan_load(dir / "1", run).dropped_items.empty()); // as many ranks: each gets its own
  run.ranks = {one, one};
  auto plan = cairn::plan_load(dir / "1", run);
  CHECK(plan.problems.empty());
  CHECK(plan.resharded.empty()); // the same whole tensor, one more replica of it
  CHECK(plan.dropped_items == std::vector<std::string>{"cursor", "generator"});

  // An item whose bytes were altered: saved_items names the file.
  auto file = dir / "1" / "rank_0.safetensors";
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto at = bytes.find("3634"); // "64" in hexadecimal, in the header
  REQUIRE(at != std::string::npos);
  bytes[at + 1] = '5';
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  try {
    (void)cairn::saved_items(dir / "1");
    FAIL("an altered item read");
  } catch (cairn::error const& e) {
    CHECK(std::string(e.what()).find("rank_0.safetensors") != std::string::npos);
    CHECK(std::string(e.what()).find("item 'cursor' is corrupt") != std::string::npos);
  }
}
