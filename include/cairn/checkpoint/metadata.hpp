#pragma once

// The self-describing part of a checkpoint: format, version, the layout of what was saved, the
// saving program's config and the caller's metadata. No libtorch: tools read it without the
// model's code.

#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/layout_rules.hpp>
#include <cairn/config/json.hpp>
#include <cairn/config/legacy.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/io/error.hpp>

#include <boost/describe/class.hpp>
#include <boost/describe/enum.hpp>
#include <boost/json/value.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cairn {

/// Free-form JSON inside a config: taken and written as it is.
template <> struct value_traits<boost::json::value> {
  static void read(boost::json::value const& j, boost::json::value& v, read_context&) { v = j; }
  static boost::json::value write(boost::json::value const& v) { return v; }
  static std::string type_name() { return "json"; }
  static void schema(boost::json::object&) {}
};

/// The current version of checkpoint metadata.
inline constexpr char const* checkpoint_metadata_version = "4";

/// Which rank's file holds a parameter every rank holds (`replicated`) in a distributed save.
BOOST_DEFINE_ENUM_CLASS(replica_writer_rule,
                        rank_0,   ///< rank 0's, every one (saves of metadata version 2 and before)
                        balanced, ///< spread over the ranks by bytes (`detail::replica_writers_of`)
                        each      ///< every holder's: each rank's file holds its whole state (a local save)
)

struct checkpoint_metadata {
  checkpoint_format format = checkpoint_format::distributed;
  std::string version = checkpoint_metadata_version;
  std::string save_id;                  ///< unique to the save; every file of it records it
  std::vector<std::string> shard_names; ///< the state shards saved, weights first
  /// Distributed: what each rank saved, where no `rules` stand for it (empty where they do:
  /// `world_size()`, `layout_of(rank)` and `layouts()` read either).
  std::vector<rank_layout> ranks;
  std::vector<parameter_layout> parameters; ///< state_dict: every parameter, whole
  boost::json::value config;                ///< the saving program's config
  boost::json::value metadata;              ///< the caller's: optimizer step, loss, …
  /// The training iteration of a save the checkpoint manager made (any version of cairn), read
  /// from where it is stored: `"iteration"` in `metadata`, so that earlier readers find it too.
  /// Not a described field: the stored form is unchanged.
  std::optional<std::int64_t> iteration;
  /// Which rank writes each replicated parameter (a distributed save).
  replica_writer_rule replica_writers = replica_writer_rule::balanced;
  /// A distributed save's layouts as the rules of its grid, where they are a grid's: what
  /// metadata.json stores instead of `ranks` (version 4 on). Read, they are kept as they are
  /// (checked, not expanded): a load plans from them, each rank computing what it reads.
  std::optional<layout_rules> rules;

  /// The ranks that saved a distributed checkpoint: of `ranks`, or of the grid of `rules`.
  [[nodiscard]] CAIRN_DECL std::int64_t world_size() const noexcept;
  /// What rank `rank` saved (O(its parameters) under rules); a checkpoint_error (invalid_state)
  /// for a rank the save does not have.
  [[nodiscard]] CAIRN_DECL rank_layout layout_of(std::int64_t rank) const;
  /// What every rank saved: `ranks`, or `rules` expanded (within `expand_rules`' bounds), for
  /// the tools that go through every rank's file (verify, convert).
  [[nodiscard]] CAIRN_DECL std::vector<rank_layout> layouts() const;
};
BOOST_DESCRIBE_STRUCT(checkpoint_metadata, (),
                      (format, version, save_id, shard_names, ranks, parameters, config, metadata, replica_writers,
                       rules))

/// Versions of checkpoint metadata this build reads, and how each becomes the next.
///   0 -> 1: `state_shards` became `shard_names`, `layouts` became `ranks`.
///   1 -> 2: `save_id` added (a save without one is not checked against its files' identity).
///   2 -> 3: `replica_writers` added: "rank_0" for the saves before it, where rank 0 wrote
///           every replicated parameter; "balanced" since, where they are spread over the ranks.
///   3 -> 4: `rules` may stand for `ranks` (the layouts of a grid, O(parameters)).
CAIRN_DECL migration_chain const& checkpoint_metadata_migrations();

/// Reads checkpoint metadata from a JSON document found in `source`, migrating older versions.
/// Errors (unknown version, malformed fields) are io_errors naming `source`.
CAIRN_DECL checkpoint_metadata parse_checkpoint_metadata(boost::json::value document, std::string const& source);

namespace detail {
/// Which rank writes each replicated shard of a save. A holding marked `replicated` holds the
/// same values as every other rank's replicated holding of the same shard of that parameter: its
/// replica set (every rank, for a parameter replicated over the whole job; the data-parallel
/// group of a tensor-parallel shard in a TP×DP run). Each set is written once, by one member.
struct replica_writers {
  /// Per parameter, each distinct replicated shard and the rank that writes it.
  std::map<std::string, std::vector<std::pair<shard_layout, int>>> sets;

  /// Whether every holder writes its own copy (the rule `each`): `of` is then one of them, as
  /// the balanced rule would choose, for a reader that may read any.
  bool every_holder = false;

  /// The rank that writes replicated shard `shard` of `name`; -1 when no rank holds it so.
  [[nodiscard]] CAIRN_DECL int of(std::string const& name, shard_layout const& shard) const;
};

/// The writer of each replica set of `ranks` (every rank's layout), as `rule` says. `rank_0`:
/// its lowest member (rank 0 where every rank holds it: the saves of version 2 and before).
/// `balanced`: the sets, largest first (then by name, then by first holder), each to the member
/// that has written the fewest bytes so far (its own shards counted first, ties to the lowest
/// rank), so that every rank writes about as much. Computed from the layouts alone, alike on
/// every rank and when loading.
CAIRN_DECL replica_writers replica_writers_of(std::vector<rank_layout> const& ranks, replica_writer_rule rule);

/// The writer of each replica set of the layouts `rules` give, as `replica_writers_of` would
/// find it in `expand_rules(rules)`, for the sets of pipeline stage `stage` alone: a set never
/// spans stages, and where the balanced rule puts a set depends only on the sets of its own
/// stage before it, so that each rank computes its stage's writers from the rules in O(the
/// stage's rules x its tensor x data ranks), without any other stage's or rank's layout.
CAIRN_DECL replica_writers replica_writers_of(layout_rules const& rules, std::int64_t stage, replica_writer_rule rule);

/// The replica writers of the save `metadata` describes (which it must outlive), as its readers
/// ask for them: of its enumerated layouts all at once; under rules, a pipeline stage's when one
/// of its parameters is first asked for.
class saved_writers {
public:
  CAIRN_DECL explicit saved_writers(checkpoint_metadata const& metadata);
  /// The rank whose file holds replicated shard `shard` of `name`; -1 when no rank holds it so.
  [[nodiscard]] CAIRN_DECL int of(std::string const& name, shard_layout const& shard);
  /// Whether every holder's file holds its replicated shards (the rule `each`).
  [[nodiscard]] bool every_holder() const noexcept { return metadata_->replica_writers == replica_writer_rule::each; }

private:
  checkpoint_metadata const* metadata_;
  replica_writers all_;                                       // of enumerated layouts
  std::map<std::string, std::int64_t, std::less<>> stage_of_; // under rules: each parameter's stage
  std::map<std::int64_t, replica_writers> stages_;            // under rules: those asked for so far
};

/// `parse_checkpoint_metadata`, its errors config_errors.
/// With `rank_files` (the ranks whose files the checkpoint's directory holds: the highest
/// `rank_N.safetensors` + 1), layout rules for more ranks than that are refused before they are
/// expanded when their layouts would take more than `unbacked_rule_bytes`: a small edit of
/// metadata.json cannot make a reader spend what no checkpoint on disk backs.
CAIRN_DECL checkpoint_metadata parse_metadata_document(boost::json::value document, std::string const& source,
                                                       std::optional<std::int64_t> rank_files = std::nullopt);
/// What layouts of ranks without files may take, expanded: 64 MiB.
inline constexpr std::uint64_t unbacked_rule_bytes = std::uint64_t{64} << 20;
/// The io_error of malformed stored metadata in `source`, from the config_error that found it.
CAIRN_DECL io::io_error stored_metadata_error(std::string const& source, config_error const& e);

/// Replaces every NaN or infinite number in `v` by the string "NaN", "Infinity" or "-Infinity"
/// (JSON has no such numbers), with a warning naming its key.
CAIRN_DECL void make_finite(boost::json::value& v, std::string const& path);

/// The iteration stored in a save's `metadata` (an integer under "iteration"), or nothing.
CAIRN_DECL std::optional<std::int64_t> stored_iteration(boost::json::value const& metadata);

/// The metadata stored with a save at `iteration`: the caller's object with "iteration" added
/// (anything else than an object is kept under "user"). A NaN or infinite number (a diverged
/// loss) is stored as a string, with a warning: the save stays readable.
CAIRN_DECL boost::json::value with_iteration(boost::json::value const& metadata, std::int64_t iteration);
} // namespace detail

/// Reads the checkpoint metadata in `file`. Errors (unreadable, malformed, of an unknown
/// version) are io_errors naming the file, of kind io_errc::malformed: stored data, not a config.
CAIRN_DECL checkpoint_metadata read_checkpoint_metadata(std::filesystem::path const& file);

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/metadata.ipp>
#endif
