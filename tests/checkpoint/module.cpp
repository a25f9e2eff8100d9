// adam_state: a torch::nn::Module and its Adam optimizer checkpointed through views of the live
// tensors; a run resumed from it continues bitwise as if it had never stopped.
#include <cairn/checkpoint/module.hpp>
#include <cairn/checkpoint/save_load.hpp>
#include <cairn/comm/single_process.hpp>

#include <doctest/doctest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include "../io/temp_dir.hpp"

namespace {

cairn::comm::single_process comm;

struct trainer {
  torch::nn::Sequential net;
  torch::optim::Adam optimizer;

  explicit trainer(bool amsgrad = false)
      : net(torch::nn::Linear(4, 8), torch::nn::ReLU(), torch::nn::Linear(8, 2)),
        optimizer(net->parameters(), torch::optim::AdamOptions(1e-2).amsgrad(amsgrad)) {}

  void step(int iteration) {
    torch::manual_seed(iteration);
    auto x = torch::randn({16, 4});
    auto y = torch::randn({16, 2});
    optimizer.zero_grad();
    auto loss = (net->forward(x) - y).pow(2).mean();
    loss.backward();
    optimizer.step();
  }
};

bool same_parameters(trainer& a, trainer& b) {
  auto pa = a.net->parameters(), pb = b.net->parameters();
  for (std::size_t i = 0; i < pa.size(); ++i)
    if (!pa[i].equal(pb[i])) return false;
  return true;
}

} // namespace

TEST_CASE("a module and its Adam state, saved after 3 steps and resumed, go on bitwise like the original") {
  for (bool amsgrad : {false, true}) {
    CAPTURE(amsgrad);
    temp_dir dir;
    torch::manual_seed(0);
    trainer original(amsgrad);
    auto state = cairn::adam_state(*original.net, original.optimizer); // before the first step: state created
    REQUIRE(state.shard_names.size() == (amsgrad ? 4u : 3u));
    CHECK(state.parameters.front().layout.name == "0.weight");
    CHECK(state.parameters.back().layout.name == "2.bias");
    for (int i = 1; i <= 3; ++i) original.step(i);

    cairn::checkpoint_save_config save;
    save.path = dir / "3";
    save.optimizer_state = true;
    cairn::save_checkpoint(state, comm, save); // the views see what the steps wrote

    torch::manual_seed(99); // different initial weights
    trainer resumed(amsgrad);
    auto into = cairn::adam_state(*resumed.net, resumed.optimizer);
    CHECK_FALSE(same_parameters(original, resumed));
    cairn::checkpoint_load_config load;
    load.path = dir / "3";
    load.optimizer_state = true;
    cairn::load_checkpoint(into, comm, load);
    cairn::set_adam_step(resumed.optimizer, 3);
    CHECK(same_parameters(original, resumed));

    for (int i = 4; i <= 6; ++i) {
      original.step(i);
      resumed.step(i);
    }
    CHECK(same_parameters(original, resumed));
  }
}

TEST_CASE("without the step, the bias correction differs: set_adam_step is what makes it exact") {
  temp_dir dir;
  torch::manual_seed(0);
  trainer original;
  auto state = cairn::adam_state(*original.net, original.optimizer);
  for (int i = 1; i <= 3; ++i) original.step(i);
  cairn::checkpoint_save_config save;
  save.path = dir / "3";
  save.optimizer_state = true;
  cairn::save_checkpoint(state, comm, save);

  trainer resumed;
  auto into = cairn::adam_state(*resumed.net, resumed.optimizer);
  cairn::checkpoint_load_config load;
  load.path = dir / "3";
  load.optimizer_state = true;
  cairn::load_checkpoint(into, comm, load);
  original.step(4);
  resumed.step(4); // step 1 of its own count
  CHECK_FALSE(same_parameters(original, resumed));
}

TEST_CASE("a parameter the optimizer does not update is refused, naming it") {
  torch::nn::Sequential net(torch::nn::Linear(2, 2), torch::nn::Linear(2, 2));
  torch::optim::Adam optimizer(net[0]->parameters());
  try {
    (void)cairn::adam_state(*net, optimizer);
    FAIL("accepted");
  } catch (cairn::error const& e) {
    CHECK(std::string(e.what()).find("'1.weight'") != std::string::npos);
  }
}
