// Definitions of <cairn/checkpoint/weight_rule.hpp>: inline in a header-only build, compiled once
// by <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/weight_rule.hpp>

#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cairn::external {

/// Our `ours` is their `theirs`, unchanged.
CAIRN_DECL weight_rule renamed(std::string ours, std::string theirs) {
  auto same = [](std::vector<at::Tensor> const& t) { return t; };
  return {{std::move(ours)}, {std::move(theirs)}, same, same, true};
}
/// Our 2-D `ours` is their `theirs` transposed.
CAIRN_DECL weight_rule transposed(std::string ours, std::string theirs) {
  auto flip = [](std::vector<at::Tensor> const& t) { return std::vector<at::Tensor>{t[0].t().contiguous()}; };
  return {{std::move(ours)}, {std::move(theirs)}, flip, flip};
}
/// Our `ours` is their `theirs` concatenated along `dim` (a fused projection, say), in equal parts.
CAIRN_DECL weight_rule split(std::string ours, std::vector<std::string> theirs, std::int64_t dim) {
  auto parts = static_cast<std::int64_t>(theirs.size());
  return {{std::move(ours)},
          std::move(theirs),
          [=](std::vector<at::Tensor> const& t) {
            std::vector<at::Tensor> out;
            for (auto& piece : t[0].chunk(parts, dim)) out.push_back(piece.contiguous());
            return out;
          },
          [=](std::vector<at::Tensor> const& t) { return std::vector<at::Tensor>{at::cat(t, dim)}; }};
}

/// Our `ours` (several parameters) are their one `theirs`, concatenated along `dim`.
CAIRN_DECL weight_rule merged(std::vector<std::string> ours, std::string theirs, std::int64_t dim) {
  auto parts = static_cast<std::int64_t>(ours.size());
  return {std::move(ours),
          {std::move(theirs)},
          [=](std::vector<at::Tensor> const& t) { return std::vector<at::Tensor>{at::cat(t, dim)}; },
          [=](std::vector<at::Tensor> const& t) {
            std::vector<at::Tensor> out;
            for (auto& piece : t[0].chunk(parts, dim)) out.push_back(piece.contiguous());
            return out;
          }};
}

} // namespace cairn::external
