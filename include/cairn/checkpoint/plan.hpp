#pragma once

// A save described before any byte moves: its files, and in each file its tensors, the rank that
// writes it and where each tensor's bytes come from. Each format plans (distributed, state_dict,
// external through a converter); one executor runs any plan (checkpoint/detail/executor.hpp).
// No libtorch: a plan is data, for `cairn inspect`, a dry run and the tests to read.

#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/layout.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/io/dtype.hpp>

#include <boost/describe/enum.hpp>
#include <boost/json/fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cairn {

/// Where the bytes of a planned tensor come from.
BOOST_DEFINE_ENUM_CLASS(
    write_source,
    own_shard, ///< the writing rank's own shard of a parameter, as it holds it
    gathered,  ///< a state shard of a parameter, whole, gathered to the writer from its holders
    converted, ///< an output of a converter's weight rule, run on the writer over whole parameters
    co_written ///< a state shard of a parameter, whole, each holder writing its own part where
               ///< it lies in the file (every part one run of the whole): no bytes move between ranks
)

/// One tensor of a planned file.
struct write_item {
  std::string tensor;                ///< its name in the file
  io::dtype dtype = io::dtype::F32;  ///< of the bytes the writer is handed
  io::dtype stored = io::dtype::F32; ///< in the file (`data_type` converts floating tensors)
  std::vector<std::uint64_t> shape;  ///< in the file
  write_source source = write_source::own_shard;
  std::string parameter;  ///< own_shard, gathered, co_written: whose
  std::size_t shard = 0;  ///< own_shard, gathered, co_written: which state shard (its index in the state)
  std::size_t rule = 0;   ///< converted: which weight rule
  std::size_t output = 0; ///< converted: which of the rule's outputs

  /// Bytes it takes in the file.
  [[nodiscard]] CAIRN_DECL std::uint64_t stored_bytes() const noexcept;
};

/// One file of a save, its tensors in the order of their bytes. One rank writes it (creates it,
/// writes its tensors, commits it), other ranks adding their parts of its co_written tensors.
struct planned_file {
  std::string name;                            ///< relative to the save's directory
  int writer = 0;                              ///< the rank that writes (and commits) it
  std::map<std::string, std::string> metadata; ///< its `__metadata__`: format, identity
  std::vector<write_item> items;
};

/// A small file rank 0 writes once every planned file is whole: metadata.json, an index,
/// config.json. A reader never finds it naming a file that is not there.
struct closing_file {
  std::string name;
  std::string text;
};

/// What a save writes, decided on every rank alike before any byte moves. A distributed save
/// whose layouts are a grid's rules (`model_state::grid`) is planned by each rank alone for its
/// own file: its `files` list that one, `ranks` is empty, and its closing text is rank 0's.
struct save_plan {
  checkpoint_format format = checkpoint_format::distributed;
  std::vector<planned_file> files;
  std::vector<closing_file> closing;
  /// What every rank holds (the gathers' sources): the layouts the plan was made from.
  std::vector<rank_layout> ranks;

  /// Bytes each of `world_size` ranks writes (planned files, co_written tensors counted on each
  /// holder for its part; the closing ones are rank 0's too).
  [[nodiscard]] CAIRN_DECL std::vector<std::uint64_t> bytes_per_rank(int world_size) const;

  /// The rounds of the plan: its files' longest list of tensors. In round k every rank takes
  /// part in the k-th tensor of each file in turn (file 0's, file 1's, …), so that gathers to
  /// different writers alternate and every writer's file grows at once.
  [[nodiscard]] CAIRN_DECL std::size_t rounds() const noexcept;
};

/// The plan as JSON, for people and tools: every file with its writer and tensors (name, type,
/// shape, source), and the closing files by name.
CAIRN_DECL boost::json::value describe(save_plan const& plan);

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/plan.ipp>
#endif
