#pragma once
// cairn: requires libtorch

// What every format's loader shares: copying the runs a saved shard shares with a live one
// (converting element types), and accounting for every element of every requested shard.

#include <cairn/checkpoint/detail/files.hpp>
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/checkpoint/tensor.hpp>
#include <cairn/comm/communicator.hpp>
#include <cairn/error.hpp>
#include <cairn/io/convert.hpp>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace cairn {

/// A checkpoint that cannot be saved or loaded as asked: every problem, each naming the file or
/// parameter, reported together.
class checkpoint_error : public error {
public:
  checkpoint_error(std::string const& what, std::vector<diagnostic> problems)
      : error(format(what, problems)), problems_(std::move(problems)) {}
  [[nodiscard]] std::vector<diagnostic> const& problems() const noexcept { return problems_; }

private:
  static std::string format(std::string const& what, std::vector<diagnostic> const& problems) {
    std::string text =
        what + ": " + std::to_string(problems.size()) + (problems.size() == 1 ? " problem" : " problems");
    for (auto const& p : problems) text += "\n  " + p.to_string();
    return text;
  }
  std::vector<diagnostic> problems_;
};

namespace detail {

/// A saved shard's elements.
struct load_source {
  std::span<std::byte const> bytes;
  io::dtype dtype;
  shard_layout layout;
};

/// Problems found while loading on this rank, agreed on by all ranks before anyone returns.
class load_report {
public:
  void add(std::string path, std::string message) { problems_.push_back({std::move(path), std::move(message)}); }
  [[nodiscard]] bool empty() const noexcept { return problems_.empty(); }

  /// Throws on every rank when any rank found a problem.
  template <class Comm> void agree(Comm& comm, std::string const& what) {
    auto count = at::full({1}, static_cast<std::int64_t>(problems_.size()),
                          at::TensorOptions().dtype(at::kLong).device(comm.device()));
    comm.all_reduce(count, comm::reduce_op::sum);
    auto total = count.to(c10::Device(c10::kCPU)).template item<std::int64_t>();
    if (total == 0) return;
    auto problems = problems_;
    if (problems.empty())
      problems.push_back({"", std::to_string(total) + " problems on other ranks (see their errors)"});
    throw checkpoint_error(what, std::move(problems));
  }

private:
  std::vector<diagnostic> problems_;
};

/// A CPU tensor holding a shard's elements densely: the live tensor itself when it already is
/// one, else a staging buffer copied back by `finish_staging`.
inline at::Tensor staging_for(at::Tensor const& live) {
  if (live.is_cpu() && live.is_contiguous()) return live.view({-1});
  return at::empty({live.numel()}, at::TensorOptions().dtype(live.scalar_type()));
}
inline void finish_staging(at::Tensor& live, at::Tensor const& staging) {
  if (staging.data_ptr() != live.data_ptr()) live.copy_(staging.view(live.sizes()));
}

/// Loads into `live` (a staging tensor of the live shard) every element the sources share with
/// it. Floating destinations are first set to NaN, so that an element nobody wrote shows. Every
/// element must be written exactly once; a problem goes to `report` under `path`.
inline void load_shard(parameter_layout const& layout, at::Tensor& staging, std::span<load_source const> sources,
                       std::string const& path, load_report& report) {
  if (io::is_floating(layout.dtype)) staging.fill_(std::numeric_limits<double>::quiet_NaN());
  auto target = tensor_bytes(staging);
  auto out = io::size_of(layout.dtype);
  std::uint64_t written = 0;
  for (auto const& source : sources) {
    if (!io::convertible(source.dtype, layout.dtype)) {
      report.add(path, "saved as " + std::string(io::name(source.dtype)) + ", which cannot become " +
                           std::string(io::name(layout.dtype)));
      return;
    }
    auto in = io::size_of(source.dtype);
    for (auto const& run : overlap(layout.shape, source.layout, layout.shard)) {
      io::convert(source.bytes.subspan(run.source * in, run.length * in), source.dtype,
                  target.subspan(run.target * out, run.length * out), layout.dtype);
      written += run.length;
    }
  }
  auto expected = layout.shard.numel();
  if (written < expected)
    report.add(path, std::to_string(expected - written) + " of its " + std::to_string(expected) +
                         " elements are not in the checkpoint");
  else if (written > expected)
    report.add(path, std::to_string(written - expected) + " elements were loaded more than once");
}

/// Indices of the state shards a save or load covers.
inline std::vector<std::size_t> selected_shards(std::vector<std::string> const& names, bool model_weights,
                                                bool optimizer_state) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (i == 0 ? model_weights : optimizer_state) out.push_back(i);
  return out;
}

} // namespace detail

} // namespace cairn
