// Definitions of <cairn/checkpoint/metadata.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/config/json.hpp>
#include <cairn/config/legacy.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/error.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/error.hpp>

#include <boost/describe/class.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

namespace cairn {

CAIRN_DECL migration_chain const& checkpoint_metadata_migrations() {
  static migration_chain const chain = [] {
    migration_chain c(checkpoint_metadata_version);
    c.step("0", "1", [](boost::json::object& doc) {
      for (auto [old_key, new_key] : {std::pair{"state_shards", "shard_names"}, std::pair{"layouts", "ranks"}}) {
        if (auto it = doc.find(old_key); it != doc.end()) {
          // Taken out first: inserting the new key may rehash the object, and `it` with it.
          auto value = std::move(it->value());
          doc.erase(it);
          doc[new_key] = std::move(value);
        }
      }
      doc["version"] = "1";
    });
    c.step("1", "2", [](boost::json::object& doc) { doc["version"] = "2"; });
    c.step("2", "3", [](boost::json::object& doc) {
      doc["replica_writers"] = "rank_0";
      doc["version"] = "3";
    });
    c.step("3", "4", [](boost::json::object& doc) { doc["version"] = "4"; });
    return c;
  }();
  return chain;
}

CAIRN_DECL int detail::replica_writers::of(std::string const& name, shard_layout const& shard) const {
  auto found = sets.find(name);
  if (found == sets.end()) return -1;
  for (auto const& [held, writer] : found->second)
    if (held == shard) return writer;
  return -1;
}

namespace detail {
/// A replica set: the holders of one replicated shard of a parameter.
struct replica_set {
  std::string_view name;
  shard_layout shard;
  std::uint64_t bytes;
  std::vector<int> members; // in rank order
};

/// The writer of each of the sets `found` (`by_name`: their indices, by parameter name, each
/// name's in the order found), given what each rank writes of its own (`written`, at
/// `member(rank)`): largest first; equal sizes by name, then by first holder; each to its member
/// that has written the fewest bytes so far under the balanced rule (ties to the lowest rank), to
/// its first under rank_0.
template <class Member>
replica_writers assign_writers(std::vector<replica_set>& found,
                               std::map<std::string_view, std::vector<std::size_t>> const& by_name,
                               std::vector<std::uint64_t>& written, Member member, replica_writer_rule rule) {
  std::vector<std::size_t> order;
  for (auto const& [name, sets] : by_name) order.insert(order.end(), sets.begin(), sets.end());
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return found[a].bytes > found[b].bytes; });
  replica_writers out;
  out.every_holder = rule == replica_writer_rule::each;
  for (auto i : order) {
    auto& set = found[i];
    int chosen = set.members.front();
    if (rule != replica_writer_rule::rank_0)
      for (auto r : set.members)
        if (written[member(r)] < written[member(chosen)]) chosen = r;
    out.sets[std::string(set.name)].emplace_back(std::move(set.shard), chosen);
    written[member(chosen)] += set.bytes;
  }
  return out;
}
} // namespace detail

CAIRN_DECL detail::replica_writers detail::replica_writers_of(std::vector<rank_layout> const& ranks,
                                                              replica_writer_rule rule) {
  std::vector<replica_set> found;
  std::map<std::string_view, std::vector<std::size_t>> by_name; // into `found`
  std::vector<std::uint64_t> written(ranks.size(), 0);
  for (std::size_t r = 0; r < ranks.size(); ++r)
    for (auto const& p : ranks[r].parameters) {
      auto bytes = p.shard.numel() * io::size_of(p.dtype);
      if (!p.replicated) {
        written[r] += bytes;
        continue;
      }
      auto& sets = by_name[p.name];
      auto same = std::find_if(sets.begin(), sets.end(), [&](std::size_t i) { return found[i].shard == p.shard; });
      if (same != sets.end()) {
        found[*same].members.push_back(static_cast<int>(r));
        continue;
      }
      sets.push_back(found.size());
      found.push_back({p.name, p.shard, bytes, {static_cast<int>(r)}});
    }
  return assign_writers(
      found, by_name, written, [](int r) { return static_cast<std::size_t>(r); }, rule);
}

CAIRN_DECL detail::replica_writers detail::replica_writers_of(layout_rules const& rules, std::int64_t stage,
                                                              replica_writer_rule rule) {
  // As the enumerated form above, over the stage's holdings alone: its ranks, in rank order
  // (Megatron's: a stage's ranks are consecutive), each one's index among them its rank less
  // the first.
  auto first = rules.tensor * rules.data * stage;
  auto member = [&](int rank) { return static_cast<std::size_t>(rank - first); };
  std::vector<replica_set> found;
  std::map<std::string_view, std::vector<std::size_t>> by_name; // into `found`
  std::vector<std::uint64_t> written(static_cast<std::size_t>(rules.tensor * rules.data), 0);
  for (auto const& r : rules.parameters) {
    if (r.stage != stage) continue;
    auto size = io::size_of(r.dtype);
    std::vector<std::size_t> sets; // of this parameter, into `found`
    each_holding(rules, r, [&](int rank, placement&& place) {
      auto bytes = place.shard.numel() * size;
      if (!place.replicated) {
        written[member(rank)] += bytes;
        return;
      }
      // The sets of one parameter are few (one, or one a TP or DP coordinate): a scan finds it.
      for (auto i = sets.rbegin(); i != sets.rend(); ++i)
        if (found[*i].shard == place.shard) {
          found[*i].members.push_back(rank);
          return;
        }
      sets.push_back(found.size());
      found.push_back({r.name, std::move(place.shard), bytes, {rank}});
    });
    auto& named = by_name[r.name];
    named.insert(named.end(), sets.begin(), sets.end());
  }
  return assign_writers(found, by_name, written, member, rule);
}

CAIRN_DECL detail::saved_writers::saved_writers(checkpoint_metadata const& metadata) : metadata_(&metadata) {
  if (!metadata.rules) {
    all_ = replica_writers_of(metadata.ranks, metadata.replica_writers);
    return;
  }
  for (auto const& rule : metadata.rules->parameters) stage_of_.emplace(rule.name, rule.stage);
}

CAIRN_DECL int detail::saved_writers::of(std::string const& name, shard_layout const& shard) {
  if (!metadata_->rules) return all_.of(name, shard);
  auto stage = stage_of_.find(name);
  if (stage == stage_of_.end()) return -1;
  auto found = stages_.find(stage->second);
  if (found == stages_.end())
    found =
        stages_.emplace(stage->second, replica_writers_of(*metadata_->rules, stage->second, metadata_->replica_writers))
            .first;
  return found->second.of(name, shard);
}

CAIRN_DECL std::int64_t checkpoint_metadata::world_size() const noexcept {
  return rules ? rules->world_size() : static_cast<std::int64_t>(ranks.size());
}

CAIRN_DECL rank_layout checkpoint_metadata::layout_of(std::int64_t rank) const {
  if (rank < 0 || rank >= world_size())
    throw checkpoint_error(checkpoint_errc::invalid_state, "rank " + std::to_string(rank) + ": the save has " +
                                                               std::to_string(world_size()) + " ranks");
  return rules ? expand_rank(*rules, static_cast<int>(rank)) : ranks[static_cast<std::size_t>(rank)];
}

CAIRN_DECL std::vector<rank_layout> checkpoint_metadata::layouts() const {
  return rules ? expand_rules(*rules) : ranks;
}

CAIRN_DECL io::io_error detail::stored_metadata_error(std::string const& source, config_error const& e) {
  // The file is data, not a config the user wrote: an io_error (exit status 1 in the tool, not 2).
  std::string text;
  for (auto const& d : e.errors()) {
    auto one = d.to_string();
    if (one.starts_with(source + ": ")) one.erase(0, source.size() + 2);
    text += (text.empty() ? "" : "; ") + one;
  }
  return io::io_error(source, io_errc::malformed, text);
}

CAIRN_DECL checkpoint_metadata read_checkpoint_metadata(std::filesystem::path const& file) {
  boost::json::value document;
  try {
    document = cairn::detail::read_json(file, max_json_file_size);
  } catch (config_error const& e) {
    throw detail::stored_metadata_error(file.string(), e);
  }
  // The ranks whose files are there: what layout rules may claim without further ado.
  std::int64_t rank_files = 0;
  std::vector<io::listed_entry> listed;
  try {
    auto dir = io::open_location(file.parent_path().string());
    listed = dir.backend->list(dir.key);
  } catch (io::io_error const& e) {
    // A store that does not answer is an error, as everywhere; a directory that cannot be
    // listed counts no rank file: rules naming ranks are then checked against their files.
    if (e.kind() == io_errc::storage) throw;
  }
  for (auto const& entry : listed) {
    auto const& name = entry.name;
    if (!name.starts_with("rank_") || !name.ends_with(".safetensors")) continue;
    auto digits = std::string_view(name).substr(5, name.size() - 5 - 12);
    std::int64_t rank = 0;
    auto [end_of, problem] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
    if (problem == std::errc() && end_of == digits.data() + digits.size() && !digits.empty() && rank < (1 << 20))
      rank_files = std::max(rank_files, rank + 1);
  }
  try {
    return detail::parse_metadata_document(std::move(document), file.string(), rank_files);
  } catch (config_error const& e) {
    throw detail::stored_metadata_error(file.string(), e);
  }
}

CAIRN_DECL checkpoint_metadata parse_checkpoint_metadata(boost::json::value document, std::string const& source) {
  try {
    return detail::parse_metadata_document(std::move(document), source);
  } catch (config_error const& e) {
    throw detail::stored_metadata_error(source, e);
  }
}

CAIRN_DECL checkpoint_metadata detail::parse_metadata_document(boost::json::value document, std::string const& source,
                                                               std::optional<std::int64_t> rank_files) {
  if (!document.is_object()) throw config_error({{source, "checkpoint metadata must be a JSON object"}});
  auto& object = document.get_object();
  auto const* version = object.if_contains("version");
  if (!version || !version->is_string())
    throw config_error({{source, "checkpoint metadata has no version; is this a cairn checkpoint?"}});
  // Every save of version 2 on records its identity; only migrated ones may lack it.
  if (version->get_string() == "2" || version->get_string() == "3" ||
      version->get_string() == checkpoint_metadata_version) {
    auto const* id = object.if_contains("save_id");
    if (!id || !id->is_string() || id->get_string().empty())
      throw config_error(
          {{source + ": save_id", "missing from metadata of version " + std::string(checkpoint_metadata_version) +
                                      ", which every save of it records: the metadata was altered"}});
  }
  auto const* rules = object.if_contains("rules");
  auto before_rules = {"0", "1", "2", "3"};
  if (rules && !rules->is_null() &&
      std::find(before_rules.begin(), before_rules.end(), version->get_string()) != before_rules.end())
    throw config_error(std::vector<diagnostic>{
        {source + ": rules", "in metadata of version " + std::string(version->get_string()) +
                                 "; rules stand for the ranks' layouts from version 4 on: the metadata was altered"}});
  checkpoint_metadata_migrations().migrate(object, std::string(version->get_string()), source);
  try {
    auto out = parse<checkpoint_metadata>(document);
    out.iteration = detail::stored_iteration(out.metadata);
    if (out.rules) {
      if (!out.ranks.empty())
        throw config_error(
            std::vector<diagnostic>{{"rules", "stands for 'ranks', which the metadata lists too: one or the other"}});
      auto const& r = *out.rules;
      auto sized = [](std::int64_t n) { return n >= 1 && n <= (std::int64_t{1} << 20); };
      if (rank_files && sized(r.tensor) && sized(r.pipeline) && sized(r.data) &&
          r.tensor * r.pipeline * r.data > *rank_files) {
        // About what the layouts would take expanded (as expand_rules counts it), in floating
        // point: no count can overflow.
        double bytes = 0;
        for (auto const& rule : r.parameters)
          bytes += double(r.tensor) * double(r.data) * double(160 + rule.name.size() + 24 * rule.shape.size());
        if (bytes > double(unbacked_rule_bytes))
          throw config_error(std::vector<diagnostic>{
              {"rules", "a grid of " + std::to_string(r.tensor * r.pipeline * r.data) +
                            " ranks, but the directory holds the files of " + std::to_string(*rank_files) +
                            " (rank_0.safetensors up to rank_" + std::to_string(*rank_files - 1) +
                            "): layouts of about " + std::to_string(static_cast<std::uint64_t>(bytes) >> 20) +
                            " MiB for ranks without files are refused before they are expanded"}});
      }
      try {
        check_rules(*out.rules);
      } catch (error const& e) {
        throw config_error(std::vector<diagnostic>{{"rules", e.what()}});
      }
    }
    if (out.format == checkpoint_format::distributed && out.world_size() == 0)
      throw config_error(std::vector<diagnostic>{
          {"ranks", "a distributed checkpoint's metadata lists no rank's layout (neither 'ranks' nor 'rules')"}});
    return out;
  } catch (config_error const& e) {
    std::vector<diagnostic> errors;
    for (auto const& d : e.errors()) errors.push_back({source + ": " + d.path, d.message});
    throw config_error(std::move(errors));
  }
}

} // namespace cairn

namespace cairn::detail {

CAIRN_DECL void make_finite(boost::json::value& v, std::string const& path) {
  if (v.is_double() && !std::isfinite(v.get_double())) {
    auto x = v.get_double();
    v = std::isnan(x) ? "NaN" : x > 0 ? "Infinity" : "-Infinity";
    emit(severity::warning, {path, "is " + std::string(v.get_string()) + ": stored as that string"});
  } else if (v.is_object()) {
    for (auto& [key, item] : v.get_object())
      make_finite(item, path.empty() ? std::string(key) : path + "." + std::string(key));
  } else if (v.is_array()) {
    std::size_t i = 0;
    for (auto& item : v.get_array()) make_finite(item, path + "[" + std::to_string(i++) + "]");
  }
}

} // namespace cairn::detail

namespace cairn {

CAIRN_DECL std::optional<std::int64_t> detail::stored_iteration(boost::json::value const& metadata) {
  auto const* stored = metadata.is_object() ? metadata.get_object().if_contains("iteration") : nullptr;
  if (stored && stored->is_int64()) return stored->get_int64();
  return std::nullopt;
}

CAIRN_DECL boost::json::value detail::with_iteration(boost::json::value const& metadata, std::int64_t iteration) {
  boost::json::object out;
  if (metadata.is_object())
    out = metadata.get_object();
  else if (!metadata.is_null())
    out["user"] = metadata;
  out["iteration"] = iteration;
  boost::json::value stored = std::move(out);
  detail::make_finite(stored, "metadata");
  return stored;
}

} // namespace cairn
