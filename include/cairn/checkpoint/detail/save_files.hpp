#pragma once
// How a save lays out its files: tensor names, the packing of state_dict files, the texts of
// metadata.json and of the state_dict index, and the stored type of a converted tensor.

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

/// `<parameter>/<state shard>`: the name of a tensor in cairn's own formats.
inline std::string tensor_name(std::string const& parameter, std::string const& shard) {
  return parameter + "/" + shard;
}

/// Indices of the state shards a save or load covers: the weights (the first) with
/// `model_weights`, the others with `optimizer_state`.
inline std::vector<std::size_t> selected_shards(std::vector<std::string> const& names, bool model_weights,
                                                bool optimizer_state) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (i == 0 ? model_weights : optimizer_state) out.push_back(i);
  return out;
}

/// Elements of the whole parameter.
CAIRN_DECL std::uint64_t whole_numel(parameter_layout const& p);

/// Every parameter of every rank's layout, by name (the first rank's description of each).
CAIRN_DECL std::map<std::string, parameter_layout> parameters_of(std::vector<rank_layout> const& ranks);

/// Whether each rank sends its holding of parameter `name` when the parameter is assembled
/// whole: every holder of a part of its own, and one member (the lowest rank) of each replica set.
CAIRN_DECL std::vector<bool> senders_of(std::vector<rank_layout> const& ranks, std::string const& name);

/// The run of parameter `whole` (flat, in the whole tensor) each rank sends when the parameter is
/// written whole, where every part is one run and the parts tile the whole: what lets each holder
/// write its own part into the file (a co_written tensor) instead of gathering it. Replicated
/// values come from rank 0 alone; a rank that sends nothing has an empty run. Nothing when a part
/// is several runs (a box split across its rows' width, say) or fewer than two ranks send.
CAIRN_DECL std::optional<std::vector<flat_range>> part_runs(std::vector<rank_layout> const& ranks,
                                                            parameter_layout const& whole);

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
#include <cairn/checkpoint/impl/save_files.ipp>
#endif
