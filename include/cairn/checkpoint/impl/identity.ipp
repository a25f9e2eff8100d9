// Definitions of <cairn/checkpoint/detail/identity.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/detail/identity.hpp>
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/config/detail/pretty.hpp>
#include <cairn/io/checksum.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/index.hpp>
#include <cairn/io/safetensors.hpp>
#include <cairn/io/safetensors_writer.hpp>

#include <boost/describe/enum_to_string.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace cairn::detail {

CAIRN_DECL std::string new_save_id() {
  std::random_device random;
  std::string id;
  for (int i = 0; i < 4; ++i) id += io::to_hex(random()).substr(8);
  return id;
}

CAIRN_DECL std::string layout_checksum(rank_layout const& layout) {
  auto text = detail::compact(to_json(layout));
  return io::to_hex(io::checksum_of(std::as_bytes(std::span(text))));
}

CAIRN_DECL std::map<std::string, std::string> identity_metadata(checkpoint_metadata const& metadata,
                                                                std::optional<int> rank) {
  std::map<std::string, std::string> out{{formats::save_id_key, metadata.save_id}};
  if (!rank) return out;
  out[formats::rank_key] = std::to_string(*rank);
  out[formats::world_size_key] = std::to_string(metadata.world_size());
  out[formats::layout_key] = layout_checksum(metadata.layout_of(*rank));
  return out;
}

CAIRN_DECL void record_identity(io::safetensors_writer& writer, checkpoint_metadata const& metadata,
                                std::optional<int> rank) {
  for (auto const& [key, value] : identity_metadata(metadata, rank)) writer.set_metadata(key, value);
}

CAIRN_DECL std::optional<std::string> identity_problem(io::safetensors_file const& file,
                                                       checkpoint_metadata const& metadata, std::optional<int> rank) {
  auto recorded = [&](char const* key) -> std::string {
    auto it = file.metadata().find(key);
    return it == file.metadata().end() ? "nothing" : it->second;
  };
  // A save from before identities recorded none in its files either: a file that records one
  // under metadata that does not is not that save's (or the metadata lost its save_id).
  if (metadata.save_id.empty())
    return file.metadata().contains(formats::save_id_key)
               ? std::optional<std::string>("records save " + recorded(formats::save_id_key) +
                                            ", and the checkpoint's metadata records no save_id")
               : std::nullopt;
  if (recorded(formats::save_id_key) != metadata.save_id)
    return "belongs to another save (save " + recorded(formats::save_id_key) + ", this checkpoint's is " +
           metadata.save_id + ")";
  if (!rank) return std::nullopt;
  if (recorded(formats::rank_key) != std::to_string(*rank))
    return "is rank " + recorded(formats::rank_key) + "'s file, in rank " + std::to_string(*rank) + "'s place";
  if (recorded(formats::world_size_key) != std::to_string(metadata.world_size()))
    return "was written by one of " + recorded(formats::world_size_key) + " ranks, the metadata lists " +
           std::to_string(metadata.world_size());
  if (*rank < 0 || *rank >= metadata.world_size() ||
      recorded(formats::layout_key) != layout_checksum(metadata.layout_of(*rank)))
    return "was written for another layout than metadata.json gives rank " + std::to_string(*rank);
  return std::nullopt;
}

} // namespace cairn::detail
