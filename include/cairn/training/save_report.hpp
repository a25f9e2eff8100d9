#pragma once

// How the checkpoint manager reports its work: sizes, throughput, pauses. No libtorch.

#include <cairn/detail/decl.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/progress.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

namespace cairn {

/// "saved checkpoint: 1.50 GiB in 2.310 s (664.94 MiB/s), training paused 0.120 s".
CAIRN_DECL std::string progress_text(std::string const& what, std::uint64_t bytes, double seconds,
                                     std::optional<double> paused = {});

/// Emits `progress_text` as information about `path`.
inline void report_progress(std::string const& what, std::filesystem::path const& path, std::uint64_t bytes,
                            double seconds, std::optional<double> paused = {}) {
  emit(severity::info, {path.string(), progress_text(what, bytes, seconds, paused)});
}

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/training/impl/save_report.ipp>
#endif
