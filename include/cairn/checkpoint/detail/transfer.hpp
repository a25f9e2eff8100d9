#pragma once
// cairn: requires libtorch

// What every format's loader shares: copying the runs a saved shard shares with a live one
// (converting element types), and accounting for every element of every requested shard.

#include <cairn/checkpoint/accounting.hpp>
#include <cairn/checkpoint/detail/save_files.hpp> // selected_shards
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/checkpoint/tensor.hpp>
#include <cairn/checkpoint/verify.hpp>
#include <cairn/comm/collectives.hpp>
#include <cairn/error.hpp>
#include <cairn/io/checksum.hpp>
#include <cairn/io/detail/background_hash.hpp>
#include <cairn/io/error.hpp>
#include <cairn/io/float_convert.hpp>
#include <cairn/io/safetensors.hpp>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace cairn {

namespace detail {

/// A saved shard's elements, and the checksum they must have (when the file records one).
struct load_source {
  std::span<std::byte const> bytes;
  io::dtype dtype;
  shard_layout layout;
  std::optional<std::uint64_t> checksum{};
  std::string origin{};                       ///< "<file>: tensor '<name>'", for messages
  io::safetensors_file const* file = nullptr; ///< to read whole tensors with pread
  io::tensor_info const* tensor = nullptr;

  /// The bytes' count (of an object's tensor, `bytes` is empty until `view`).
  [[nodiscard]] std::uint64_t size() const noexcept {
    return file && file->remote() ? tensor->byte_size() : bytes.size();
  }
  /// The bytes, read first when they are an object's.
  [[nodiscard]] std::span<std::byte const> view() const {
    return file && file->remote() ? file->bytes(*tensor) : bytes;
  }
};

/// A load_source for tensor `t` of `file`, saved as `dtype` with layout `layout` (what the
/// checkpoint's metadata says). The file's tensor must hold exactly the layout's elements, of
/// that type, before any byte is read: metadata that claims more would read past the tensor into
/// its neighbours, or past the file. When verifying, the tensor must have a checksum: cairn
/// records one for every tensor it writes, so one that is missing means the file was altered.
inline load_source source_from(io::safetensors_file const& file, io::tensor_info const& t, shard_layout layout,
                               io::dtype dtype, verification verify) {
  if (t.numel() != layout.numel())
    throw io::io_error(file.path(), "tensor '" + t.name + "' holds " + std::to_string(t.numel()) +
                                        " elements, the checkpoint's metadata says " + std::to_string(layout.numel()));
  if (t.dtype != dtype)
    throw io::io_error(file.path(), "tensor '" + t.name + "' is stored as " + std::string(io::name(t.dtype)) +
                                        ", the checkpoint's metadata says " + std::string(io::name(dtype)));
  std::optional<std::uint64_t> checksum;
  if (verify == verification::checksums) {
    auto it = file.metadata().find(io::checksum_key(t.name));
    if (it == file.metadata().end())
      throw io::io_error(file.path(), "tensor '" + t.name + "' has no recorded checksum");
    checksum = io::from_hex(it->second);
    if (!checksum) throw io::io_error(file.path(), "tensor '" + t.name + "' has a malformed checksum");
  }
  // An object's tensor is read when it is loaded, not now: a whole copy reads it straight into
  // its shard.
  auto bytes = file.remote() ? std::span<std::byte const>() : file.bytes(t);
  return {bytes, t.dtype, std::move(layout), checksum, file.path().string() + ": tensor '" + t.name + "'", &file, &t};
}

/// Problems found while loading on this rank, agreed on by all ranks before anyone returns.
class load_report {
public:
  void add(std::string path, std::string message) { problems_.push_back({std::move(path), std::move(message)}); }
  [[nodiscard]] bool empty() const noexcept { return problems_.empty(); }

  /// Throws on every rank when any rank found a problem, listing every rank's problems (those
  /// of other ranks prefixed with their rank).
  template <class Comm> void agree(Comm& comm, std::string const& what) {
    if (comm::sum(comm, static_cast<std::int64_t>(problems_.size())) == 0) return;
    std::string mine;
    for (auto const& p : problems_) mine += p.path + '\0' + p.message + '\0';
    auto all = comm::all_gather_strings(comm, mine);
    std::vector<diagnostic> problems = problems_;
    for (std::size_t r = 0; r < all.size(); ++r) {
      if (static_cast<int>(r) == comm.rank()) continue;
      for (std::size_t at = 0; at < all[r].size();) {
        auto path_end = all[r].find('\0', at);
        auto message_end = all[r].find('\0', path_end + 1);
        problems.push_back({"rank " + std::to_string(r) + ": " + all[r].substr(at, path_end - at),
                            all[r].substr(path_end + 1, message_end - path_end - 1)});
        at = message_end + 1;
      }
    }
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
/// it. Every element must be written exactly once; a problem goes to `report` under `path`, and
/// then the floating elements nobody wrote are NaN, so that they show. Counts the bytes it reads
/// of the sources (`bytes_read`): the runs it copies, or a source whole when it checks its checksum.
inline void load_shard(parameter_layout const& layout, at::Tensor& staging, std::span<load_source const> sources,
                       std::string const& path, load_report& report) {
  std::vector<std::vector<copy_run>> plans;
  std::uint64_t written = 0;
  for (auto const& source : sources) {
    if (!io::convertible(source.dtype, layout.dtype)) {
      report.add(path, "saved as " + std::string(io::name(source.dtype)) + ", which cannot become " +
                           std::string(io::name(layout.dtype)));
      return;
    }
    plans.push_back(overlap(layout.shape, source.layout, layout.shard));
    for (auto const& run : plans.back()) written += run.length;
  }
  auto expected = layout.shard.numel();
  if (written != expected && io::is_floating(layout.dtype)) staging.fill_(std::numeric_limits<double>::quiet_NaN());
  auto target = tensor_bytes(staging);
  auto out = io::size_of(layout.dtype);
  for (std::size_t i = 0; i < sources.size(); ++i) {
    auto const& source = sources[i];
    auto in = io::size_of(source.dtype);
    auto const& plan = plans[i];
    auto size = static_cast<std::size_t>(source.size());
    bool whole_copy =
        plan.size() == 1 && source.dtype == layout.dtype && plan[0].source == 0 && plan[0].length * in == size;
    std::optional<std::uint64_t> hash;
    if (whole_copy) {
      // The common case (loading with the saving layout): the copy, read in pieces, is hashed
      // behind it as it lands (in cache when it does), on another thread for a large tensor. An
      // object's tensor is read in one go (the backend's ranged reads run in parallel).
      std::size_t piece =
          source.file && source.file->remote() ? std::max<std::size_t>(size, 1) : std::size_t{512} << 10;
      auto into = target.subspan(plan[0].target * out, size);
      std::optional<io::detail::background_hash> hasher;
      if (source.checksum) hasher.emplace(into, false);
      for (std::size_t at = 0; at < size; at += piece) {
        auto n = std::min(piece, size - at);
        if (source.file)
          source.file->read_into(*source.tensor, at, into.subspan(at, n));
        else
          std::memcpy(into.data() + at, source.bytes.data() + at, n);
        if (hasher) hasher->ready(at + n);
      }
      if (hasher) hash = hasher->value();
    } else {
      auto bytes = source.view();
      std::optional<io::detail::background_hash> hasher;
      if (source.checksum) hasher.emplace(bytes, true);
      for (auto const& run : plan)
        io::convert(bytes.subspan(run.source * in, run.length * in), source.dtype,
                    target.subspan(run.target * out, run.length * out), layout.dtype);
      if (hasher) hash = hasher->value();
    }
    std::uint64_t read = 0;
    if (whole_copy || source.checksum)
      read = size;
    else
      for (auto const& run : plan) read += run.length * in;
    read_counts().tensor_bytes.fetch_add(read, std::memory_order_relaxed);
    if (source.checksum && hash != *source.checksum)
      report.add(path, source.origin + " is corrupt: its checksum does not match");
  }
  if (written < expected)
    report.add(path, std::to_string(expected - written) + " of its " + std::to_string(expected) +
                         " elements are not in the checkpoint");
  else if (written > expected)
    report.add(path, std::to_string(written - expected) + " elements were loaded more than once");
}

} // namespace detail

} // namespace cairn
