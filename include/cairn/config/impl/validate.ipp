// Definitions of <cairn/config/json.hpp> (validate): inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/config/json.hpp>

namespace cairn::detail {

CAIRN_DECL void finish_validation(config_ops const& ops, void* config, std::vector<diagnostic> earlier) {
  validation ctx(std::move(earlier));
  validate_config(ops, config, ctx);
  for (auto const& w : ctx.warnings()) emit(severity::warning, w);
  if (!ctx.errors().empty()) throw config_error(ctx.errors());
}

} // namespace cairn::detail
