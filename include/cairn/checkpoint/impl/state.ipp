// Definitions of <cairn/checkpoint/state.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/layout_rules.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/checkpoint/tensor.hpp>
#include <cairn/comm/collectives.hpp>
#include <cairn/config/json.hpp>
#include <cairn/error.hpp>
#include <cairn/io/checksum.hpp>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn {

CAIRN_DECL rank_layout model_state::layout() const {
  rank_layout out;
  for (auto const& p : parameters) out.parameters.push_back(p.layout);
  return out;
}

CAIRN_DECL parameter_state* model_state::find(std::string_view name) {
  for (auto& p : parameters)
    if (p.layout.name == name) return &p;
  return nullptr;
}

CAIRN_DECL at::Tensor& model_state::shard(std::string_view parameter, std::string_view shard_name) {
  auto* p = find(parameter);
  if (!p) throw checkpoint_error(checkpoint_errc::invalid_state, "the state has no parameter '" + std::string(parameter) + "'");
  for (std::size_t i = 0; i < shard_names.size() && i < p->shards.size(); ++i)
    if (shard_names[i] == shard_name) return p->shards[i];
  std::string names;
  for (auto const& n : shard_names) names += (names.empty() ? "" : ", ") + n;
  throw checkpoint_error(checkpoint_errc::invalid_state, "the state has no shard '" + std::string(shard_name) +
                                                             "' (its shards: " + names + ")");
}

CAIRN_DECL std::uint64_t model_state::bytes(bool optimizer_state) const {
  std::uint64_t total = 0;
  for (auto const& p : parameters)
    for (std::size_t i = 0; i < p.shards.size() && (optimizer_state || i == 0); ++i)
      total += static_cast<std::uint64_t>(p.shards[i].defined() ? p.shards[i].nbytes() : 0);
  return total;
}

CAIRN_DECL void model_state::check() const {
  if (shard_names.empty() || shard_names.front() != "weights")
    throw checkpoint_error(checkpoint_errc::invalid_state, "model_state: the first state shard must be \"weights\"");
  if (auto problem = detail::item_problem(items))
    throw checkpoint_error(checkpoint_errc::invalid_state, "model_state: " + *problem);
  for (auto const& p : parameters) {
    auto const& name = p.layout.name;
    if (auto problem = p.layout.shard.problem(p.layout.shape))
      throw checkpoint_error(checkpoint_errc::invalid_state, "model_state: parameter '" + name + "': " + *problem);
    if (p.shards.size() != shard_names.size())
      throw checkpoint_error(checkpoint_errc::invalid_state, "model_state: parameter '" + name + "' has " +
                                                                 std::to_string(p.shards.size()) + " tensors for " +
                                                                 std::to_string(shard_names.size()) + " state shards");
    for (std::size_t i = 0; i < p.shards.size(); ++i) {
      auto const& t = p.shards[i];
      if (!t.defined() || static_cast<std::uint64_t>(t.numel()) != p.layout.shard.numel())
        throw checkpoint_error(checkpoint_errc::invalid_state,
                               "model_state: parameter '" + name + "' shard '" + shard_names[i] + "' holds " +
                                   (t.defined() ? std::to_string(t.numel()) : std::string("no")) +
                                   " elements, its layout " + std::to_string(p.layout.shard.numel()));
      if (to_dtype(t.scalar_type()) != p.layout.dtype)
        throw checkpoint_error(checkpoint_errc::invalid_state,
                               "model_state: parameter '" + name + "' shard '" + shard_names[i] + "' is " +
                                   std::string(io::name(to_dtype(t.scalar_type()))) + ", its layout " +
                                   std::string(io::name(p.layout.dtype)));
    }
  }
}

namespace detail {

/// The 64-bit hash of `text`.
inline std::uint64_t text_hash(std::string const& text) { return io::checksum_of(std::as_bytes(std::span(text))); }

/// `values` maximised over the ranks: one all-reduce.
inline std::vector<std::int64_t> max_over_ranks(comm::communicator_ref comm, std::vector<std::int64_t> const& values) {
  auto t = at::empty({static_cast<std::int64_t>(values.size())}, at::TensorOptions().dtype(at::kLong));
  std::copy(values.begin(), values.end(), t.data_ptr<std::int64_t>());
  t = t.to(comm.device());
  comm.all_reduce(t, comm::reduce_op::max);
  t = t.to(c10::Device(c10::kCPU)).contiguous();
  auto const* v = t.data_ptr<std::int64_t>();
  return {v, v + values.size()};
}

/// Appends `hash` as the four values whose maxima over the ranks tell whether every rank that
/// gave one gave the same: its halves and their negations (the others give `none`).
inline void push_hash(std::vector<std::int64_t>& v, std::optional<std::uint64_t> hash) {
  constexpr auto none = std::numeric_limits<std::int64_t>::min();
  auto low = hash ? static_cast<std::int64_t>(*hash & 0xffffffffU) : none;
  auto high = hash ? static_cast<std::int64_t>(*hash >> 32) : none;
  for (auto x : {low, high, hash ? -low : none, hash ? -high : none}) v.push_back(x);
}

/// Whether the maxima at `at` (as push_hash put them) come from one hash alike on every rank
/// that gave it; that hash.
inline std::optional<std::uint64_t> agreed_hash(std::vector<std::int64_t> const& v, std::size_t at) {
  constexpr auto none = std::numeric_limits<std::int64_t>::min();
  if (v[at] == none || v[at + 1] == none || v[at] != -v[at + 2] || v[at + 1] != -v[at + 3]) return std::nullopt;
  return static_cast<std::uint64_t>(v[at]) | (static_cast<std::uint64_t>(v[at + 1]) << 32);
}

/// Every rank's layout, all-gathered from each rank's `mine_text` (its compact JSON), with the
/// hash of this rank's and of every rank's.
inline layout_exchange exchange_layouts(comm::communicator_ref comm, std::string const& mine_text) {
  layout_exchange out;
  io::checksum all;
  for (auto const& text : comm::all_gather_strings(comm, mine_text)) {
    out.ranks.push_back(parse<rank_layout>(parse_json(text)));
    auto one = text_hash(text);
    all.update(std::as_bytes(std::span(&one, 1)));
  }
  out.mine = text_hash(mine_text);
  out.all = all.value();
  return out;
}

/// The rules of every rank's layout, agreed without exchanging layouts; nothing, alike on every
/// rank, where the state names no grid or its layouts are not the grid's.
inline std::optional<layout_exchange> agree_rules(model_state const& state, comm::communicator_ref comm,
                                                  std::uint64_t mine) {
  // 1. This rank's stage's rules, from its own layout alone; the grid alike everywhere.
  std::optional<layout_rules> stage;
  comm::grid_coordinates at;
  auto const& grid = state.grid;
  if (grid && grid->order() == comm::grid_order::tensor_data_pipeline && grid->world_size() == comm.size()) {
    at = grid->coordinates(comm.rank());
    layout_rules sizes{
        grid->size(comm::axis::tensor), grid->size(comm::axis::pipeline), grid->size(comm::axis::data), {}};
    if (auto found = rules_of_rank(state.layout(), sizes, at)) {
      sizes.parameters = std::move(*found);
      stage = std::move(sizes);
    }
  }
  std::vector<std::int64_t> first{stage ? 0 : 1};
  push_hash(first, grid ? std::optional(text_hash(grid->text())) : std::nullopt);
  first = max_over_ranks(comm, first);
  if (first[0] != 0 || !agreed_hash(first, 1)) return std::nullopt;
  // 2. Every rank of a stage derived the same rules: a hash and a length a stage.
  auto text = compact(to_json(*stage));
  std::vector<std::int64_t> second;
  for (std::int64_t s = 0; s < stage->pipeline; ++s) {
    push_hash(second, s == at.pipeline ? std::optional(text_hash(text)) : std::nullopt);
    second.push_back(s == at.pipeline ? static_cast<std::int64_t>(text.size()) : 0);
  }
  second = max_over_ranks(comm, second);
  io::checksum all;
  auto grid_text = grid->text();
  all.update(std::as_bytes(std::span(grid_text)));
  bool alike = true;
  for (std::size_t s = 0; s < static_cast<std::size_t>(stage->pipeline); ++s) {
    auto hash = agreed_hash(second, 5 * s);
    alike = alike && hash;
    if (hash) all.update(std::as_bytes(std::span(&*hash, 1)));
  }
  if (!alike) return std::nullopt;
  // 3. Rank 0 gathers every stage's rules from its first rank (TP and DP coordinates 0), and
  //    checks that no parameter is in two stages.
  bool first_of_stage = at.tensor == 0 && at.data == 0;
  auto bytes =
      at::empty({first_of_stage ? static_cast<std::int64_t>(text.size()) : 0}, at::TensorOptions().dtype(at::kByte));
  if (first_of_stage && !text.empty()) std::memcpy(bytes.data_ptr(), text.data(), text.size());
  std::vector<at::Tensor> received;
  if (comm.rank() == 0)
    for (int r = 0; r < comm.size(); ++r) {
      auto c = grid->coordinates(r);
      auto n = c.tensor == 0 && c.data == 0 ? second[5 * static_cast<std::size_t>(c.pipeline) + 4] : 0;
      received.push_back(at::empty({n}, at::TensorOptions().dtype(at::kByte).device(comm.device())));
    }
  comm::gather_into(comm, bytes.to(comm.device()), 0, received);
  std::int64_t whole = 1;
  layout_rules rules{stage->tensor, stage->pipeline, stage->data, {}};
  if (comm.rank() == 0) {
    try {
      for (std::int64_t s = 0; s < stage->pipeline; ++s) {
        auto const& t = received[static_cast<std::size_t>(grid->rank_of({0, static_cast<int>(s), 0}))];
        auto cpu = t.to(c10::Device(c10::kCPU)).contiguous();
        auto part = parse<layout_rules>(parse_json(
            std::string_view(static_cast<char const*>(cpu.data_ptr()), static_cast<std::size_t>(cpu.numel()))));
        rules.parameters.insert(rules.parameters.end(), part.parameters.begin(), part.parameters.end());
      }
      check_rules(rules); // a name in two stages among others
    } catch (error const&) {
      whole = 0;
    }
  }
  if (comm::broadcast_integers(comm, {whole}).at(0) == 0) return std::nullopt;
  layout_exchange out;
  out.rules = comm.rank() == 0 ? std::move(rules) : std::move(*stage);
  out.mine = mine;
  out.all = all.value();
  out.checked = true; // rules tile their parameters by construction
  return out;
}

} // namespace detail

CAIRN_DECL detail::layout_exchange detail::agree_layouts(model_state const& state, comm::communicator_ref comm,
                                                         layout_exchange* reuse) {
  auto mine_text = compact(to_json(state.layout()));
  auto mine = text_hash(mine_text);
  if (reuse) {
    // Unchanged everywhere, and the same exchange kept everywhere: one all-reduce of 40 bytes.
    bool kept = (reuse->rules || reuse->ranks.size() == static_cast<std::size_t>(comm.size())) && reuse->mine == mine;
    std::vector<std::int64_t> v{kept ? 0 : 1};
    push_hash(v, reuse->all);
    v = max_over_ranks(comm, v);
    if (v[0] == 0 && agreed_hash(v, 1)) return *reuse;
  }
  if (auto agreed = agree_rules(state, comm, mine)) {
    if (reuse) *reuse = *agreed;
    return *agreed;
  }
  auto out = exchange_layouts(comm, mine_text);
  if (reuse) *reuse = out;
  return out;
}

CAIRN_DECL std::vector<rank_layout> detail::all_rank_layouts(model_state const& state, comm::communicator_ref comm) {
  return exchange_layouts(comm, compact(to_json(state.layout()))).ranks;
}

namespace detail {

/// The box of `layout` in `whole`, narrowed (a view).
inline at::Tensor shard_box(at::Tensor const& whole, shard_layout const& layout, char const* caller) {
  std::vector<std::uint64_t> shape(whole.sizes().begin(), whole.sizes().end());
  if (auto problem = layout.problem(shape))
    throw checkpoint_error(checkpoint_errc::invalid_state, std::string(caller) + ": " + *problem);
  auto box = whole.detach();
  for (std::size_t d = 0; d < layout.offsets.size(); ++d)
    box = box.narrow(static_cast<std::int64_t>(d), static_cast<std::int64_t>(layout.offsets[d]),
                     static_cast<std::int64_t>(layout.lengths[d]));
  return box;
}

inline at::Tensor flat_part(at::Tensor flat, shard_layout const& layout) {
  if (layout.flat)
    flat = flat.slice(0, static_cast<std::int64_t>(layout.flat->begin), static_cast<std::int64_t>(layout.flat->end));
  return flat;
}

inline parameter_state& add_shard(model_state& state, std::string name, at::Tensor const& whole, shard_layout layout,
                                  bool replicated, at::Tensor weights) {
  std::vector<std::uint64_t> shape(whole.sizes().begin(), whole.sizes().end());
  auto dtype = to_dtype(whole.scalar_type()); // may throw: before the aggregate (GCC 12 destroys its members twice)
  parameter_state p{{std::move(name), std::move(shape), dtype, replicated, std::move(layout)}, {}};
  p.shards.push_back(std::move(weights));
  for (std::size_t i = 1; i < state.shard_names.size(); ++i)
    p.shards.push_back(at::zeros_like(p.shards.front(), at::MemoryFormat::Contiguous));
  state.parameters.push_back(std::move(p));
  return state.parameters.back();
}

} // namespace detail

CAIRN_DECL at::Tensor take_shard(at::Tensor const& whole, shard_layout const& layout) {
  auto box = detail::shard_box(whole, layout, "take_shard");
  return detail::flat_part(box.contiguous().view({-1}), layout).clone();
}

CAIRN_DECL parameter_state& add_parameter(model_state& state, std::string name, at::Tensor const& whole,
                                          shard_layout layout, bool replicated) {
  auto box = detail::shard_box(whole, layout, "add_parameter");
  if (!box.is_contiguous())
    throw checkpoint_error(
        checkpoint_errc::invalid_state,
        "add_parameter: '" + name + "': its shard (offsets " + shape_text(layout.offsets) + ", lengths " +
            shape_text(layout.lengths) + ") is not one contiguous range of the tensor's memory" +
            (whole.is_contiguous() ? " (a block of columns, say)" : " (the tensor itself is not contiguous)") +
            ", so the state cannot view it and a save would not see training's updates: train a tensor "
            "that holds the shard alone and add that, or take a copy the state owns with add_parameter_copy and "
            "train the state's tensor");
  return detail::add_shard(state, std::move(name), whole, layout, replicated,
                           detail::flat_part(box.view({-1}), layout));
}

CAIRN_DECL parameter_state& add_parameter_copy(model_state& state, std::string name, at::Tensor const& whole,
                                               shard_layout layout, bool replicated) {
  auto weights = take_shard(whole, layout);
  return detail::add_shard(state, std::move(name), whole, layout, replicated, std::move(weights));
}

CAIRN_DECL parameter_state& add_parameter(model_state& state, std::string name, std::vector<std::uint64_t> shape,
                                          placement const& place, at::TensorOptions options) {
  auto dtype = to_dtype(c10::typeMetaToScalarType(options.dtype())); // may throw: before the aggregate
  auto elements = static_cast<std::int64_t>(place.shard.numel());
  std::vector<at::Tensor> shards;
  for (std::size_t i = 0; i < state.shard_names.size(); ++i) shards.push_back(at::zeros({elements}, options));
  auto shard = place.shard;
  parameter_state p{{std::move(name), std::move(shape), dtype, place.replicated, std::move(shard)}, std::move(shards)};
  state.parameters.push_back(std::move(p));
  return state.parameters.back();
}

CAIRN_DECL model_state whole_state(std::vector<std::pair<std::string, at::Tensor>> const& weights,
                                   std::vector<std::string> const& optimizer_shards) {
  model_state state;
  state.shard_names.insert(state.shard_names.end(), optimizer_shards.begin(), optimizer_shards.end());
  for (auto const& [name, tensor] : weights) {
    if (!tensor.is_contiguous())
      throw checkpoint_error(checkpoint_errc::invalid_state,
                             "whole_state: '" + name +
                                 "' is not contiguous, so the state cannot view it (a save would not see training's "
                                 "updates): train a contiguous tensor (its .contiguous()) and pass that");
    add_parameter(state, name, tensor, shard_layout::whole({tensor.sizes().begin(), tensor.sizes().end()}));
  }
  return state;
}

CAIRN_DECL boost::json::value detail::hooked_metadata(model_state const& state,
                                                      boost::json::value const& user_metadata) {
  if (!state.hooks) return user_metadata;
  auto kept = state.hooks->save(state);
  boost::json::object out;
  if (auto const* given = user_metadata.if_object()) out = *given;
  else if (!user_metadata.is_null())
    throw checkpoint_error(checkpoint_errc::invalid_request,
                           "the metadata of a save of a state with hooks must be a JSON object");
  if (out.contains("optimizer_state"))
    throw checkpoint_error(checkpoint_errc::invalid_request,
                           "the save's metadata has a key 'optimizer_state', which the state's hooks (its optimizer's "
                           "step counts) write: name it otherwise");
  out["optimizer_state"] = std::move(kept);
  return out;
}

CAIRN_DECL void detail::after_load(model_state const& state, checkpoint_metadata const& loaded,
                                   bool optimizer_loaded) {
  if (!state.hooks) return;
  static boost::json::value const none;
  auto const* object = loaded.metadata.if_object();
  auto const* saved = object ? object->if_contains("optimizer_state") : nullptr;
  state.hooks->load(state, loaded, saved ? *saved : none, optimizer_loaded);
}

} // namespace cairn
