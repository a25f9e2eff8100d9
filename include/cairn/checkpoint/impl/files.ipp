// Definitions of <cairn/checkpoint/files.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/files.hpp>
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

namespace cairn {

CAIRN_DECL std::string shape_text(std::vector<std::uint64_t> const& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

CAIRN_DECL std::optional<checkpoint_format> detect_format(std::filesystem::path const& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return std::nullopt;
  if (std::filesystem::exists(formats::metadata_file(dir), ec)) return checkpoint_format::distributed;
  if (std::filesystem::exists(formats::state_dict_index(dir), ec)) return checkpoint_format::state_dict;
  if (std::filesystem::exists(formats::external_config(dir), ec)) return checkpoint_format::external;
  return std::nullopt;
}

CAIRN_DECL checkpoint_metadata read_stored_metadata(std::filesystem::path const& dir, checkpoint_format format) {
  switch (format) {
  case checkpoint_format::distributed:
    return read_checkpoint_metadata(formats::metadata_file(dir));
  case checkpoint_format::state_dict: {
    auto index = formats::state_dict_index(dir);
    return parse_checkpoint_metadata(io::read_index(index).metadata, index.string());
  }
  case checkpoint_format::external:
    break;
  }
  throw checkpoint_error(checkpoint_errc::invalid_request,
                         dir.string() + ": an external checkpoint stores no cairn metadata");
}

} // namespace cairn

namespace cairn::detail {

CAIRN_DECL std::uint64_t whole_numel(parameter_layout const& p) {
  std::uint64_t n = 1;
  for (auto d : p.shape) n *= d;
  return n;
}

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
  out[formats::world_size_key] = std::to_string(metadata.ranks.size());
  out[formats::layout_key] = layout_checksum(metadata.ranks.at(static_cast<std::size_t>(*rank)));
  return out;
}

CAIRN_DECL void record_identity(io::safetensors_writer& writer, checkpoint_metadata const& metadata,
                                std::optional<int> rank) {
  for (auto const& [key, value] : identity_metadata(metadata, rank)) writer.set_metadata(key, value);
}

CAIRN_DECL std::optional<std::string> identity_problem(io::safetensors_file const& file,
                                                       checkpoint_metadata const& metadata, std::optional<int> rank) {
  if (metadata.save_id.empty()) return std::nullopt;
  auto recorded = [&](char const* key) -> std::string {
    auto it = file.metadata().find(key);
    return it == file.metadata().end() ? "nothing" : it->second;
  };
  if (recorded(formats::save_id_key) != metadata.save_id)
    return "belongs to another save (save " + recorded(formats::save_id_key) + ", this checkpoint's is " +
           metadata.save_id + ")";
  if (!rank) return std::nullopt;
  if (recorded(formats::rank_key) != std::to_string(*rank))
    return "is rank " + recorded(formats::rank_key) + "'s file, in rank " + std::to_string(*rank) + "'s place";
  if (recorded(formats::world_size_key) != std::to_string(metadata.ranks.size()))
    return "was written by one of " + recorded(formats::world_size_key) + " ranks, the metadata lists " +
           std::to_string(metadata.ranks.size());
  if (static_cast<std::size_t>(*rank) >= metadata.ranks.size() ||
      recorded(formats::layout_key) != layout_checksum(metadata.ranks[static_cast<std::size_t>(*rank)]))
    return "was written for another layout than metadata.json gives rank " + std::to_string(*rank);
  return std::nullopt;
}

CAIRN_DECL std::map<std::string, parameter_layout> parameters_of(std::vector<rank_layout> const& ranks) {
  std::map<std::string, parameter_layout> parameters;
  for (auto const& r : ranks)
    for (auto const& p : r.parameters) parameters.try_emplace(p.name, p);
  return parameters;
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
  return pretty(to_json(metadata));
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
  io::write_file_atomically(formats::metadata_file(dir), std::as_bytes(std::span(text)));
}

CAIRN_DECL void write_state_dict_index(std::filesystem::path const& dir, checkpoint_metadata const& metadata,
                                       std::map<std::string, std::string> weight_map) {
  auto text = state_dict_index_text(metadata, std::move(weight_map));
  io::write_file_atomically(formats::state_dict_index(dir), std::as_bytes(std::span(text)));
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
