// Definitions of <cairn/training/background_writer.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/plan.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/progress.hpp>
#include <cairn/training/background_writer.hpp>
#include <cairn/training/save_report.hpp>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <future>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace cairn {

CAIRN_DECL background_writer::~background_writer() {
  if (!pending_) return;
  auto path = pending_->path.string();
  try {
    take().done.get();
  } catch (std::exception const& e) {
    emit(severity::warning, {path, e.what()});
  }
  emit(severity::warning, {path, "not committed: the checkpoint manager was destroyed before finish()"});
}

CAIRN_DECL model_state background_writer::copy_to_host(model_state const& state, save_plan const& plan, int rank) {
  std::set<std::string, std::less<>> written; // the parameters this rank writes
  for (auto const& file : plan.files)
    if (file.writer == rank)
      for (auto const& item : file.items) written.insert(item.parameter);
  model_state out;
  out.shard_names = state.shard_names;
  std::size_t slot = 0;
  for (auto const& p : state.parameters) {
    parameter_state copy{p.layout, {}};
    for (auto const& t : p.shards) {
      if (!written.contains(p.layout.name)) { // not written here: handed over as it is, never read
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

CAIRN_DECL void background_writer::run(std::int64_t iteration, std::filesystem::path path, std::uint64_t bytes,
                                       clock::time_point started, std::function<void()> task) {
  std::packaged_task<void()> job(std::move(task));
  pending_ = write{iteration, std::move(path), job.get_future(), bytes, started, {}};
  job();
}

CAIRN_DECL void background_writer::start(std::int64_t iteration, std::filesystem::path path, std::uint64_t bytes,
                                         clock::time_point started, double paused, std::function<void()> task) {
  auto quiet = [task = std::move(task)] {
    progress_scope silent("", "", 0, /*quiet=*/true); // training logs while it writes
    task();
  };
  pending_ =
      write{iteration, std::move(path), std::async(std::launch::async, std::move(quiet)), bytes, started, paused};
}

CAIRN_DECL void background_writer::wait() const {
  auto waited = 0;
  while (pending_->done.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    waited += 30;
    emit(severity::info, {pending_->path.string(), "still writing after " + std::to_string(waited) + " s (" +
                                                       size_text(double(pending_->bytes)) + " in all)"});
  }
}

CAIRN_DECL background_writer::write background_writer::take() {
  auto out = std::move(*pending_);
  pending_.reset();
  return out;
}

} // namespace cairn
