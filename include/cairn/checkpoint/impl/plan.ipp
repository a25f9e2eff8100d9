// Definitions of <cairn/checkpoint/plan.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/detail/save_files.hpp>
#include <cairn/checkpoint/plan.hpp>
#include <cairn/io/dtype.hpp>

#include <boost/describe/enum_to_string.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace cairn {

CAIRN_DECL std::uint64_t write_item::stored_bytes() const noexcept {
  std::uint64_t n = io::size_of(stored);
  for (auto d : shape) n *= d;
  return n;
}

CAIRN_DECL std::vector<std::uint64_t> save_plan::bytes_per_rank(int world_size) const {
  std::vector<std::uint64_t> out(static_cast<std::size_t>(std::max(world_size, 1)), 0);
  auto parameters = detail::parameters_of(ranks);
  for (auto const& f : files) {
    if (f.writer < 0 || f.writer >= static_cast<int>(out.size())) continue;
    for (auto const& item : f.items) {
      auto found = parameters.find(item.parameter);
      auto runs = item.source == write_source::co_written && found != parameters.end()
                      ? detail::part_runs(ranks, found->second)
                      : std::nullopt;
      if (!runs) {
        out[static_cast<std::size_t>(f.writer)] += item.stored_bytes();
        continue;
      }
      for (std::size_t r = 0; r < runs->size() && r < out.size(); ++r)
        out[r] += ((*runs)[r].end - (*runs)[r].begin) * io::size_of(item.stored);
    }
  }
  for (auto const& c : closing) out[0] += c.text.size();
  return out;
}

CAIRN_DECL std::size_t save_plan::rounds() const noexcept {
  std::size_t n = 0;
  for (auto const& f : files) n = std::max(n, f.items.size());
  return n;
}

CAIRN_DECL boost::json::value describe(save_plan const& plan) {
  boost::json::array files;
  for (auto const& f : plan.files) {
    boost::json::array items;
    for (auto const& item : f.items) {
      boost::json::array shape;
      for (auto d : item.shape) shape.emplace_back(d);
      boost::json::object entry{{"tensor", item.tensor},
                                {"dtype", io::name(item.stored)},
                                {"shape", std::move(shape)},
                                {"source", boost::describe::enum_to_string(item.source, "?")}};
      if (item.source == write_source::converted) {
        entry["rule"] = item.rule;
        entry["output"] = item.output;
      } else {
        entry["parameter"] = item.parameter;
        entry["shard"] = item.shard;
      }
      items.emplace_back(std::move(entry));
    }
    files.emplace_back(boost::json::object{{"name", f.name}, {"writer", f.writer}, {"tensors", std::move(items)}});
  }
  boost::json::array closing;
  for (auto const& c : plan.closing) closing.emplace_back(c.name);
  return boost::json::object{{"format", boost::describe::enum_to_string(plan.format, "?")},
                             {"files", std::move(files)},
                             {"closing", std::move(closing)}};
}

} // namespace cairn
