#pragma once

// The files of cairn's checkpoint formats: their names, the names of tensors in them, the
// metadata they store and how a directory's format is recognised. No libtorch: tools read
// checkpoints without the model's code.

#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/io/safetensors.hpp>
#include <cairn/io/safetensors_writer.hpp>

#include <boost/describe/enum_to_string.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
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

/// "[4, 8]", for messages.
CAIRN_DECL std::string shape_text(std::vector<std::uint64_t> const& shape);

/// "distributed", "state_dict" or "external", as configs spell them.
inline char const* format_name(checkpoint_format format) noexcept {
  return boost::describe::enum_to_string(format, "unknown");
}

/// The format of the checkpoint in `dir`, from the files it holds (metadata.json: distributed;
/// the state_dict index: state_dict; config.json: external), or nothing when it holds none of
/// them.
CAIRN_DECL std::optional<checkpoint_format> detect_format(std::filesystem::path const& dir);

/// What a checkpoint of cairn's own formats stores about itself: `metadata.json` of a
/// distributed checkpoint, the metadata of a state_dict checkpoint's index. Errors name the
/// file; an external checkpoint stores none (its `config.json` is the converter's).
CAIRN_DECL checkpoint_metadata read_stored_metadata(std::filesystem::path const& dir, checkpoint_format format);

} // namespace cairn

namespace cairn::detail {

/// `<parameter>/<state shard>`: the name of a tensor in cairn's own formats.
inline std::string tensor_name(std::string const& parameter, std::string const& shard) {
  return parameter + "/" + shard;
}

/// Elements of the whole parameter.
CAIRN_DECL std::uint64_t whole_numel(parameter_layout const& p);

/// A fresh identity for a save: 128 random bits, as 32 hex digits.
CAIRN_DECL std::string new_save_id();

/// XXH3 of a rank's layout as stored, so that a rank file knows which layout it was written for.
CAIRN_DECL std::string layout_checksum(rank_layout const& layout);

/// The identity a file of the save `metadata` describes records in its `__metadata__`: the save,
/// and for a distributed save the rank whose file it is, the world size and that rank's layout.
CAIRN_DECL std::map<std::string, std::string> identity_metadata(checkpoint_metadata const& metadata,
                                                                std::optional<int> rank = std::nullopt);

/// Records `identity_metadata(metadata, rank)` in a file being written.
CAIRN_DECL void record_identity(io::safetensors_writer& writer, checkpoint_metadata const& metadata,
                                std::optional<int> rank = std::nullopt);

/// Why `file` is not a file of the save `metadata` describes (rank `rank`'s file, for a
/// distributed save), or nothing when it is. Saves from before identities (no save_id) are not
/// checked.
CAIRN_DECL std::optional<std::string> identity_problem(io::safetensors_file const& file,
                                                       checkpoint_metadata const& metadata,
                                                       std::optional<int> rank = std::nullopt);

/// Every parameter of every rank's layout, by name (the first rank's description of each).
CAIRN_DECL std::map<std::string, parameter_layout> parameters_of(std::vector<rank_layout> const& ranks);

/// Packs items of `sizes` elements, in order, into files of at most `limit` elements each (an
/// item larger than the limit gets a file of its own): the file of each item.
CAIRN_DECL std::vector<std::size_t> pack_files(std::vector<std::uint64_t> const& sizes, std::uint64_t limit);

/// The file of each parameter of a state_dict checkpoint: files of at most
/// `parameters_per_file` elements (all saved shards counted), parameters in name order.
CAIRN_DECL std::map<std::string, std::size_t>
assign_state_dict_files(std::map<std::string, parameter_layout> const& parameters, std::size_t shards,
                        std::uint64_t parameters_per_file);

/// The text of a distributed checkpoint's metadata.json.
CAIRN_DECL std::string distributed_metadata_text(checkpoint_metadata const& metadata);

/// The text of a state_dict checkpoint's index: its metadata and weight map.
CAIRN_DECL std::string state_dict_index_text(checkpoint_metadata const& metadata,
                                             std::map<std::string, std::string> weight_map);

CAIRN_DECL void write_distributed_metadata(std::filesystem::path const& dir, checkpoint_metadata const& metadata);

CAIRN_DECL void write_state_dict_index(std::filesystem::path const& dir, checkpoint_metadata const& metadata,
                                       std::map<std::string, std::string> weight_map);

/// The stored element type of a floating tensor saved with `data_type`.
CAIRN_DECL io::dtype stored_type(io::dtype type, std::optional<cairn::data_type> const& conversion);

} // namespace cairn::detail

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/files.ipp>
#endif
