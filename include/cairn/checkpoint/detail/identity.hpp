#pragma once
// The identity of a save that every file it writes records (a random save id and, for a rank
// file, the rank, the world size and the checksum of its layout), and the check that a file
// read belongs to the save being loaded: a file swapped in from another save is refused.

#include <cairn/checkpoint/format_files.hpp>
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

namespace cairn::detail {

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

} // namespace cairn::detail

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/identity.ipp>
#endif
