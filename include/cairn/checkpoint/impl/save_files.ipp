// Definitions of <cairn/checkpoint/detail/save_files.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/detail/identity.hpp>
#include <cairn/checkpoint/detail/save_files.hpp>
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/config/detail/pretty.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/checksum.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/index.hpp>
#include <cairn/io/safetensors.hpp>
#include <cairn/io/safetensors_writer.hpp>

#include <boost/describe/enum_to_string.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace cairn::detail {

CAIRN_DECL std::uint64_t whole_numel(parameter_layout const& p) {
  std::uint64_t n = 1;
  for (auto d : p.shape) n *= d;
  return n;
}
CAIRN_DECL std::map<std::string, parameter_layout> parameters_of(std::vector<rank_layout> const& ranks) {
  std::map<std::string, parameter_layout> parameters;
  for (auto const& r : ranks)
    for (auto const& p : r.parameters) parameters.try_emplace(p.name, p);
  return parameters;
}

CAIRN_DECL std::vector<bool> senders_of(std::vector<rank_layout> const& ranks, std::string const& name) {
  std::vector<bool> out(ranks.size(), false);
  std::vector<shard_layout const*> sets; // the replicated shards met so far: few (a TP group's)
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    auto const* held = ranks[r].find(name);
    if (!held) continue;
    if (held->replicated) {
      if (std::any_of(sets.begin(), sets.end(), [&](shard_layout const* s) { return *s == held->shard; })) continue;
      sets.push_back(&held->shard);
    }
    out[r] = true;
  }
  return out;
}

CAIRN_DECL std::optional<std::vector<flat_range>> part_runs(std::vector<rank_layout> const& ranks,
                                                            parameter_layout const& whole) {
  std::vector<flat_range> runs(ranks.size());
  std::vector<flat_range> sorted;
  auto sends = senders_of(ranks, whole.name);
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    auto const* held = ranks[r].find(whole.name);
    if (!sends[r] || held->shard.numel() == 0) continue;
    auto found = overlap(whole.shape, held->shard, shard_layout::whole(whole.shape));
    if (found.size() != 1 || found[0].source != 0 || found[0].length != held->shard.numel()) return std::nullopt;
    runs[r] = {found[0].target, found[0].target + found[0].length};
    sorted.push_back(runs[r]);
  }
  if (sorted.size() < 2) return std::nullopt;
  std::sort(sorted.begin(), sorted.end(), [](flat_range a, flat_range b) { return a.begin < b.begin; });
  std::uint64_t next = 0;
  for (auto const& run : sorted) {
    if (run.begin != next) return std::nullopt; // a gap or an overlap: the gather reports it
    next = run.end;
  }
  if (next != whole_numel(whole)) return std::nullopt;
  return runs;
}

CAIRN_DECL std::vector<std::size_t> pack_files(std::vector<std::uint64_t> const& sizes, std::uint64_t limit) {
  std::vector<std::size_t> file_of;
  std::size_t file = 0;
  std::uint64_t in_file = 0;
  for (auto size : sizes) {
    if (in_file > 0 && in_file + size > limit) {
      ++file;
      in_file = 0;
    }
    file_of.push_back(file);
    in_file += size;
  }
  return file_of;
}

CAIRN_DECL std::map<std::string, std::size_t>
assign_state_dict_files(std::map<std::string, parameter_layout> const& parameters, std::size_t shards,
                        std::uint64_t parameters_per_file) {
  std::vector<std::uint64_t> sizes;
  for (auto const& [name, p] : parameters) sizes.push_back(whole_numel(p) * shards);
  auto packed = pack_files(sizes, parameters_per_file);
  std::map<std::string, std::size_t> file_of;
  std::size_t i = 0;
  for (auto const& [name, p] : parameters) file_of[name] = packed[i++];
  return file_of;
}

CAIRN_DECL std::string distributed_metadata_text(checkpoint_metadata const& metadata) {
  auto stored = metadata;
  if (!stored.rules) stored.rules = infer_rules(metadata.ranks); // a grid's layouts as its rules, O(parameters)
  if (stored.rules) stored.ranks.clear();
  return pretty(to_json(stored));
}

CAIRN_DECL std::string state_dict_index_text(checkpoint_metadata const& metadata,
                                             std::map<std::string, std::string> weight_map) {
  io::safetensors_index index;
  index.metadata = to_json(metadata).as_object();
  index.weight_map = std::move(weight_map);
  return io::index_text(index);
}

CAIRN_DECL void write_distributed_metadata(std::filesystem::path const& dir, checkpoint_metadata const& metadata) {
  auto text = distributed_metadata_text(metadata);
  io::write_stored(formats::metadata_file(dir).string(), std::as_bytes(std::span(text)));
}

CAIRN_DECL void write_state_dict_index(std::filesystem::path const& dir, checkpoint_metadata const& metadata,
                                       std::map<std::string, std::string> weight_map) {
  auto text = state_dict_index_text(metadata, std::move(weight_map));
  io::write_stored(formats::state_dict_index(dir).string(), std::as_bytes(std::span(text)));
}

CAIRN_DECL io::dtype stored_type(io::dtype type, std::optional<cairn::data_type> const& conversion) {
  if (!conversion || !io::is_floating(type)) return type;
  switch (*conversion) {
  case data_type::float64:
    return io::dtype::F64;
  case data_type::float32:
    return io::dtype::F32;
  case data_type::float16:
    return io::dtype::F16;
  case data_type::bfloat16:
    return io::dtype::BF16;
  }
  return type;
}

} // namespace cairn::detail
