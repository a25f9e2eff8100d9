#pragma once
// cairn: requires libtorch

// How tensors map between our parameters and another framework's: renamed, transposed, split
// or merged. A converter (checkpoint/external.hpp) is a list of these plus a config mapping.

#include <cairn/detail/decl.hpp>

#include <ATen/core/Tensor.h>
#include <boost/json/object.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cairn::external {

/// Tensors mapped between our parameters and theirs: renamed, transformed, split or merged.
struct weight_rule {
  std::vector<std::string> ours;
  std::vector<std::string> theirs;
  std::function<std::vector<at::Tensor>(std::vector<at::Tensor> const&)> to_theirs;
  std::function<std::vector<at::Tensor>(std::vector<at::Tensor> const&)> to_ours;
  /// Set by `renamed`: theirs is ours as it is, so that a save can write each rank's part of it
  /// where it lies in the file instead of gathering it and running the rule.
  bool unchanged = false;
};

/// Our `ours` is their `theirs`, unchanged.
CAIRN_DECL weight_rule renamed(std::string ours, std::string theirs);
/// Our 2-D `ours` is their `theirs` transposed.
CAIRN_DECL weight_rule transposed(std::string ours, std::string theirs);
/// Our `ours` is their `theirs` concatenated along `dim` (a fused projection, say), in equal parts.
CAIRN_DECL weight_rule split(std::string ours, std::vector<std::string> theirs, std::int64_t dim);
/// Our `ours` (several parameters) are their one `theirs`, concatenated along `dim`.
CAIRN_DECL weight_rule merged(std::vector<std::string> ours, std::string theirs, std::int64_t dim);

/// A converter applied to one model config: everything saving and loading that model in the
/// external format takes, with no template left (`cairn::external::bind(converter, model)`).
/// `save_checkpoint` and `load_checkpoint` take it for the external format.
struct model_converter {
  std::string model_type;
  boost::json::object config; ///< the config.json of the model, model_type included
  std::vector<weight_rule> weights;
  std::function<bool(std::string const&)> skipped = {}; ///< their tensors a load skips (`converter::skipped`)
};

} // namespace cairn::external

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/weight_rule.ipp>
#endif
