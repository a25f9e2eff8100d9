// Definitions of <cairn/checkpoint/layout.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/layout.hpp>
#include <cairn/config/check.hpp>
#include <cairn/config/field.hpp>
#include <cairn/config/validation.hpp>
#include <cairn/config/value.hpp>
#include <cairn/error.hpp>
#include <cairn/io/dtype.hpp>

#include <boost/describe/class.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cairn {

CAIRN_DECL std::uint64_t shard_layout::box_numel() const noexcept {
  std::uint64_t n = 1;
  for (auto l : lengths) n *= l;
  return n;
}

CAIRN_DECL std::optional<std::string> shard_layout::problem(std::vector<std::uint64_t> const& shape) const {
  if (offsets.size() != lengths.size())
    return "a shard of " + std::to_string(offsets.size()) + (offsets.size() == 1 ? " offset and " : " offsets and ") +
           std::to_string(lengths.size()) + (lengths.size() == 1 ? " length" : " lengths") +
           ": one of each per dimension";
  if (lengths.size() != shape.size())
    return "a shard of rank " + std::to_string(lengths.size()) + " for a tensor of rank " +
           std::to_string(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (offsets[d] > shape[d] || lengths[d] > shape[d] - offsets[d])
      return "the shard exceeds the tensor in dimension " + std::to_string(d);
  if (flat && (flat->begin > flat->end || flat->end > box_numel()))
    return "the flat range [" + std::to_string(flat->begin) + ", " + std::to_string(flat->end) +
           ") exceeds the box of " + std::to_string(box_numel()) + " elements";
  return std::nullopt;
}

CAIRN_DECL parameter_layout const* rank_layout::find(std::string_view name) const noexcept {
  for (auto const& p : parameters)
    if (p.name == name) return &p;
  return nullptr;
}

CAIRN_DECL std::vector<copy_run> overlap(std::vector<std::uint64_t> const& shape, shard_layout const& source,
                                         shard_layout const& target) {
  auto rank = shape.size();
  std::vector<std::uint64_t> low(rank), length(rank);
  for (std::size_t d = 0; d < rank; ++d) {
    low[d] = std::max(source.offsets[d], target.offsets[d]);
    auto high = std::min(source.offsets[d] + source.lengths[d], target.offsets[d] + target.lengths[d]);
    if (high <= low[d]) return {};
    length[d] = high - low[d];
  }
  auto local = [&](shard_layout const& s, std::vector<std::uint64_t> const& index) {
    std::uint64_t linear = 0;
    for (std::size_t d = 0; d < rank; ++d) linear = linear * s.lengths[d] + (index[d] - s.offsets[d]);
    return linear;
  };
  auto range = [](shard_layout const& s) { return s.flat.value_or(flat_range{0, s.box_numel()}); };
  auto source_range = range(source), target_range = range(target);

  // A row is the last dimension, and with it every dimension both boxes and the overlap cover
  // whole: its elements follow one another in both, so it is one run (a same-layout shard is
  // one run, not one per row).
  std::size_t inner = rank > 0 ? rank - 1 : 0;
  while (inner > 0 && length[inner] == source.lengths[inner] && length[inner] == target.lengths[inner]) --inner;
  std::uint64_t run_length = 1;
  for (auto d = inner; d < rank; ++d) run_length *= length[d];
  std::vector<copy_run> runs;
  std::vector<std::uint64_t> index(low);
  for (;;) {
    auto s = local(source, index), t = local(target, index);
    // Elements k of this row lie in both flat ranges when s + k and t + k do.
    std::uint64_t first = 0, last = run_length;
    auto clip = [&](std::uint64_t at, flat_range r) {
      first = std::max(first, r.begin > at ? r.begin - at : 0);
      last = std::min(last, r.end > at ? r.end - at : 0);
    };
    clip(s, source_range);
    clip(t, target_range);
    if (first < last) {
      copy_run run{s + first - source_range.begin, t + first - target_range.begin, last - first};
      if (!runs.empty() && runs.back().source + runs.back().length == run.source &&
          runs.back().target + runs.back().length == run.target)
        runs.back().length += run.length;
      else
        runs.push_back(run);
    }
    // Next row: the dimensions outside it.
    std::size_t d = inner;
    while (d-- > 0) {
      if (++index[d] < low[d] + length[d]) break;
      index[d] = low[d];
    }
    if (d == static_cast<std::size_t>(-1)) break;
  }
  return runs;
}

namespace detail {
/// overlap_count of two shards of a matrix, at least one a flat slice of its box, in O(1): a
/// flat slice covers whole rows of its box but for its first and last, so that the rows of the
/// two boxes' intersection are those both cover whole (each the intersection's width), a few
/// edge rows counted one by one, and rows neither covers.
inline std::uint64_t matrix_overlap_count(shard_layout const& a, shard_layout const& b) {
  auto r0 = std::max(a.offsets[0], b.offsets[0]),
       r1 = std::min(a.offsets[0] + a.lengths[0], b.offsets[0] + b.lengths[0]);
  auto c0 = std::max(a.offsets[1], b.offsets[1]),
       c1 = std::min(a.offsets[1] + a.lengths[1], b.offsets[1] + b.lengths[1]);
  if (r1 <= r0 || c1 <= c0) return 0;
  struct rows_of {
    std::uint64_t touched_begin, touched_end; // the rows (of the matrix) the slice has elements in
    std::uint64_t whole_begin, whole_end;     // the rows it holds whole
  };
  auto covered = [](shard_layout const& s) -> rows_of {
    auto width = s.lengths[1];
    auto range = s.flat.value_or(flat_range{0, s.box_numel()});
    if (width == 0 || range.end <= range.begin) return {0, 0, 0, 0};
    auto first = range.begin / width, last = (range.end - 1) / width; // rows of the box
    auto whole_first = range.begin % width == 0 ? first : first + 1;
    auto whole_end = range.end % width == 0 ? last + 1 : last;
    return {s.offsets[0] + first, s.offsets[0] + last + 1, s.offsets[0] + whole_first,
            s.offsets[0] + std::max(whole_end, whole_first)};
  };
  // The columns of row `row` of the intersection that `s` holds: [low, high).
  auto in_row = [&](shard_layout const& s, std::uint64_t row, std::uint64_t& low, std::uint64_t& high) {
    auto width = s.lengths[1];
    auto range = s.flat.value_or(flat_range{0, s.box_numel()});
    auto start = (row - s.offsets[0]) * width; // the row's first element, in the box's order
    auto from = range.begin > start ? range.begin - start : 0, to = range.end > start ? range.end - start : 0;
    low = std::max(low, s.offsets[1] + std::min(from, width));
    high = std::min(high, s.offsets[1] + std::min(to, width));
  };
  auto ra = covered(a), rb = covered(b);
  auto lo = std::max({r0, ra.touched_begin, rb.touched_begin});
  auto hi = std::min({r1, ra.touched_end, rb.touched_end});
  if (hi <= lo) return 0;
  auto whole_lo = std::max({lo, ra.whole_begin, rb.whole_begin});
  auto whole_hi = std::min({hi, ra.whole_end, rb.whole_end});
  std::uint64_t count = whole_hi > whole_lo ? (whole_hi - whole_lo) * (c1 - c0) : 0;
  auto partly = [&](std::uint64_t row) {
    std::uint64_t low = c0, high = c1;
    in_row(a, row, low, high);
    in_row(b, row, low, high);
    return high > low ? high - low : 0;
  };
  // The rows in [lo, hi) outside [whole_lo, whole_hi): the first and last rows of either slice,
  // at most four, or every row when no row is whole in both.
  if (whole_hi <= whole_lo) {
    whole_lo = whole_hi = lo;
  }
  std::uint64_t edges[] = {ra.touched_begin, ra.touched_end - 1, rb.touched_begin, rb.touched_end - 1};
  std::sort(std::begin(edges), std::end(edges));
  auto* end = std::unique(std::begin(edges), std::end(edges));
  for (auto* row = std::begin(edges); row != end; ++row)
    if (*row >= lo && *row < hi && (*row < whole_lo || *row >= whole_hi)) count += partly(*row);
  return count;
}
} // namespace detail

CAIRN_DECL std::uint64_t overlap_count(std::vector<std::uint64_t> const& shape, shard_layout const& a,
                                       shard_layout const& b) {
  std::uint64_t box = 1, rows = 1;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    auto low = std::max(a.offsets[d], b.offsets[d]);
    auto high = std::min(a.offsets[d] + a.lengths[d], b.offsets[d] + b.lengths[d]);
    if (high <= low) return 0;
    box *= high - low;
    if (d + 1 < shape.size()) rows *= high - low;
  }
  if (!a.flat && !b.flat) return box;
  if (a.offsets == b.offsets && a.lengths == b.lengths) {
    auto range = [](shard_layout const& s) { return s.flat.value_or(flat_range{0, s.box_numel()}); };
    auto ra = range(a), rb = range(b);
    auto low = std::max(ra.begin, rb.begin), high = std::min(ra.end, rb.end);
    return high > low ? high - low : 0;
  }
  if (shape.size() == 2) return detail::matrix_overlap_count(a, b);
  if (rows > (std::uint64_t{1} << 24)) return 0;
  std::uint64_t shared = 0;
  for (auto const& run : overlap(shape, a, b)) shared += run.length;
  return shared;
}

CAIRN_DECL flat_range span_of(std::vector<std::uint64_t> const& shape, shard_layout const& shard) {
  auto count = shard.numel();
  if (count == 0) return {};
  auto first = shard.flat ? shard.flat->begin : 0;
  // Box element k, in the whole tensor's row-major order: the box's order is the tensor's.
  // Digit by digit from the last dimension, each weighted by the tensor's stride there.
  auto index = [&](std::uint64_t k) {
    std::uint64_t at = 0, stride = 1;
    for (std::size_t d = shape.size(); d-- > 0;) {
      auto digit = shard.lengths[d] == 0 ? 0 : k % shard.lengths[d];
      k = shard.lengths[d] == 0 ? 0 : k / shard.lengths[d];
      at += (shard.offsets[d] + digit) * stride;
      stride *= shape[d];
    }
    return at;
  };
  return {index(first), index(first + count - 1) + 1};
}

namespace detail {
/// Elements shared by any two of `parts`, each pair compared only where their spans meet: linear
/// for flat (ZeRO) or row shards, whatever the number of ranks.
inline std::uint64_t shared_elements(std::vector<std::uint64_t> const& shape,
                                     std::vector<shard_layout const*> const& parts) {
  std::vector<std::pair<flat_range, shard_layout const*>> spans;
  for (auto const* p : parts)
    if (p->numel() > 0) spans.emplace_back(span_of(shape, *p), p);
  std::sort(spans.begin(), spans.end(), [](auto const& a, auto const& b) { return a.first.begin < b.first.begin; });
  std::uint64_t shared = 0;
  for (std::size_t a = 0; a < spans.size(); ++a)
    for (std::size_t b = a + 1; b < spans.size() && spans[b].first.begin < spans[a].first.end; ++b)
      shared += overlap_count(shape, *spans[a].second, *spans[b].second);
  return shared;
}
} // namespace detail

CAIRN_DECL std::vector<std::string> tiling_problems(std::vector<rank_layout> const& ranks) {
  std::vector<std::string> problems;
  struct holder {
    std::size_t rank;
    parameter_layout const* layout;
  };
  std::vector<std::pair<std::string, std::vector<holder>>> parameters; // in first-seen order
  std::unordered_map<std::string_view, std::size_t> index;             // into `parameters`
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    for (auto const& p : ranks[r].parameters) {
      auto [at, added] = index.try_emplace(p.name, parameters.size());
      if (added) parameters.push_back({p.name, {}});
      auto& holders = parameters[at->second].second;
      if (!holders.empty() && holders.back().rank == r) {
        problems.push_back("'" + p.name + "' is listed twice by rank " + std::to_string(r));
        continue;
      }
      holders.push_back({r, &p});
    }
  }
  for (auto const& [name, holders] : parameters) {
    auto const& first = *holders.front().layout;
    std::uint64_t whole = 1;
    bool sound = true;
    for (auto d : first.shape)
      if (__builtin_mul_overflow(whole, d, &whole)) {
        problems.push_back("'" + name + "': its shape has more than 2^64 elements");
        sound = false;
        break;
      }
    for (auto const& h : holders) {
      auto const& p = *h.layout;
      if (p.shape != first.shape || p.dtype != first.dtype || p.replicated != first.replicated) {
        problems.push_back("'" + name + "': rank " + std::to_string(h.rank) + " disagrees with rank " +
                           std::to_string(holders.front().rank) + " on its shape, type or replication");
        sound = false;
      } else if (auto problem = p.shard.problem(p.shape)) {
        problems.push_back("'" + name + "' on rank " + std::to_string(h.rank) + ": " + *problem);
        sound = false;
      }
    }
    if (!sound) continue;
    // Each part counted once: a replica set (ranks holding one shard replicated) as one holder.
    std::vector<shard_layout const*> parts;
    for (auto const& h : holders)
      if (!first.replicated ||
          std::none_of(parts.begin(), parts.end(), [&](shard_layout const* s) { return *s == h.layout->shard; }))
        parts.push_back(&h.layout->shard);
    std::uint64_t covered = 0;
    for (auto const* p : parts) covered += p->numel();
    auto shared = detail::shared_elements(first.shape, parts);
    if (shared > 0) {
      std::string text = "'" + name + "': the ranks' shards overlap in " + std::to_string(shared) + " elements";
      // Two ranks holding one same part, not replicated: data parallelism without saying so.
      for (std::size_t a = 0; a < holders.size() && !first.replicated; ++a) {
        auto const& part = holders[a].layout->shard; // a structured binding is not captured (clang)
        auto same = std::find_if(holders.begin() + static_cast<std::ptrdiff_t>(a) + 1, holders.end(),
                                 [&part](auto const& b) { return b.layout->shard == part; });
        if (same == holders.end()) continue;
        text += " (ranks " + std::to_string(holders[a].rank) + " and " + std::to_string(same->rank) +
                " hold the same part of it: where ranks hold the same values of a parameter, as in data "
                "parallelism, mark it replicated: the `replicated` argument of add_parameter, optimizer_state or "
                "place_on_grid, or `replicated = true` in its layout)";
        break;
      }
      problems.push_back(std::move(text));
    } else if (covered != whole)
      problems.push_back("'" + name + "': the ranks' shards hold " + std::to_string(covered) + " of its " +
                         std::to_string(whole) + " elements");
  }
  return problems;
}

CAIRN_DECL shard_layout split_dimension(std::vector<std::uint64_t> const& shape, std::size_t dim, int rank, int size) {
  auto whole = shard_layout::whole(shape);
  if (dim >= shape.size() || rank < 0 || size <= 0 || rank >= size)
    throw checkpoint_error(checkpoint_errc::invalid_state, "split_dimension: dimension " + std::to_string(dim) +
                                                               " of a tensor of rank " + std::to_string(shape.size()) +
                                                               ", rank " + std::to_string(rank) + " of " +
                                                               std::to_string(size));
  auto n = shape[dim], r = static_cast<std::uint64_t>(rank), s = static_cast<std::uint64_t>(size);
  auto base = n / s, extra = n % s;
  whole.offsets[dim] = r * base + std::min(r, extra);
  whole.lengths[dim] = base + (r < extra ? 1 : 0);
  return whole;
}

CAIRN_DECL shard_layout flat_slice(std::vector<std::uint64_t> const& shape, int rank, int size) {
  if (rank < 0 || size <= 0 || rank >= size)
    throw checkpoint_error(checkpoint_errc::invalid_state,
                           "flat_slice: rank " + std::to_string(rank) + " of " + std::to_string(size));
  auto whole = shard_layout::whole(shape);
  auto n = whole.box_numel(), r = static_cast<std::uint64_t>(rank), s = static_cast<std::uint64_t>(size);
  whole.flat = flat_range{n * r / s, n * (r + 1) / s};
  return whole;
}

CAIRN_DECL shard_layout flat_slice(shard_layout box, int rank, int size) {
  if (rank < 0 || size <= 0 || rank >= size || box.flat)
    throw checkpoint_error(checkpoint_errc::invalid_state, "flat_slice: rank " + std::to_string(rank) + " of " +
                                                               std::to_string(size) +
                                                               (box.flat ? " of a shard that is already flat" : ""));
  auto n = box.box_numel(), r = static_cast<std::uint64_t>(rank), s = static_cast<std::uint64_t>(size);
  box.flat = flat_range{n * r / s, n * (r + 1) / s};
  return box;
}

CAIRN_DECL placement place_on_grid(std::vector<std::uint64_t> const& shape, tensor_split split, int tensor_rank,
                                   int tensor_size, int data_rank, int data_size, int zero_stage) {
  auto outside = [](int rank, int size) { return size < 1 || rank < 0 || rank >= size; };
  if (outside(tensor_rank, tensor_size) || outside(data_rank, data_size) || zero_stage < 0 || zero_stage > 3)
    throw checkpoint_error(checkpoint_errc::invalid_state,
                           "place_on_grid: tensor rank " + std::to_string(tensor_rank) + " of " +
                               std::to_string(tensor_size) + ", data rank " + std::to_string(data_rank) + " of " +
                               std::to_string(data_size) + ", ZeRO stage " + std::to_string(zero_stage));
  auto box = split == tensor_split::none
                 ? shard_layout::whole(shape)
                 : split_dimension(shape, split == tensor_split::rows ? 0 : 1, tensor_rank, tensor_size);
  bool over_tensor = split == tensor_split::none && tensor_size > 1;
  if (zero_stage == 0) return {std::move(box), over_tensor || data_size > 1};
  return {flat_slice(std::move(box), data_rank, data_size), over_tensor};
}

} // namespace cairn
