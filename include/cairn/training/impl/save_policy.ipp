// Definitions of <cairn/training/save_policy.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/config.hpp>
#include <cairn/config/mixin.hpp>
#include <cairn/training/callback.hpp>
#include <cairn/training/interval.hpp>
#include <cairn/training/save_policy.hpp>

#include <boost/describe/class.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace cairn {

CAIRN_DECL std::vector<std::int64_t> checkpoint_base_config::to_delete(std::vector<std::int64_t> iterations) const {
  std::vector<std::int64_t> candidates;
  if (!keep) return candidates;
  std::sort(iterations.begin(), iterations.end());
  iterations.erase(std::unique(iterations.begin(), iterations.end()), iterations.end());
  for (auto iteration : iterations)
    if (enabled(iteration) && !kept_forever(iteration)) candidates.push_back(iteration);
  auto excess = static_cast<std::ptrdiff_t>(candidates.size()) - static_cast<std::ptrdiff_t>(*keep);
  candidates.resize(static_cast<std::size_t>(std::max<std::ptrdiff_t>(excess, 0)));
  return candidates;
}

CAIRN_DECL checkpoint_save_config checkpoint_config::save_config(std::filesystem::path path) const {
  checkpoint_save_config save;
  save.path = std::move(path);
  save.format = checkpoint_format::distributed;
  save.model_weights = true;
  save.optimizer_state = true;
  return save;
}

CAIRN_DECL checkpoint_save_config export_config::save_config(std::filesystem::path path) const {
  checkpoint_save_config save;
  save.path = std::move(path);
  return assign_shared_bases(save, *this);
}

} // namespace cairn
