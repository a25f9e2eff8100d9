// Definitions of <cairn/training/save_report.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/diagnostics.hpp>
#include <cairn/progress.hpp>
#include <cairn/training/save_report.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

namespace cairn {

CAIRN_DECL std::string progress_text(std::string const& what, std::uint64_t bytes, double seconds,
                                     std::optional<double> paused) {
  auto text = what + ": " + size_text(double(bytes)) + " in " + std::to_string(seconds).substr(0, 5) + " s (" +
              size_text(seconds > 0 ? double(bytes) / seconds : 0.0) + "/s)";
  if (paused) text += ", training paused " + std::to_string(*paused).substr(0, 5) + " s";
  return text;
}

} // namespace cairn
