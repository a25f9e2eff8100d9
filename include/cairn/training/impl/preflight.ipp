// Definitions of <cairn/training/preflight.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/detail/save_files.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/dtype.hpp>
#include <cairn/io/file.hpp>
#include <cairn/training/preflight.hpp>
#include <cairn/training/save_policy.hpp>
#include <cairn/training/save_report.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace cairn {

CAIRN_DECL std::uint64_t distributed_bytes(std::vector<rank_layout> const& ranks, std::size_t shards) {
  std::uint64_t total = 0;
  auto writers = detail::replica_writers_of(ranks, replica_writer_rule::rank_0); // each replica set once
  for (std::size_t r = 0; r < ranks.size(); ++r)
    for (auto const& p : ranks[r].parameters)
      if (!p.replicated || writers.of(p.name, p.shard) == static_cast<int>(r))
        total += p.shard.numel() * io::size_of(p.dtype) * shards;
  return total;
}

CAIRN_DECL std::uint64_t distributed_bytes(layout_rules const& rules, std::size_t shards) {
  std::uint64_t total = 0;
  for (auto const& rule : rules.parameters) {
    std::uint64_t elements = 1;
    for (auto d : rule.shape) elements *= d;
    total += elements * io::size_of(rule.dtype) * shards;
  }
  return total;
}

CAIRN_DECL std::uint64_t distributed_bytes(checkpoint_metadata const& metadata) {
  return metadata.rules ? distributed_bytes(*metadata.rules, metadata.shard_names.size())
                        : distributed_bytes(metadata.ranks, metadata.shard_names.size());
}

CAIRN_DECL std::uint64_t whole_bytes(rank_layout const& layout, std::size_t shards,
                                     checkpoint_save_config const& save) {
  std::uint64_t selected = (save.model_weights ? 1 : 0) + (save.optimizer_state && shards > 1 ? shards - 1 : 0);
  std::uint64_t total = 0;
  for (auto const& p : layout.parameters)
    total += cairn::detail::whole_numel(p) * io::size_of(detail::stored_type(p.dtype, save.data_type)) * selected;
  return total;
}

CAIRN_DECL std::uint64_t saves_on_disk(checkpoint_base_config const& schedule, std::int64_t start, std::int64_t end,
                                       std::size_t existing) {
  std::int64_t saves = schedule.count(end) - schedule.count(start);
  if (schedule.enabled() && !schedule.enabled(end) && end > start) ++saves; // the final save
  std::int64_t forever = 0;
  if (schedule.keep_every)
    for (auto it = schedule.count(start) + 1; it <= schedule.count(end); ++it)
      if (it % *schedule.keep_every == 0) ++forever;
  std::int64_t kept =
      schedule.keep ? std::max<std::int64_t>(*schedule.keep - static_cast<std::int64_t>(existing), 0) + 1 : saves;
  return static_cast<std::uint64_t>(std::max<std::int64_t>(std::min(kept, saves) + forever, 1));
}

CAIRN_DECL void check_disk_space(std::filesystem::path const& dir, disk_estimate const& needed) {
  auto where = io::open_location(dir.string());
  auto space = where.backend->available(where.key);
  if (!space) return; // a store without a known bound
  auto available = *space;
  if (available < needed.total())
    throw training_error(training_errc::storage, dir.string() + ": " + size_text(double(available)) +
                                                     " free, the run needs about " + size_text(double(needed.total())) +
                                                     " (" + std::to_string(needed.checkpoints) + " checkpoints of " +
                                                     size_text(double(needed.checkpoint_bytes)) + ", " +
                                                     std::to_string(needed.exports) + " exports of " +
                                                     size_text(double(needed.export_bytes)) + ")");
}

CAIRN_DECL void probe_writable(std::filesystem::path const& dir) {
  io::make_folder(dir.string());
  auto probe = io::open_location((dir / ".cairn-preflight").string());
  std::string text = "cairn preflight\n";
  probe.backend->write(probe.key, std::as_bytes(std::span(text)));
  probe.backend->remove(probe.key);
}

} // namespace cairn
