#pragma once

// Progress of long work (a save, a load, a conversion, a verification): bytes done, throughput
// and time left, reported through the diagnostic sink while the work runs. No libtorch.

#include <cairn/detail/decl.hpp>
#include <cairn/diagnostics.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

namespace cairn {

/// "1.50 GiB", for progress messages.
CAIRN_DECL std::string size_text(double bytes);

/// When progress is reported: not before the work has run `first`, then at most every `every`.
struct progress_timing {
  std::chrono::milliseconds first{2000};
  std::chrono::milliseconds every{5000};
};

namespace detail {
inline std::atomic<std::int64_t> progress_first_ms{2000};
inline std::atomic<std::int64_t> progress_every_ms{5000};
} // namespace detail

/// Sets when progress is reported, process-wide; returns the previous timing.
CAIRN_DECL progress_timing set_progress_timing(progress_timing timing);

/// One long piece of work on this thread. While it lives, the bytes cairn's saves, loads and
/// checks move on this thread count towards `total` (0: unknown), and progress diagnostics
/// (`severity::progress`, about `path`) report them: "saving: 1.20 GiB of 4.00 GiB (30%),
/// 450.00 MiB/s, 7 s left". The default sink keeps them on one updating line on a terminal and
/// prints plain lines otherwise; an empty progress message ends the work.
///
/// Scopes nest: while one is active on a thread, an inner one adds nothing of its own (the outer
/// work, say a conversion, includes the inner load and save). A `quiet` scope reports nothing,
/// and silences those inside it (a background save while training logs).
class progress_scope {
public:
  progress_scope(std::string what, std::string path, std::uint64_t total, bool quiet = false)
      : what_(std::move(what)), path_(std::move(path)), total_(total), quiet_(quiet), outer_(active()) {
    if (!outer_) active() = this;
  }
  progress_scope(progress_scope const&) = delete;
  progress_scope& operator=(progress_scope const&) = delete;
  CAIRN_DECL ~progress_scope();

  /// Counts `bytes` done towards the scope active on this thread, if any.
  static void count(std::uint64_t bytes) noexcept {
    if (auto* scope = active()) scope->add(bytes);
  }

  CAIRN_DECL void add(std::uint64_t bytes) noexcept;

  [[nodiscard]] std::uint64_t done() const noexcept { return done_; }

private:
  CAIRN_DECL static progress_scope*& active() noexcept;

  [[nodiscard]] CAIRN_DECL std::string text(double seconds) const;

  std::string what_, path_;
  std::uint64_t total_ = 0, done_ = 0;
  bool quiet_ = false, reported_ = false;
  progress_scope* outer_ = nullptr;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now(), last_{};
};

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/impl/progress.ipp>
#endif
