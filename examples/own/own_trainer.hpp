#pragma once
// The trainer of docs/own-trainer.md, verbatim (tests/consumer/own_trainer.cmake checks that the
// page shows this file): a model of its own, a stock libtorch optimizer, data parallel, a
// learning-rate schedule and a data cursor, checkpointed by cairn.

#include <cairn/cairn.hpp>

#include <boost/describe.hpp>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>
#include <torch/optim/sgd.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

struct gru_config {
  std::int64_t hidden = 16;
  std::int64_t layers = 2;
};
BOOST_DESCRIBE_STRUCT(gru_config, (), (hidden, layers))

struct own_config : cairn::trainer_config {
  gru_config model;
  // Warmup over 4 iterations, then cosine decay over 1000 to 0: counts of its own, so that a run
  // extended from 100 to 200 iterations keeps its curve (learning_rate.base=…, .decay=linear, …).
  cairn::learning_rate_config learning_rate{0.05, 4, cairn::learning_rate_decay::cosine, 1000, 0};
  std::int64_t batch = 8; // sequences per iteration, over all ranks
};
BOOST_DESCRIBE_STRUCT(own_config, (cairn::trainer_config), (model, learning_rate, batch))

// A GRU reading sequences of 4 features, its last hidden state mapped to one output.
struct sequence_model : torch::nn::Module {
  torch::nn::GRU gru{nullptr};
  torch::nn::Linear head{nullptr};
  explicit sequence_model(gru_config const& c)
      : gru(register_module("gru",
                            torch::nn::GRU(torch::nn::GRUOptions(4, c.hidden).num_layers(c.layers).batch_first(true)))),
        head(register_module("head", torch::nn::Linear(c.hidden, 1))) {}
  at::Tensor forward(at::Tensor x) { return head(std::get<0>(gru(x)).select(1, -1)); }
};

// Sample `n` of the data, whoever reads it: the data-parallel ranks read disjoint samples of the
// global batch, so the run means the same on any number of ranks.
inline std::pair<at::Tensor, at::Tensor> sample(std::int64_t n) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(n));
  auto x = at::randn({1, 6, 4}, generator);
  return {x, x.sum({1, 2}).view({1, 1}).tanh()};
}

inline int train(own_config& cfg) { // not const: a pretrained checkpoint's model config applies
  auto comm = cairn::comm::connect(cfg.comm, cfg.device == cairn::device_type::cuda, cfg.run.timeout());
  cairn::training_run run(cfg, &own_config::model, comm);

  torch::manual_seed(1); // the same initial weights on every rank
  auto net = std::make_shared<sequence_model>(cfg.model);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(cfg.learning_rate.base).momentum(0.9));
  auto state = cairn::optimizer_state(*net, sgd, /*replicated=*/true); // views; momentum and all

  // The data cursor, the next global sample: the same on every rank, so it means the same on any
  // number of ranks. Saved as an item; a resume on as many ranks gives it back, one on another
  // number reads saved rank 0's items (a checkpoint without it: the samples of the iterations done).
  auto start = run.start(state);
  std::int64_t cursor = start * cfg.batch;
  auto items = state.items;
  if (items.empty() && run.started().kind == cairn::start_kind::resumed) {
    items = cairn::saved_items(run.started().path, 0);
    if (comm.rank() == 0) std::printf("cursor from rank 0 of the checkpoint\n");
  }
  if (auto found = items.find("cursor"); found != items.end()) cursor = std::stoll(found->second);
  if (comm.rank() == 0 && start > 0) std::printf("cursor %lld\n", static_cast<long long>(cursor));

  auto per_rank = cfg.batch / comm.size();
  for (auto it = start + 1; it <= cfg.training.train_iters; ++it) {
    for (auto& group : sgd.param_groups())
      static_cast<torch::optim::SGDOptions&>(group.options()).lr(cfg.learning_rate.at(it));
    sgd.zero_grad();
    auto loss = at::zeros({1}, at::kDouble);
    for (std::int64_t k = 0; k < per_rank; ++k) {
      auto [x, y] = sample(cursor + comm.rank() * per_rank + k);
      auto l = (net->forward(x) - y).pow(2).mean() / double(cfg.batch);
      l.backward();
      loss += l.detach().to(at::kDouble);
    }
    for (auto& p : net->parameters()) { // the gradient of the global batch
      auto g = p.grad();
      comm.all_reduce(g, cairn::comm::reduce_op::sum);
    }
    comm.all_reduce(loss, cairn::comm::reduce_op::sum);
    sgd.step();
    cursor += cfg.batch;
    state.items["cursor"] = std::to_string(cursor);
    if (comm.rank() == 0) std::printf("iteration %lld loss %.17g\n", static_cast<long long>(it), loss.item<double>());
    if (auto stop = run.step(it, state, {{"loss", loss.item<double>()}})) return stop.exit_status();
  }
  run.finish();
  return 0;
}
