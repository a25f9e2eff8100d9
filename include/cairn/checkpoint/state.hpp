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
#include <boost/json/value.hpp>

#include <cstdint>
#include <map>
#include <memory>
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

struct model_state;
struct checkpoint_metadata;

/// What keeps an owner of tensors a state views in step with every save and load of it: a
/// libtorch optimizer, whose buffers appear after its first step and whose step counts are not
/// tensors (`optimizer_state` makes one). Held by `model_state::hooks`; the formats call it.
class state_hooks {
public:
  virtual ~state_hooks() = default;
  /// Called by every save before it reads `state`: brings the state's tensors up to date with
  /// the owner, and returns what the owner keeps beyond them, the same on every rank (step
  /// counts), as a JSON object stored once with the save (its metadata's `optimizer_state`).
  virtual boost::json::value save(model_state const& state) = 0;
  /// Called by every load after it wrote into `state`: hands the owner what it loaded.
  /// `optimizer_loaded`: whether the optimizer state shards were loaded (a pretrained load of
  /// the weights alone zeroes them: the owner starts afresh). `saved`: what `save` returned
  /// for this checkpoint, null where it was saved without hooks.
  virtual void load(model_state const& state, checkpoint_metadata const& loaded, boost::json::value const& saved,
                    bool optimizer_loaded) = 0;
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
  /// What keeps the owner of tensors the state views (a libtorch optimizer) in step with every
  /// save and load; set by `optimizer_state`, empty otherwise.
  std::shared_ptr<state_hooks> hooks;

  [[nodiscard]] CAIRN_DECL rank_layout layout() const;

  [[nodiscard]] CAIRN_DECL parameter_state* find(std::string_view name);

  /// The flat tensor of state shard `shard_name` (`weights`, `momentum_buffer`…) of parameter
  /// `parameter`: the state's own, which an optimizer of the trainer's own updates in place; an
  /// error naming what is missing.
  [[nodiscard]] CAIRN_DECL at::Tensor& shard(std::string_view parameter, std::string_view shard_name);

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

/// The metadata a save of `state` stores: `user_metadata` with, where the state has hooks,
/// what they keep beyond tensors under `optimizer_state` (after they brought the state's tensors
/// up to date). What every format's save calls first.
CAIRN_DECL boost::json::value hooked_metadata(model_state const& state, boost::json::value const& user_metadata);

/// Hands what a load wrote into `state` to its hooks, if any. What every format's load calls
/// last.
CAIRN_DECL void after_load(model_state const& state, checkpoint_metadata const& loaded, bool optimizer_loaded);

/// Every rank's layout of its state, in rank order, on every rank (what the whole-tensor
/// formats plan their gathers from). Collective.
CAIRN_DECL std::vector<rank_layout> all_rank_layouts(model_state const& state, comm::communicator_ref comm);
} // namespace detail

/// The elements `layout` gives of the whole tensor `whole` (any device), densely, as a flat
/// tensor of its own: a copy, which nothing else sees.
CAIRN_DECL at::Tensor take_shard(at::Tensor const& whole, shard_layout const& layout);

/// Adds parameter `name` to `state`: `layout` of the tensor `whole`, viewed, so that a save reads
/// what training writes into `whole` and a load writes into it. The weights shard is a view of
/// `whole`'s elements where they lie in one contiguous range of its memory (the whole tensor, a
/// block of rows, a flat slice: ZeRO, FSDP), and an error otherwise, naming
/// `add_parameter_copy`. Each optimizer state shard is the state's own, zero (`model_state::shard`
/// names it to an optimizer of one's own). `replicated`: every rank holding this same `layout`
/// of it holds the same values (its replica set, written once).
CAIRN_DECL parameter_state& add_parameter(model_state& state, std::string name, at::Tensor const& whole,
                                          shard_layout layout, bool replicated = false);

/// Adds parameter `name` to `state` as `add_parameter` does, its weights a copy of `layout` of
/// `whole` that the state owns (`take_shard`): what a rank keeps of a model built whole and then
/// sharded (a block of columns, or the whole dropped after). Training must then write into the
/// state's tensors (`parameter_state::shards`, or `model_state::shard`): `whole` is not saved.
CAIRN_DECL parameter_state& add_parameter_copy(model_state& state, std::string name, at::Tensor const& whole,
                                               shard_layout layout, bool replicated = false);

/// Adds parameter `name` of `shape` to `state`, held as `place` says (`place_on_grid`): every
/// state shard of it the state's own, zero, of `options`' type (float32 by default) and device.
/// What a rank allocates, without the whole tensor, before it loads a checkpoint into it; the
/// model then computes with the state's tensors (`shards[0].view(…)`).
CAIRN_DECL parameter_state& add_parameter(model_state& state, std::string name, std::vector<std::uint64_t> shape,
                                          placement const& place, at::TensorOptions options = {});

/// A state of whole tensors (one process, or every rank holding everything): each of `weights`
/// viewed (a module's `named_parameters()`: a save reads the trained weights, a load writes into
/// them; an error for a tensor that is not contiguous), optimizer state shards
/// `optimizer_shards` (say `momentum_buffer`) the state's own, zero, for an optimizer of one's
/// own to update (`model_state::shard`). A libtorch optimizer: `optimizer_state`.
CAIRN_DECL model_state whole_state(std::vector<std::pair<std::string, at::Tensor>> const& weights,
                                   std::vector<std::string> const& optimizer_shards = {});

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/state.ipp>
#endif
