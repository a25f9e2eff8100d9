#pragma once
// cairn: requires libtorch

// The background half of an asynchronous checkpoint: a copy of the state in host memory
// (buffers reused from one save to the next) and the thread that writes this rank's files from
// it. Committing is the manager's: it takes every rank.

#include <cairn/checkpoint/state.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/progress.hpp>
#include <cairn/training/progress.hpp>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

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
  ~background_writer() {
    if (!pending_) return;
    auto path = pending_->path.string();
    try {
      take().done.get();
    } catch (std::exception const& e) {
      emit(severity::warning, {path, e.what()});
    }
    emit(severity::warning, {path, "not committed: the checkpoint manager was destroyed before finish()"});
  }

  /// A copy of `state` in host memory, reusing the buffers of the previous copy. Replicated
  /// parameters are copied on rank 0 only: the others do not write them.
  model_state copy_to_host(model_state const& state, int rank) {
    model_state out;
    out.shard_names = state.shard_names;
    std::size_t slot = 0;
    for (auto const& p : state.parameters) {
      parameter_state copy{p.layout, {}};
      for (auto const& t : p.shards) {
        if (p.layout.replicated && rank != 0) {
          copy.shards.push_back(t);
          continue;
        }
        if (slot == buffers_.size()) buffers_.emplace_back();
        auto& buffer = buffers_[slot++];
        if (!buffer.defined() || buffer.numel() != t.numel() || buffer.scalar_type() != t.scalar_type())
          buffer = at::empty({t.numel()}, at::TensorOptions().dtype(t.scalar_type()).pinned_memory(t.is_cuda()));
        buffer.copy_(t.reshape({-1}));
        copy.shards.push_back(buffer);
      }
      out.parameters.push_back(std::move(copy));
    }
    buffers_.resize(slot);
    return out;
  }

  /// Runs `task` now, in the foreground, as the write of `iteration` into `path`.
  void run(std::int64_t iteration, std::filesystem::path path, std::uint64_t bytes, clock::time_point started,
           std::function<void()> task) {
    std::packaged_task<void()> job(std::move(task));
    pending_ = write{iteration, std::move(path), job.get_future(), bytes, started, {}};
    job();
  }

  /// Starts `task` on a thread of its own as the write of `iteration` into `path`; training
  /// paused `paused` seconds for it.
  void start(std::int64_t iteration, std::filesystem::path path, std::uint64_t bytes, clock::time_point started,
             double paused, std::function<void()> task) {
    auto quiet = [task = std::move(task)] {
      progress_scope silent("", "", 0, /*quiet=*/true); // training logs while it writes
      task();
    };
    pending_ =
        write{iteration, std::move(path), std::async(std::launch::async, std::move(quiet)), bytes, started, paused};
  }

  [[nodiscard]] bool pending() const noexcept { return pending_.has_value(); }

  /// Whether this rank's write has finished (successfully or not).
  [[nodiscard]] bool ready() const {
    return pending_ && pending_->done.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }

  /// Waits for this rank's write, reporting every 30 s that it is still going.
  void wait() const {
    auto waited = 0;
    while (pending_->done.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      waited += 30;
      emit(severity::info, {pending_->path.string(), "still writing after " + std::to_string(waited) + " s (" +
                                                         size_text(double(pending_->bytes)) + " in all)"});
    }
  }

  /// The write in flight, handed over: the writer is then idle.
  write take() {
    auto out = std::move(*pending_);
    pending_.reset();
    return out;
  }

private:
  std::optional<write> pending_;
  std::vector<at::Tensor> buffers_;
};

} // namespace cairn
