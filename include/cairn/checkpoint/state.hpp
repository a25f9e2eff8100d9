#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/layout_rules.hpp>
#include <cairn/checkpoint/tensor.hpp>
#include <cairn/comm/grid.hpp>
#include <cairn/comm/ref.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/error.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn {

/// One parameter as this rank holds it: its layout, and one tensor per state shard name
/// (`weights`, then optimizer states), each holding exactly the rank's elements.
struct parameter_state {
  parameter_layout layout;
  std::vector<at::Tensor> shards;
};

/// What a trainer hands to a checkpoint. `shard_names` come in the order of each parameter's
/// `shards`; the first is the model weights, the others optimizer state.
struct model_state {
  std::vector<std::string> shard_names{"weights"};
  std::vector<parameter_state> parameters;
  /// This rank's state beyond tensors, by name: bytes, such as a random generator's state
  /// (`cpu_generator_state`) or a data loader's position as JSON text. A distributed save
  /// stores each rank's in its own rank file, checksummed (at most `max_item_bytes` a rank); a
  /// load of a checkpoint that as many ranks saved gives each rank its own back, and one of
  /// another world size gives none, with a warning: what they mean on another number of ranks
  /// is their owner's concern. The whole-tensor formats do not store them.
  std::map<std::string, std::string> items;
  /// The grid that placed the parameters (`place_on_grid`), where one did; Megatron's order. A
  /// distributed save then agrees on the grid's rules, each rank deriving its stage's from its
  /// own layout, instead of exchanging every rank's layout: a few hundred bytes a rank, and no
  /// rank holds another's layouts. Without it, or where the layouts are not the grid's, every
  /// rank's layout is exchanged, as always.
  std::optional<comm::parallel_grid> grid;

  [[nodiscard]] CAIRN_DECL rank_layout layout() const;

  [[nodiscard]] CAIRN_DECL parameter_state* find(std::string_view name);

  /// The bytes this rank holds: of the weights alone, or with the optimizer state.
  [[nodiscard]] CAIRN_DECL std::uint64_t bytes(bool optimizer_state = true) const;

  /// Checks that every parameter has a tensor per shard name, with its layout's element count
  /// and dtype; an error naming the parameter otherwise.
  CAIRN_DECL void check() const;
};

namespace detail {
/// The ranks' layouts as the ranks of a communicator last exchanged them, kept by what saves on
/// it again and again (a checkpoint manager, a checkpointer): a save whose layouts are those of
/// the last is agreed in one all-reduce of 40 bytes instead of exchanging them.
struct layout_exchange {
  std::vector<rank_layout> ranks; ///< every rank's layout, unless `rules` stand for them
  /// The rules of the ranks' grid, where their layouts are one's (`model_state::grid`): on rank
  /// 0 every stage's, on the others their own stage's (all a rank needs to plan its file).
  std::optional<layout_rules> rules;
  std::uint64_t mine = 0; ///< the hash of this rank's layout then
  std::uint64_t all = 0;  ///< the hash of every rank's, alike on every rank
  bool checked = false;   ///< whether a save found that they tile every parameter
};

/// The ranks' layouts for a distributed save: the rules of their grid where `state.grid` places
/// them (each rank derives its stage's rules from its own layout; two all-reduces of a few int64
/// a stage agree that every rank of a stage derived the same; one rank a stage sends them to
/// rank 0, which alone needs them all, for metadata.json), every rank's layout otherwise
/// (exchanged as `all_rank_layouts` does). Collective. With `reuse`, what `reuse` kept when
/// every rank's layout is the one it had then and every rank kept the same agreement (one
/// all-reduce of 40 bytes); otherwise agreed anew, and kept in `reuse`.
CAIRN_DECL layout_exchange agree_layouts(model_state const& state, comm::communicator_ref comm,
                                         layout_exchange* reuse = nullptr);

/// Every rank's layout of its state, in rank order, on every rank (what the whole-tensor
/// formats plan their gathers from). Collective.
CAIRN_DECL std::vector<rank_layout> all_rank_layouts(model_state const& state, comm::communicator_ref comm);
} // namespace detail

/// The elements `layout` gives of the whole tensor `whole` (any device), densely, as a flat
/// tensor of its own: what a rank holds of a parameter it has whole.
CAIRN_DECL at::Tensor take_shard(at::Tensor const& whole, shard_layout const& layout);

/// Adds parameter `name` to `state`: `layout` of the whole tensor `whole` (which every rank
/// has, as when a model is built in full and then sharded), its weights taken from it and each
/// optimizer state shard zeroed. `replicated`: every rank holding this same `layout` of it holds
/// the same values (its replica set, written once).
CAIRN_DECL parameter_state& add_parameter(model_state& state, std::string name, at::Tensor const& whole,
                                          shard_layout layout, bool replicated = false);

/// Adds parameter `name` of `shape` to `state`, held as `place` says (`place_on_grid`): every
/// state shard of it zero, of `options`' type (float32 by default) and device. What a rank
/// allocates, without the whole tensor, before it loads a checkpoint into it.
CAIRN_DECL parameter_state& add_parameter(model_state& state, std::string name, std::vector<std::uint64_t> shape,
                                          placement const& place, at::TensorOptions options = {});

/// A state of whole tensors (one process, or every rank holding everything): each of
/// `weights` whole, optimizer state shards `optimizer_shards` (say `exp_avg`, `exp_avg_sq`)
/// zeroed.
CAIRN_DECL model_state whole_state(std::vector<std::pair<std::string, at::Tensor>> const& weights,
                                   std::vector<std::string> const& optimizer_shards = {});

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/state.ipp>
#endif
