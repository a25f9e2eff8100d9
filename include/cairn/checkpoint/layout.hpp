#pragma once

// What a trainer holds of each parameter, and which elements two holdings share. No libtorch:
// the arithmetic is on element indices, so tools can reason about any checkpoint's layout.

#include <cairn/config/check.hpp>
#include <cairn/config/field.hpp>
#include <cairn/config/validation.hpp>
#include <cairn/config/value.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/error.hpp>
#include <cairn/io/dtype.hpp>

#include <boost/describe/class.hpp>
#include <boost/describe/enum.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cairn {

/// In JSON a dtype is its safetensors name ("F32", "BF16", …).
template <> struct value_traits<io::dtype> {
  static constexpr bool textual = true;
  static void read(boost::json::value const& j, io::dtype& v, read_context& ctx) {
    auto parsed = j.is_string() ? io::parse_dtype(std::string_view(j.get_string())) : std::nullopt;
    if (parsed)
      v = *parsed;
    else
      ctx.error("expected a dtype such as \"F32\" or \"BF16\", got " + detail::describe_json(j));
  }
  static boost::json::value write(io::dtype v) { return boost::json::string(io::name(v)); }
  static std::string type_name() { return "dtype"; }
  static void schema(boost::json::object& s) {
    s["type"] = "string";
    boost::json::array names;
    for (auto t : io::all_dtypes) names.emplace_back(io::name(t));
    s["enum"] = std::move(names);
  }
};

/// A contiguous range [begin, end) of a box's elements in row-major order.
struct flat_range {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  friend bool operator==(flat_range const&, flat_range const&) = default;
};
BOOST_DESCRIBE_STRUCT(flat_range, (), (begin, end))

/// The part of a parameter one rank holds: a box of the global tensor (an offset and a length
/// per dimension), and optionally only a flat range of the box's elements, as in ZeRO/FSDP
/// flat sharding. The rank's buffer holds exactly these elements, densely, in order.
struct shard_layout {
  std::vector<std::uint64_t> offsets;
  std::vector<std::uint64_t> lengths;
  std::optional<flat_range> flat;

  /// Elements of the box.
  [[nodiscard]] CAIRN_DECL std::uint64_t box_numel() const noexcept;
  /// Elements this rank holds.
  [[nodiscard]] std::uint64_t numel() const noexcept { return flat ? flat->end - flat->begin : box_numel(); }

  /// The whole of a tensor of `shape`.
  static shard_layout whole(std::vector<std::uint64_t> const& shape) {
    return {std::vector<std::uint64_t>(shape.size(), 0), shape, std::nullopt};
  }

  /// Why this is not a valid shard of a tensor of `shape`, or nothing.
  [[nodiscard]] CAIRN_DECL std::optional<std::string> problem(std::vector<std::uint64_t> const& shape) const;
  friend bool operator==(shard_layout const&, shard_layout const&) = default;
};
BOOST_DESCRIBE_STRUCT(shard_layout, (), (offsets, lengths, flat))

/// One parameter as one rank holds it.
struct parameter_layout {
  std::string name;
  std::vector<std::uint64_t> shape; ///< the global shape
  io::dtype dtype = io::dtype::F32;
  /// Other ranks may hold this same shard with the same values (data parallelism; a tensor-
  /// parallel shard over its data-parallel group): the replicated holdings of one shard are a
  /// replica set, written once, by one member.
  bool replicated = false;
  shard_layout shard;
  friend bool operator==(parameter_layout const&, parameter_layout const&) = default;
};
BOOST_DESCRIBE_STRUCT(parameter_layout, (), (name, shape, dtype, replicated, shard))

/// Everything one rank holds.
struct rank_layout {
  std::vector<parameter_layout> parameters;

  [[nodiscard]] CAIRN_DECL parameter_layout const* find(std::string_view name) const noexcept;
  friend bool operator==(rank_layout const&, rank_layout const&) = default;
};
BOOST_DESCRIBE_STRUCT(rank_layout, (), (parameters))

/// A run of elements shared by two shards: `length` elements at `source` in the first shard's
/// buffer and at `target` in the second's.
struct copy_run {
  std::uint64_t source = 0;
  std::uint64_t target = 0;
  std::uint64_t length = 0;
  friend bool operator==(copy_run const&, copy_run const&) = default;
};

/// The elements two shards of a tensor of `shape` share, as runs over their buffers, in order;
/// adjacent runs are merged. Copying every run moves exactly the overlap, once.
CAIRN_DECL std::vector<copy_run> overlap(std::vector<std::uint64_t> const& shape, shard_layout const& source,
                                         shard_layout const& target);

/// How many elements two valid shards of a tensor of `shape` share. Exact, and cheap where the
/// layouts are the usual ones (boxes, or flat ranges of one box); other mixes are counted row by
/// row, up to 2^24 rows, past which they are taken as disjoint (the element count still catches a
/// doubled element, unless a gap elsewhere hides it).
CAIRN_DECL std::uint64_t overlap_count(std::vector<std::uint64_t> const& shape, shard_layout const& a,
                                       shard_layout const& b);

/// The elements [first, last) of a tensor of `shape`, in row-major order, that a valid shard
/// lies within: two shards whose spans do not meet share nothing. Empty for an empty shard.
CAIRN_DECL flat_range span_of(std::vector<std::uint64_t> const& shape, shard_layout const& shard);

/// Why the ranks' layouts of a save do not describe every parameter exactly, or nothing when
/// they do: each rank lists a parameter at most once, every rank agrees on its shape and type,
/// each shard is valid, and the shards of the ranks that write it (each replica set counted
/// once) tile it with no overlap and no gap. Each problem names the parameter.
CAIRN_DECL std::vector<std::string> tiling_problems(std::vector<rank_layout> const& ranks);

// --- the usual shardings, for a rank of a group of ranks ---------------------------------------

/// The block of dimension `dim` of a tensor of `shape` that `rank` of `size` holds, when the
/// dimension is split in contiguous blocks as even as can be (the first `shape[dim] % size`
/// ranks hold one more): tensor parallelism by rows (`dim` 0) or columns (`dim` 1).
CAIRN_DECL shard_layout split_dimension(std::vector<std::uint64_t> const& shape, std::size_t dim, int rank, int size);
inline shard_layout split_rows(std::vector<std::uint64_t> const& shape, int rank, int size) {
  return split_dimension(shape, 0, rank, size);
}
inline shard_layout split_columns(std::vector<std::uint64_t> const& shape, int rank, int size) {
  return split_dimension(shape, 1, rank, size);
}

/// A flat slice of the whole tensor in row-major order, as ZeRO and FSDP shard it: elements
/// [numel * rank / size, numel * (rank + 1) / size).
CAIRN_DECL shard_layout flat_slice(std::vector<std::uint64_t> const& shape, int rank, int size);

/// A flat slice of the elements of `box` (a shard without a flat range), in the box's row-major
/// order: ZeRO over a data-parallel group of a tensor-parallel block. Elements
/// [n * rank / size, n * (rank + 1) / size) of the box's n.
CAIRN_DECL shard_layout flat_slice(shard_layout box, int rank, int size);

/// How a parameter is split over its tensor-parallel group: not at all (every rank of the group
/// holds it all), by rows (a column-parallel linear's weight [out, in] and bias, a
/// vocab-parallel embedding [vocab, hidden]) or by columns (a row-parallel linear's weight).
enum class tensor_split { none, rows, columns };
BOOST_DESCRIBE_ENUM(tensor_split, none, rows, columns)

/// Where a rank holds a parameter, and whether other ranks hold the same shard with the same
/// values: the arguments of `add_parameter`.
struct placement {
  shard_layout shard;
  bool replicated = false;
};

/// Where the rank at `tensor_rank` of its tensor-parallel group of `tensor_size` and
/// `data_rank` of its data-parallel group of `data_size` holds a parameter of `shape` split
/// `split`, at ZeRO stage `zero_stage` (0 to 3): at stage 0 its tensor-parallel block, replicated
/// over the data-parallel group; at stages 1 to 3 a flat slice of that block per data-parallel
/// rank, the slice whose optimizer state it keeps (the stages differ in what a rank keeps in
/// memory besides, not in what a checkpoint holds). A parameter not split is replicated over
/// the tensor-parallel group too. A checkpoint_error when a position is outside its group or
/// the stage is not 0 to 3.
CAIRN_DECL placement place_on_grid(std::vector<std::uint64_t> const& shape, tensor_split split, int tensor_rank,
                                   int tensor_size, int data_rank, int data_size, int zero_stage);

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/layout.ipp>
#endif
