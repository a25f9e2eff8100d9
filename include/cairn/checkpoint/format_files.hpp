#pragma once
// The files of cairn's checkpoint formats as users and tools meet them: their names, the keys
// of the identity each file records, how a directory's format is recognised and the metadata a
// save stores about itself. No libtorch: tools read checkpoints without the model's code.

#include <cairn/checkpoint/metadata.hpp>
#include <cairn/detail/decl.hpp>

#include <boost/describe/enum_to_string.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
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
/// `__metadata__` key prefixes of a rank's items (`model_state::items`) in its rank file: the
/// item's bytes in hexadecimal, and their XXH3.
inline constexpr std::string_view item_key_prefix = "cairn.item:";
inline constexpr std::string_view item_checksum_prefix = "cairn.item_xxh3:";

} // namespace cairn::formats

namespace cairn {

/// The most bytes of items (`model_state::items`) one rank may save: they travel in its rank
/// file's header, which readers bound.
inline constexpr std::size_t max_item_bytes = std::size_t{16} << 20;

namespace detail {
/// Why `items` cannot be saved (a name empty, too long or with control characters; more than
/// `max_item_bytes` in all), or nothing.
CAIRN_DECL std::optional<std::string> item_problem(std::map<std::string, std::string> const& items);
/// `items` as `__metadata__` entries of a rank file, into `metadata`.
CAIRN_DECL void put_items(std::map<std::string, std::string>& metadata,
                          std::map<std::string, std::string> const& items);
/// The items a rank file's `__metadata__` records, each checked against its checksum; what is
/// wrong (a checksum missing or not matching, bytes that are not hexadecimal) into `problems`,
/// naming the item.
CAIRN_DECL std::map<std::string, std::string> read_items(std::map<std::string, std::string> const& metadata,
                                                         std::vector<std::string>& problems);
} // namespace detail

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

/// The items each rank saved with the distributed checkpoint at `path` (`model_state::items`),
/// by saved rank: what a program maps onto another world size itself, where a load gives none
/// (a global data cursor means the same on any number of ranks: take rank 0's). Each file is
/// checked against the save's identity and each item against its checksum; an error naming the
/// file otherwise. On a store, `path` names the save (its newest complete generation is read).
///
///     auto saved = cairn::saved_items(run.started().path);  // after a resume on another world size
///     auto cursor = std::stoll(saved.at(0).at("cursor"));
CAIRN_DECL std::vector<std::map<std::string, std::string>> saved_items(std::filesystem::path const& path);

/// The items saved rank `rank` saved with the distributed checkpoint at `path`, checked as
/// `saved_items` checks them: its file alone is read (rank 0's global cursor does not depend on
/// another rank's file). An error naming the checkpoint when it has no rank `rank`.
CAIRN_DECL std::map<std::string, std::string> saved_items(std::filesystem::path const& path, int rank);

/// The items one rank file records in its `__metadata__` (`file_metadata`), each checked
/// against its checksum; what is wrong into `problems`, naming the item (what `cairn inspect`
/// shows of a rank file).
inline std::map<std::string, std::string> rank_file_items(std::map<std::string, std::string> const& file_metadata,
                                                          std::vector<std::string>& problems) {
  return detail::read_items(file_metadata, problems);
}

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/format_files.ipp>
#endif
