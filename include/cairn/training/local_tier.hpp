#pragma once
// cairn: requires libtorch

// The mechanics of the local tier of checkpoints (docs/tiers.md): which ranks share a node's own
// disk, which peers keep a copy of each rank's part, and files moved between ranks through a
// communicator, in chunks. When to save and what to recover from is the manager's policy.

#include <cairn/comm/ref.hpp>
#include <cairn/detail/decl.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace cairn {

/// The nodes of a run as its local tier sees them: the groups of ranks that share a local
/// directory (one node's disk). Nodes are in the order of their lowest rank.
struct local_nodes {
  std::vector<std::vector<int>> ranks; ///< each node's ranks, ascending
  std::vector<int> node_of;            ///< each rank's node
  std::vector<std::string> hosts;      ///< each node's host name

  [[nodiscard]] int count() const noexcept { return static_cast<int>(ranks.size()); }
  [[nodiscard]] int leader(int node) const { return ranks.at(static_cast<std::size_t>(node)).front(); }
  [[nodiscard]] bool leads(int rank) const { return leader(node_of.at(static_cast<std::size_t>(rank))) == rank; }
  /// The node's ranks as text: "ranks 0-3 on gpu-17".
  [[nodiscard]] CAIRN_DECL std::string describe(int node) const;
};

/// Which ranks share the directory `dir`: each rank leaves a probe file there and looks for the
/// others'. A training_error (kind storage) when a rank cannot write there, when the ranks'
/// views disagree, or when ranks of different hosts see one directory (a shared filesystem: a
/// local tier needs each node's own disk). Collective; makes `dir` where it is missing.
CAIRN_DECL local_nodes find_local_nodes(comm::communicator_ref comm, std::filesystem::path const& dir);

/// The ranks that keep a copy of rank `rank`'s part: for j = 1 … `replicas`, the rank of node
/// (its node + j) mod nodes at its own index there (modulo that node's size). Fewer where there
/// are not `replicas` other nodes; none in a run of one node.
CAIRN_DECL std::vector<int> replica_holders(local_nodes const& nodes, int rank, std::int64_t replicas);

namespace detail {

/// Copies the file or object `from` to `to` (through their storage backends: a local file
/// uploaded to an object store, say), in chunks of `chunk` bytes, committed durably when whole.
CAIRN_DECL void copy_file(std::filesystem::path const& from, std::filesystem::path const& to,
                          std::uint64_t chunk = std::uint64_t{32} << 20);

/// One file to move between two ranks, named relative to each end's directory.
struct file_transfer {
  int from = 0;
  int to = 0;
  std::string name;
};

/// What became of a transfer this rank took part in.
struct transfer_outcome {
  std::size_t index = 0; ///< in the list given
  bool received = false; ///< this rank was its receiver
  std::uint64_t bytes = 0;
  std::string problem; ///< empty when it arrived whole
};

/// Moves the files of `transfers` (the same list on every rank): in rounds where each rank sends
/// one file at most and receives one at most, each file's size first, then its bytes in chunks
/// of `chunk` (this rank holds a chunk to send and one received, never a whole file), then
/// whether the sender read it all. A rank reads what it sends from `from_dir` and writes what it
/// receives into `to_dir`, committed durably only when whole (a file of that name there is
/// replaced). Only the two ends of a transfer take part in it. Returns the outcomes of this
/// rank's transfers; a sender that could not read its file makes its transfer fail on both ends
/// (a problem each), while a failure of the communicator throws.
CAIRN_DECL std::vector<transfer_outcome> run_transfers(comm::communicator_ref comm,
                                                       std::vector<file_transfer> const& transfers,
                                                       std::filesystem::path const& from_dir,
                                                       std::filesystem::path const& to_dir,
                                                       std::uint64_t chunk = std::uint64_t{32} << 20);

} // namespace detail

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/training/impl/local_tier.ipp>
#endif
