#pragma once
// cairn: requires libtorch

// The background half of an asynchronous checkpoint: a copy of the state in host memory
// (buffers reused from one save to the next) and the thread that writes this rank's files from
// it. Committing is the manager's: it takes every rank.

#include <cairn/checkpoint/plan.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/training/save_report.hpp>

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cairn {

class background_writer {
public:
  using clock = std::chrono::steady_clock;

  /// A save in flight: its iteration and directory, this rank's write, and what its report
  /// needs.
  struct write {
    std::int64_t iteration = 0;
    std::filesystem::path path;
    std::future<void> done;
    std::uint64_t bytes = 0;
    clock::time_point started;
    std::optional<double> paused; ///< how long training waited for the host copy (async only)
  };

  background_writer() = default;
  background_writer(background_writer const&) = delete;
  background_writer& operator=(background_writer const&) = delete;

  /// Waits for a write in flight, without committing it (that takes every rank); the next
  /// resume removes what it left.
  CAIRN_DECL ~background_writer();

  /// A copy of `state` in host memory, reusing the buffers of the previous copy: the parameters
  /// rank `rank` writes in `plan` (a replicated one only on the rank that writes it).
  CAIRN_DECL model_state copy_to_host(model_state const& state, save_plan const& plan, int rank);

  /// Runs `task` now, in the foreground, as the write of `iteration` into `path`.
  CAIRN_DECL void run(std::int64_t iteration, std::filesystem::path path, std::uint64_t bytes,
                      clock::time_point started, std::function<void()> task);

  /// Starts `task` on a thread of its own as the write of `iteration` into `path`; training
  /// paused `paused` seconds for it.
  CAIRN_DECL void start(std::int64_t iteration, std::filesystem::path path, std::uint64_t bytes,
                        clock::time_point started, double paused, std::function<void()> task);

  [[nodiscard]] bool pending() const noexcept { return pending_.has_value(); }

  /// Whether this rank's write has finished (successfully or not).
  [[nodiscard]] bool ready() const {
    return pending_ && pending_->done.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }

  /// Waits for this rank's write, reporting every 30 s that it is still going.
  CAIRN_DECL void wait() const;

  /// The write in flight, handed over: the writer is then idle.
  CAIRN_DECL write take();

private:
  std::optional<write> pending_;
  std::vector<at::Tensor> buffers_;
};

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/training/impl/background_writer.ipp>
#endif
