#pragma once

// A learning-rate schedule as configs describe it: a linear warmup, then a constant rate or a
// linear or cosine decay to a minimum, each counted in iterations of its own, not in
// `train_iters`, so that a run extended from 100 to 200 iterations keeps its curve. No libtorch:
// the trainer hands the rate to its optimizer.
//
//     for (auto& group : sgd.param_groups())
//       static_cast<torch::optim::SGDOptions&>(group.options()).lr(cfg.learning_rate.at(iteration));

#include <cairn/config/check.hpp>
#include <cairn/config/field.hpp>
#include <cairn/config/validation.hpp>

#include <boost/describe/class.hpp>
#include <boost/describe/enum.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace cairn {

/// How the rate goes from `base` to `minimum` after the warmup.
BOOST_DEFINE_ENUM_CLASS(learning_rate_decay, constant, linear, cosine)

struct learning_rate_config {
  double base = 1e-3;
  std::int64_t warmup_iterations = 0;
  learning_rate_decay decay = learning_rate_decay::constant;
  std::int64_t decay_iterations = 0;
  double minimum = 0;

  void validate(validation& v) {
    if (decay != learning_rate_decay::constant && decay_iterations <= 0)
      v.error("decay_iterations", "must be > 0 when decay is linear or cosine (the iterations the decay takes)");
    if (minimum > base) v.error("minimum", "must be at most base (" + std::to_string(base) + ")");
  }

  /// The rate of iteration `iteration` (counted from 1): `base * iteration / warmup_iterations`
  /// during the warmup, then `minimum + (base - minimum) * f(t)` with `t` the fraction of
  /// `decay_iterations` gone since the warmup (1 past them): f = 1 (constant), 1 - t (linear),
  /// (1 + cos(pi t)) / 2 (cosine).
  [[nodiscard]] double at(std::int64_t iteration) const {
    if (warmup_iterations > 0 && iteration <= warmup_iterations)
      return base * double(std::max<std::int64_t>(iteration, 0)) / double(warmup_iterations);
    if (decay == learning_rate_decay::constant) return base;
    auto t = std::min(1.0, double(iteration - warmup_iterations) / double(std::max<std::int64_t>(decay_iterations, 1)));
    double f = decay == learning_rate_decay::linear ? 1 - t : 0.5 * (1 + std::cos(3.14159265358979323846 * t));
    return minimum + (base - minimum) * f;
  }
};
BOOST_DESCRIBE_STRUCT(learning_rate_config, (), (base, warmup_iterations, decay, decay_iterations, minimum))

constexpr auto cairn_fields(learning_rate_config const*) {
  return fields(
      field(&learning_rate_config::base, "The rate after the warmup, before any decay.", hint::core,
            check::non_negative),
      field(&learning_rate_config::warmup_iterations, "Iterations of linear warmup from 0 to base (0: none).",
            hint::core, check::non_negative),
      field(&learning_rate_config::decay, "After the warmup: constant, linear or cosine to minimum.", hint::core),
      field(&learning_rate_config::decay_iterations,
            "Iterations the decay takes after the warmup, its own count (not training.train_iters): the rate "
            "is minimum after them.",
            hint::core, check::non_negative),
      field(&learning_rate_config::minimum, "The rate the decay ends at.", hint::core, check::non_negative));
}

} // namespace cairn
