// Definitions of <cairn/checkpoint/module.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/checkpoint/module.hpp>
#include <cairn/checkpoint/state.hpp>

#include <ATen/ops/full_like.h>
#include <ATen/ops/zeros_like.h>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <torch/nn/module.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace cairn::detail {

/// The key libtorch's optimizers file a parameter's state under: the address of its TensorImpl,
/// as text in libtorch 1.x and as a pointer in 2.x.
template <class Optimizer> auto optimizer_state_key(Optimizer const& optimizer, at::Tensor const& parameter) {
  using key = typename std::decay_t<decltype(optimizer.state())>::key_type;
  if constexpr (std::is_same_v<key, std::string>) {
    std::ostringstream text;
    text << static_cast<void const*>(parameter.unsafeGetTensorImpl());
    return text.str();
  } else {
    return static_cast<key>(parameter.unsafeGetTensorImpl());
  }
}

enum class optimizer_kind { sgd, adam, adamw, rmsprop, adagrad };

inline char const* optimizer_name(optimizer_kind kind) {
  switch (kind) {
  case optimizer_kind::sgd:
    return "SGD";
  case optimizer_kind::adam:
    return "Adam";
  case optimizer_kind::adamw:
    return "AdamW";
  case optimizer_kind::rmsprop:
    return "RMSprop";
  case optimizer_kind::adagrad:
    return "Adagrad";
  }
  return "?";
}

inline checkpoint_error optimizer_problem(std::string const& what) {
  return checkpoint_error(checkpoint_errc::invalid_state, "optimizer_state: " + what);
}

template <class Options> Options const& options_of(torch::optim::OptimizerParamGroup const& group) {
  return static_cast<Options const&>(group.options());
}

/// Zeros shaped as `p`, contiguous, that a state can view flat.
inline at::Tensor zeros_as(at::Tensor const& p) { return at::zeros_like(p.detach(), at::MemoryFormat::Contiguous); }

inline at::Tensor flat_view(at::Tensor const& t, std::string const& name, char const* what) {
  if (!t.is_contiguous())
    throw optimizer_problem(std::string(what) + " of '" + name + "' is not contiguous, so the state cannot view it");
  return t.detach().view({-1});
}

template <class State> std::int64_t step_of(State const& s) { return static_cast<std::int64_t>(s.step()); }
template <class State> void set_step(State& s, std::int64_t step) {
  s.step(static_cast<std::decay_t<decltype(s.step())>>(step));
}

/// A parameter of the module as the hooks see it.
struct bound_parameter {
  std::string name;
  at::Tensor parameter;             ///< the live parameter (or buffer)
  std::optional<std::size_t> group; ///< its group in the optimizer; none where it is frozen or a buffer
  at::Tensor momentum;              ///< SGD with momentum: the buffer the state's shard views
};

/// What keeps a libtorch optimizer in step with the state `optimizer_state` made of it.
class optimizer_hooks final : public state_hooks {
public:
  optimizer_hooks(torch::optim::Optimizer& optimizer, optimizer_kind kind, bool sgd_momentum)
      : optimizer_(optimizer), kind_(kind), sgd_momentum_(sgd_momentum), groups_(group_signature()) {}

  std::vector<bound_parameter> parameters;

  torch::optim::OptimizerParamGroup& group_of(bound_parameter const& b) { return optimizer_.param_groups().at(*b.group); }

  /// The optimizer's state of `p`, created as the optimizer would create it at its first step
  /// where it has none (SGD's is never created here: see `adopt`).
  template <class State> State* find(at::Tensor const& p, std::string const& name) {
    auto& states = optimizer_.state();
    auto found = states.find(optimizer_state_key(optimizer_, p));
    if (found == states.end()) return nullptr;
    auto* s = dynamic_cast<State*>(found->second.get());
    if (!s) throw optimizer_problem("the optimizer's state of '" + name + "' is not " + optimizer_name(kind_) + "'s");
    return s;
  }

  template <class State> State& make(bound_parameter const& b) {
    if (auto* s = find<State>(b.parameter, b.name)) return *s;
    auto made = std::make_unique<State>();
    set_step(*made, 0);
    auto& out = *made;
    optimizer_.state().emplace(optimizer_state_key(optimizer_, b.parameter), std::move(made));
    return out;
  }

  /// The optimizer's shards of `b` (views), its state created first where the optimizer
  /// creates it lazily with zeros, which changes nothing in how it goes on.
  std::vector<at::Tensor> shards(bound_parameter& b) {
    auto const& p = b.parameter;
    std::vector<at::Tensor> out;
    switch (kind_) {
    case optimizer_kind::sgd:
      if (sgd_momentum_) {
        b.momentum = zeros_as(p);
        adopt(b); // a buffer the optimizer made already (a state built after some steps)
        out.push_back(b.momentum.view({-1}));
      }
      break;
    case optimizer_kind::adam:
    case optimizer_kind::adamw: {
      auto moments = [&](auto& s, bool amsgrad) {
        if (!s.exp_avg().defined()) s.exp_avg(zeros_as(p));
        if (!s.exp_avg_sq().defined()) s.exp_avg_sq(zeros_as(p));
        if (amsgrad && !s.max_exp_avg_sq().defined()) s.max_exp_avg_sq(zeros_as(p));
        out = {flat_view(s.exp_avg(), b.name, "exp_avg"), flat_view(s.exp_avg_sq(), b.name, "exp_avg_sq")};
        if (amsgrad) out.push_back(flat_view(s.max_exp_avg_sq(), b.name, "max_exp_avg_sq"));
      };
      if (kind_ == optimizer_kind::adam)
        moments(make<torch::optim::AdamParamState>(b), options_of<torch::optim::AdamOptions>(group_of(b)).amsgrad());
      else
        moments(make<torch::optim::AdamWParamState>(b), options_of<torch::optim::AdamWOptions>(group_of(b)).amsgrad());
      break;
    }
    case optimizer_kind::rmsprop: {
      auto const& o = options_of<torch::optim::RMSpropOptions>(group_of(b));
      auto& s = make<torch::optim::RMSpropParamState>(b);
      if (!s.square_avg().defined()) s.square_avg(zeros_as(p));
      out.push_back(flat_view(s.square_avg(), b.name, "square_avg"));
      if (o.momentum() > 0) {
        if (!s.momentum_buffer().defined()) s.momentum_buffer(zeros_as(p));
        out.push_back(flat_view(s.momentum_buffer(), b.name, "momentum_buffer"));
      }
      if (o.centered()) {
        if (!s.grad_avg().defined()) s.grad_avg(zeros_as(p));
        out.push_back(flat_view(s.grad_avg(), b.name, "grad_avg"));
      }
      break;
    }
    case optimizer_kind::adagrad: {
      auto& s = make<torch::optim::AdagradParamState>(b);
      if (!s.sum().defined())
        s.sum(at::full_like(p.detach(), initial_accumulator(), at::MemoryFormat::Contiguous));
      out.push_back(flat_view(s.sum(), b.name, "sum"));
      break;
    }
    }
    return out;
  }

  /// SGD: where the optimizer made its momentum buffer of `b` (a copy of the first gradient, at
  /// its first step), its values go into the state's tensor, which becomes the optimizer's
  /// buffer; whether it had one.
  bool adopt(bound_parameter& b) {
    auto* s = find<torch::optim::SGDParamState>(b.parameter, b.name);
    if (!s || !s->momentum_buffer().defined()) return false;
    if (!s->momentum_buffer().is_same(b.momentum)) {
      b.momentum.copy_(s->momentum_buffer().detach());
      s->momentum_buffer(b.momentum);
    }
    return true;
  }

  boost::json::value save(model_state const&) override {
    check_groups();
    boost::json::object out;
    out["optimizer"] = optimizer_name(kind_);
    // Which trained parameters have no gradient: libtorch 1.x's zero_grad keeps a gradient once
    // made (zero), and an optimizer goes on updating a parameter with one (momentum, decay) and
    // skips one without; a resume gives each the same.
    boost::json::array no_gradient;
    for (auto const& b : parameters)
      if (b.group && !b.parameter.grad().defined()) no_gradient.emplace_back(b.name);
    out["without_gradient"] = std::move(no_gradient);
    if (kind_ == optimizer_kind::sgd) {
      if (!sgd_momentum_) return out;
      boost::json::array without;
      for (auto& b : parameters)
        if (b.group && !adopt(b)) {
          b.momentum.zero_();
          without.emplace_back(b.name);
        }
      out["without_momentum_buffer"] = std::move(without);
      return out;
    }
    boost::json::object steps;
    std::optional<std::int64_t> common;
    bool alike = true;
    for (auto const& b : parameters) {
      if (!b.group) continue;
      auto step = this->step(b);
      if (common && *common != step) alike = false;
      common = step;
      steps[b.name] = step;
    }
    if (alike) out["step"] = common.value_or(0);
    else out["steps"] = std::move(steps);
    return out;
  }

  void load(model_state const&, checkpoint_metadata const& loaded, boost::json::value const& saved,
            bool optimizer_loaded) override {
    check_groups();
    if (!optimizer_loaded) { // the weights alone: the optimizer starts afresh, as on a fresh module
      for (auto& b : parameters)
        if (b.group) {
          restart(b);
          b.parameter.mutable_grad().reset();
        }
      return;
    }
    auto const* record = saved.if_object();
    if (!saved.is_null() && !record) throw stored_problem("is not a JSON object");
    if (record) {
      auto const* name = record->if_contains("optimizer");
      if (!name || !name->is_string()) throw stored_problem("names no optimizer");
      if (*name != optimizer_name(kind_))
        throw stored_problem(std::string("is of ") + std::string(name->get_string()) + ", and this state's optimizer is " +
                             optimizer_name(kind_) + ": load the weights alone (optimizer_state=false) to start " +
                             optimizer_name(kind_) + " afresh");
      if (auto const* list = record->if_contains("without_gradient")) {
        auto without = names_in(*list, "without_gradient");
        at::NoGradGuard no_grad;
        for (auto& b : parameters) {
          if (!b.group) continue;
          if (without.contains(b.name)) b.parameter.mutable_grad().reset();
          else if (!b.parameter.grad().defined()) b.parameter.mutable_grad() = at::zeros_like(b.parameter.detach());
        }
      }
    }
    if (kind_ == optimizer_kind::sgd) {
      if (!sgd_momentum_) return;
      std::set<std::string> without;
      if (record)
        if (auto const* list = record->if_contains("without_momentum_buffer"))
          without = names_in(*list, "without_momentum_buffer");
      for (auto& b : parameters) {
        if (!b.group) continue;
        if (without.contains(b.name)) { // saved before its first step: the optimizer makes it then
          optimizer_.state().erase(optimizer_state_key(optimizer_, b.parameter));
          b.momentum.zero_();
        } else {
          auto* s = find<torch::optim::SGDParamState>(b.parameter, b.name);
          if (!s) {
            optimizer_.state().emplace(optimizer_state_key(optimizer_, b.parameter),
                                       std::make_unique<torch::optim::SGDParamState>());
            s = find<torch::optim::SGDParamState>(b.parameter, b.name);
          }
          s->momentum_buffer(b.momentum);
        }
      }
      return;
    }
    // A checkpoint saved without the step counts (by cairn before it stored them): the step of
    // its iteration, one optimizer step an iteration, as `set_adam_step(optimizer, iteration)`.
    auto step_from = [&](std::string const& name) -> std::int64_t {
      if (!record) return loaded.iteration.value_or(0);
      auto const* value = record->if_contains("step");
      if (!value)
        if (auto const* steps = record->if_contains("steps"); steps && steps->is_object())
          value = steps->get_object().if_contains(name);
      if (!value) throw stored_problem("has no step count of '" + name + "'");
      if (!value->is_int64() || value->get_int64() < 0)
        throw stored_problem("the step count of '" + name + "' is not a non-negative integer");
      return value->get_int64();
    };
    for (auto& b : parameters)
      if (b.group) set(b, step_from(b.name));
  }

private:
  torch::optim::Optimizer& optimizer_;
  optimizer_kind kind_;
  bool sgd_momentum_;
  std::vector<std::vector<void const*>> groups_; // the optimizer's parameters, by group, when the state was built

  std::vector<std::vector<void const*>> group_signature() const {
    std::vector<std::vector<void const*>> out;
    for (auto const& group : optimizer_.param_groups()) {
      out.emplace_back();
      for (auto const& p : group.params()) out.back().push_back(p.unsafeGetTensorImpl());
    }
    return out;
  }

  /// The state holds the parameters the optimizer held when it was built: a group added since
  /// (layers unfrozen) would be saved as frozen, with none of its optimizer state.
  void check_groups() const {
    if (group_signature() != groups_)
      throw optimizer_problem("the optimizer's parameters changed since the state was built (a parameter group added, "
                              "say): build the state again with optimizer_state, after the change");
  }

  /// Adagrad's first accumulator value: libtorch's fills every parameter's from the
  /// optimizer's defaults, whatever its group says.
  double initial_accumulator() const {
    return static_cast<torch::optim::AdagradOptions const&>(optimizer_.defaults()).initial_accumulator_value();
  }

  static std::set<std::string> names_in(boost::json::value const& list, char const* key) {
    std::set<std::string> out;
    if (!list.is_array()) throw stored_problem(std::string("'") + key + "' is not a list of names");
    for (auto const& name : list.get_array()) {
      if (!name.is_string()) throw stored_problem(std::string("'") + key + "' is not a list of names");
      out.insert(std::string(name.get_string()));
    }
    return out;
  }

  static checkpoint_error stored_problem(std::string const& what) {
    return checkpoint_error(checkpoint_errc::mismatch, "the checkpoint's optimizer_state metadata " + what);
  }

  template <class F> auto with_state(bound_parameter const& b, F f) {
    switch (kind_) {
    case optimizer_kind::adam:
      return f(*find<torch::optim::AdamParamState>(b.parameter, b.name));
    case optimizer_kind::adamw:
      return f(*find<torch::optim::AdamWParamState>(b.parameter, b.name));
    case optimizer_kind::rmsprop:
      return f(*find<torch::optim::RMSpropParamState>(b.parameter, b.name));
    default:
      return f(*find<torch::optim::AdagradParamState>(b.parameter, b.name));
    }
  }

  std::int64_t step(bound_parameter const& b) {
    return with_state(b, [](auto& s) { return step_of(s); });
  }
  void set(bound_parameter const& b, std::int64_t step) {
    with_state(b, [&](auto& s) { set_step(s, step); });
  }

  /// The optimizer's state of `b` as before its first step (the loader zeroed the tensors).
  void restart(bound_parameter& b) {
    if (kind_ == optimizer_kind::sgd) {
      if (sgd_momentum_) {
        optimizer_.state().erase(optimizer_state_key(optimizer_, b.parameter));
        b.momentum.zero_();
      }
      return;
    }
    set(b, 0);
    if (kind_ == optimizer_kind::adagrad)
      find<torch::optim::AdagradParamState>(b.parameter, b.name)->sum().fill_(initial_accumulator());
  }
};

/// The kind of `optimizer`, and the state shard names its groups' options give; refused where
/// cairn does not know it or its groups' options give different buffers.
inline std::pair<optimizer_kind, std::vector<std::string>> optimizer_shards(torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<torch::optim::LBFGS*>(&optimizer))
    throw optimizer_problem("LBFGS is not supported: its state is a history of the whole model's updates, not a "
                            "state per parameter that checkpoints can shard; train with another optimizer, or keep "
                            "its state yourself (whole_state and items)");
  optimizer_kind kind;
  if (dynamic_cast<torch::optim::SGD*>(&optimizer)) kind = optimizer_kind::sgd;
  else if (dynamic_cast<torch::optim::Adam*>(&optimizer)) kind = optimizer_kind::adam;
  else if (dynamic_cast<torch::optim::AdamW*>(&optimizer)) kind = optimizer_kind::adamw;
  else if (dynamic_cast<torch::optim::RMSprop*>(&optimizer)) kind = optimizer_kind::rmsprop;
  else if (dynamic_cast<torch::optim::Adagrad*>(&optimizer)) kind = optimizer_kind::adagrad;
  else
    throw optimizer_problem("an optimizer cairn does not know (it knows libtorch's SGD, Adam, AdamW, RMSprop and "
                            "Adagrad): build the state with whole_state and keep the optimizer's state in the "
                            "state's tensors (model_state::shard)");
  std::optional<std::vector<std::string>> names;
  for (auto const& group : optimizer.param_groups()) {
    std::vector<std::string> these;
    switch (kind) {
    case optimizer_kind::sgd:
      if (options_of<torch::optim::SGDOptions>(group).momentum() != 0) these = {"momentum_buffer"};
      break;
    case optimizer_kind::adam:
    case optimizer_kind::adamw:
      these = {"exp_avg", "exp_avg_sq"};
      if (kind == optimizer_kind::adam ? options_of<torch::optim::AdamOptions>(group).amsgrad()
                                       : options_of<torch::optim::AdamWOptions>(group).amsgrad())
        these.push_back("max_exp_avg_sq");
      break;
    case optimizer_kind::rmsprop: {
      auto const& o = options_of<torch::optim::RMSpropOptions>(group);
      these = {"square_avg"};
      if (o.momentum() > 0) these.push_back("momentum_buffer");
      if (o.centered()) these.push_back("grad_avg");
      break;
    }
    case optimizer_kind::adagrad:
      these = {"sum"};
      break;
    }
    if (names && *names != these)
      throw optimizer_problem(std::string("the parameter groups of the ") + optimizer_name(kind) +
                              " optimizer keep different state (momentum in one group only, AMSGrad in one "
                              "only, …): a state holds the same shards for every parameter; give the groups the "
                              "same such options");
    names = std::move(these);
  }
  return {kind, names.value_or(std::vector<std::string>{})};
}

} // namespace cairn::detail

namespace cairn {

CAIRN_DECL model_state optimizer_state(torch::nn::Module const& module, torch::optim::Optimizer& optimizer,
                                       bool replicated) {
  auto [kind, optimizer_shards] = detail::optimizer_shards(optimizer);
  bool sgd_momentum = kind == detail::optimizer_kind::sgd && !optimizer_shards.empty();
  auto hooks = std::make_shared<detail::optimizer_hooks>(optimizer, kind, sgd_momentum);
  auto named = module.named_parameters(/*recurse=*/true);
  // Every parameter the optimizer trains is one of the module's: the others would not be saved.
  for (auto& group : optimizer.param_groups())
    for (auto const& p : group.params()) {
      bool found = false;
      for (auto const& item : named) found = found || item.value().is_same(p);
      if (!found)
        throw detail::optimizer_problem("the optimizer trains a tensor of shape " + shape_text({p.sizes().begin(), p.sizes().end()}) +
                                        " that is not a parameter of the module: it would not be saved");
    }
  model_state state;
  state.shard_names = {"weights"};
  state.shard_names.insert(state.shard_names.end(), optimizer_shards.begin(), optimizer_shards.end());
  for (auto const& item : named) {
    detail::bound_parameter b{item.key(), item.value(), std::nullopt, {}};
    for (std::size_t g = 0; g < optimizer.param_groups().size(); ++g)
      for (auto const& p : optimizer.param_groups()[g].params())
        if (p.is_same(b.parameter)) b.group = g;
    std::vector<std::uint64_t> shape(b.parameter.sizes().begin(), b.parameter.sizes().end());
    parameter_state entry{{b.name, shape, to_dtype(b.parameter.scalar_type()), replicated, shard_layout::whole(shape)},
                          {detail::flat_view(b.parameter, b.name, "the weights")}};
    if (b.group) {
      auto shards = hooks->shards(b);
      entry.shards.insert(entry.shards.end(), shards.begin(), shards.end());
    } else { // frozen: saved with zero optimizer state
      for (std::size_t i = 0; i < optimizer_shards.size(); ++i) entry.shards.push_back(detail::zeros_as(b.parameter).view({-1}));
    }
    state.parameters.push_back(std::move(entry));
    hooks->parameters.push_back(std::move(b));
  }
  // The module's buffers (BatchNorm's running statistics): state too, saved as a frozen
  // parameter is; a model evaluated after a resume needs them.
  for (auto const& item : module.named_buffers(/*recurse=*/true)) {
    auto const& t = item.value();
    if (!t.defined()) continue;
    std::vector<std::uint64_t> shape(t.sizes().begin(), t.sizes().end());
    parameter_state entry{{item.key(), shape, to_dtype(t.scalar_type()), replicated, shard_layout::whole(shape)},
                          {detail::flat_view(t, item.key(), "the buffer")}};
    for (std::size_t i = 0; i < optimizer_shards.size(); ++i) entry.shards.push_back(detail::zeros_as(t).view({-1}));
    state.parameters.push_back(std::move(entry));
  }
  state.hooks = std::move(hooks);
  state.check();
  return state;
}

CAIRN_DECL model_state adam_state(torch::nn::Module const& module, torch::optim::Adam& optimizer, bool replicated) {
  return optimizer_state(module, optimizer, replicated);
}

CAIRN_DECL void set_adam_step(torch::optim::Adam& optimizer, std::int64_t step) {
  for (auto& group : optimizer.param_groups())
    for (auto const& p : group.params()) {
      auto& states = optimizer.state();
      auto found = states.find(detail::optimizer_state_key(optimizer, p));
      if (found == states.end()) {
        auto made = std::make_unique<torch::optim::AdamParamState>();
        made->exp_avg(detail::zeros_as(p));
        made->exp_avg_sq(detail::zeros_as(p));
        if (detail::options_of<torch::optim::AdamOptions>(group).amsgrad()) made->max_exp_avg_sq(detail::zeros_as(p));
        found = states.emplace(detail::optimizer_state_key(optimizer, p), std::move(made)).first;
      }
      auto* adam = dynamic_cast<torch::optim::AdamParamState*>(found->second.get());
      if (!adam) throw detail::optimizer_problem("set_adam_step: the optimizer's state of a parameter is not Adam's");
      detail::set_step(*adam, step);
    }
}

} // namespace cairn
