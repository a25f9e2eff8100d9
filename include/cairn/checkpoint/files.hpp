#pragma once

// The files of cairn's checkpoint formats: their names, the names of tensors in them, the
// metadata they store and how a directory's format is recognised. No libtorch: tools read
// checkpoints without the model's code.

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

namespace cairn::formats {

/// `<dir>/rank_<rank>.safetensors`: a rank's file of a distributed checkpoint.
inline std::filesystem::path rank_file(std::filesystem::path const& dir, int rank) {
  return dir / ("rank_" + std::to_string(rank) + ".safetensors");
}
/// `<dir>/metadata.json`: a distributed checkpoint's metadata.
inline std::filesystem::path metadata_file(std::filesystem::path const& dir) { return dir / "metadata.json"; }
/// `<dir>/state_dict.safetensors.index.json`: a state_dict checkpoint's index and metadata.
inline std::filesystem::path state_dict_index(std::filesystem::path const& dir) {
  return dir / "state_dict.safetensors.index.json";
}
/// `state_dict_<i>.safetensors`: the i-th file of a state_dict checkpoint.
inline std::string state_dict_file(std::size_t i) { return "state_dict_" + std::to_string(i) + ".safetensors"; }
/// `config.json`: the model config of an external (Hugging Face) checkpoint.
inline std::filesystem::path external_config(std::filesystem::path const& dir) { return dir / "config.json"; }

/// `__metadata__` keys of the identity every file of a cairn save records.
inline constexpr char const* save_id_key = "cairn.save_id";
inline constexpr char const* rank_key = "rank";
inline constexpr char const* world_size_key = "cairn.world_size";
inline constexpr char const* layout_key = "cairn.layout_xxh3";

} // namespace cairn::formats

namespace cairn {

/// `<parameter>/<state shard>`: the name of a tensor in cairn's own formats.
inline std::string tensor_name(std::string const& parameter, std::string const& shard) {
  return parameter + "/" + shard;
}

/// "[4, 8]", for messages.
inline std::string shape_text(std::vector<std::uint64_t> const& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

/// Elements of the whole parameter.
inline std::uint64_t whole_numel(parameter_layout const& p) {
  std::uint64_t n = 1;
  for (auto d : p.shape) n *= d;
  return n;
}

/// "distributed", "state_dict" or "external", as configs spell them.
inline char const* format_name(checkpoint_format format) noexcept {
  return boost::describe::enum_to_string(format, "unknown");
}

/// A fresh identity for a save: 128 random bits, as 32 hex digits.
inline std::string new_save_id() {
  std::random_device random;
  std::string id;
  for (int i = 0; i < 4; ++i) id += io::to_hex(random()).substr(8);
  return id;
}

/// XXH3 of a rank's layout as stored, so that a rank file knows which layout it was written for.
inline std::string layout_checksum(rank_layout const& layout) {
  auto text = detail::compact(to_json(layout));
  return io::to_hex(io::checksum_of(std::as_bytes(std::span(text))));
}

/// Records in a file of the save `metadata` describes its identity: the save, and for a
/// distributed save the rank whose file it is, the world size and that rank's layout.
inline void record_identity(io::safetensors_writer& writer, checkpoint_metadata const& metadata,
                            std::optional<int> rank = std::nullopt) {
  writer.set_metadata(formats::save_id_key, metadata.save_id);
  if (!rank) return;
  writer.set_metadata(formats::rank_key, std::to_string(*rank));
  writer.set_metadata(formats::world_size_key, std::to_string(metadata.ranks.size()));
  writer.set_metadata(formats::layout_key, layout_checksum(metadata.ranks.at(static_cast<std::size_t>(*rank))));
}

/// Why `file` is not a file of the save `metadata` describes (rank `rank`'s file, for a
/// distributed save), or nothing when it is. Saves from before identities (no save_id) are not
/// checked.
inline std::optional<std::string> identity_problem(io::safetensors_file const& file,
                                                   checkpoint_metadata const& metadata,
                                                   std::optional<int> rank = std::nullopt) {
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

/// The format of the checkpoint in `dir`, from the files it holds (metadata.json: distributed;
/// the state_dict index: state_dict; config.json: external), or nothing when it holds none of
/// them.
inline std::optional<checkpoint_format> detect_format(std::filesystem::path const& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return std::nullopt;
  if (std::filesystem::exists(formats::metadata_file(dir), ec)) return checkpoint_format::distributed;
  if (std::filesystem::exists(formats::state_dict_index(dir), ec)) return checkpoint_format::state_dict;
  if (std::filesystem::exists(formats::external_config(dir), ec)) return checkpoint_format::external;
  return std::nullopt;
}

/// What a checkpoint of cairn's own formats stores about itself: `metadata.json` of a
/// distributed checkpoint, the metadata of a state_dict checkpoint's index. Errors name the
/// file; an external checkpoint stores none (its `config.json` is the converter's).
inline checkpoint_metadata read_stored_metadata(std::filesystem::path const& dir, checkpoint_format format) {
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
  throw error(dir.string() + ": an external checkpoint stores no cairn metadata");
}

} // namespace cairn

namespace cairn::detail {

/// Every parameter of every rank's layout, by name (the first rank's description of each).
inline std::map<std::string, parameter_layout> parameters_of(std::vector<rank_layout> const& ranks) {
  std::map<std::string, parameter_layout> parameters;
  for (auto const& r : ranks)
    for (auto const& p : r.parameters) parameters.try_emplace(p.name, p);
  return parameters;
}

/// Packs items of `sizes` elements, in order, into files of at most `limit` elements each (an
/// item larger than the limit gets a file of its own): the file of each item.
inline std::vector<std::size_t> pack_files(std::vector<std::uint64_t> const& sizes, std::uint64_t limit) {
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

/// The file of each parameter of a state_dict checkpoint: files of at most
/// `parameters_per_file` elements (all saved shards counted), parameters in name order.
inline std::map<std::string, std::size_t>
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

inline void write_distributed_metadata(std::filesystem::path const& dir, checkpoint_metadata const& metadata) {
  auto text = pretty(to_json(metadata));
  io::write_file_atomically(formats::metadata_file(dir), std::as_bytes(std::span(text)));
}

inline void write_state_dict_index(std::filesystem::path const& dir, checkpoint_metadata const& metadata,
                                   std::map<std::string, std::string> weight_map) {
  io::safetensors_index index;
  index.metadata = to_json(metadata).as_object();
  index.weight_map = std::move(weight_map);
  io::write_index(formats::state_dict_index(dir), index);
}

/// The stored element type of a floating tensor saved with `data_type`.
inline io::dtype stored_type(io::dtype type, std::optional<cairn::data_type> const& conversion) {
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
