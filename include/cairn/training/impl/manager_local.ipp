// Definitions of <cairn/training/manager.hpp> for the local tier (docs/tiers.md): inline in a
// header-only build, compiled once by <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/detail/executor.hpp>
#include <cairn/checkpoint/detail/identity.hpp>
#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/formats/distributed.hpp>
#include <cairn/checkpoint/save_load.hpp>
#include <cairn/checkpoint/verify.hpp>
#include <cairn/comm/collectives.hpp>
#include <cairn/config/json.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/safetensors.hpp>
#include <cairn/training/local_tier.hpp>
#include <cairn/training/manager.hpp>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace cairn {

namespace detail {

/// The rank of a file named `rank_<r>.safetensors`.
inline std::optional<int> rank_of_file(std::string_view name) {
  constexpr std::string_view head = "rank_", tail = ".safetensors";
  if (!name.starts_with(head) || !name.ends_with(tail) || name.size() <= head.size() + tail.size()) return {};
  auto digits = name.substr(head.size(), name.size() - head.size() - tail.size());
  if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return {};
  return std::stoi(std::string(digits));
}

/// The file in an experiment directory that names the experiment: a random identity, made by
/// its first run, that its local checkpoints record (a new experiment at the same path, after
/// the directory was deleted, has another).
inline constexpr char const* experiment_id_file = ".cairn-experiment";

/// The identity of the experiment in `dir`, made there when it has none. Rank 0's work.
inline std::string experiment_identity(std::filesystem::path const& dir) {
  io::make_folder(dir.string());
  auto where = io::open_location((dir / experiment_id_file).string());
  auto read = [&] {
    auto text = where.backend->read_all(where.key, 256);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    if (text.empty() || text.find_first_not_of("0123456789abcdef") != std::string::npos)
      throw io::io_error(where.describe(), "not an experiment identity (hexadecimal digits): '" + text.substr(0, 64) +
                                               "'; remove it only with the experiment's local checkpoints");
    return text;
  };
  if (where.backend->size(where.key)) return read();
  auto id = cairn::detail::new_save_id();
  auto text = id + "\n";
  if (where.backend->create_exclusive(where.key, std::as_bytes(std::span(text.data(), text.size())))) return id;
  return read(); // another run made it first
}

/// Whether `e` is the failure of a communicator (a timeout, the backend), not of what a rank did.
inline bool communicator_failed(std::exception const& e) {
  auto const* known = dynamic_cast<error const*>(&e);
  return known && (known->kind() == comm_errc::timeout || known->kind() == comm_errc::backend);
}

/// "ranks 2, 3" / "rank 2".
inline std::string ranks_text(std::vector<int> const& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

} // namespace detail

CAIRN_DECL local_nodes const& basic_checkpoint_manager::nodes() {
  if (nodes_) return *nodes_;
  // The experiment's own folder of each local directory: runs of other experiments beside it
  // (a node's disk shared by jobs) never see, clean or delete its saves.
  std::string id;
  comm::all_succeed(comm_, "the local tier cannot name this experiment", [&] {
    if (comm_.rank() != 0) return;
    if (experiment_dir_.empty())
      throw training_error(training_errc::no_experiment_dir,
                           "run.experiment_dir: required by training.checkpoint.local (it names the experiment "
                           "its local checkpoints belong to)");
    id = detail::experiment_identity(experiment_dir_);
  });
  experiment_id_ = comm::broadcast_string(comm_, id);
  nodes_ = find_local_nodes(comm_, config_.checkpoint.local.directory);
  local_.emplace(config_.checkpoint.local.directory / ("cairn-" + experiment_id_) /
                 experiment_layout::checkpoints_folder);
  auto const replicas = config_.checkpoint.local.replicas;
  if (comm_.rank() == 0) {
    std::string found;
    for (int n = 0; n < nodes_->count(); ++n) found += (n ? "; " : "") + nodes_->describe(n);
    auto kept = std::min<std::int64_t>(replicas, nodes_->count() - 1);
    emit(severity::info, {config_.checkpoint.local.directory.string(),
                          "local tier on " + std::to_string(nodes_->count()) + " node" +
                              (nodes_->count() == 1 ? "" : "s") + " (" + found + "), each rank's part kept by " +
                              std::to_string(kept) + " peer" + (kept == 1 ? "" : "s") + " on other nodes"});
    if (replicas > kept)
      emit(severity::warning, {"training.checkpoint.local.replicas",
                               std::to_string(replicas) + " asked for, " + std::to_string(kept) + " kept: a run of " +
                                   std::to_string(nodes_->count()) + " node" + (nodes_->count() == 1 ? "" : "s") +
                                   " has no more other nodes; a node lost with " +
                                   (kept == 0 ? "no peer" : "its peers") + " is recovered from the persistent tier"});
  }
  return *nodes_;
}

CAIRN_DECL void basic_checkpoint_manager::save_local(std::int64_t iteration, model_state const& state,
                                                     boost::json::value const& metadata) {
  save_local(iteration, state, metadata, false);
}

CAIRN_DECL void basic_checkpoint_manager::save_local(std::int64_t iteration, model_state const& state,
                                                     boost::json::value const& metadata, bool promote) {
  auto started = clock::now();
  if (writer_.pending()) commit_pending();
  auto const& tier = nodes();
  int const rank = comm_.rank();
  bool const leader = tier.leads(rank);
  // Each rank's part, copied by the peers that keep it: the same list on every rank.
  std::vector<detail::file_transfer> copies;
  for (int r = 0; r < comm_.size(); ++r)
    for (auto holder : replica_holders(tier, r, config_.checkpoint.local.replicas))
      copies.push_back({r, holder, formats::rank_file({}, r).string()});
  if (!copies.empty() && options_.async && !transfers_)
    throw config_error(std::vector<diagnostic>{
        {"training.checkpoint.local.replicas",
         "copies to peers on other nodes are made in the background, beside training: give the checkpoint "
         "manager a communicator of its own for them (set_transfer_communicator; comm::connect(…, true) makes "
         "one), or set it to 0"}});
  try {
    comm::all_succeed(comm_, "cannot prepare local checkpoint " + std::to_string(iteration), [&] {
      if (leader) local_->begin(iteration);
    });
  } catch (std::exception const& e) { // a node's disk failing: warned of, the persistent tier stands
    if (detail::communicator_failed(e)) throw;
    if (rank == 0)
      emit(severity::warning,
           {local_->path(iteration).string(), std::string("local checkpoint not saved: ") + e.what()});
    last_local_ = iteration;
    if (promote) save(iteration, state, metadata); // the persistent checkpoint, saved as without the tier
    return;
  }
  auto dir = local_->staging(iteration);
  std::filesystem::path persistent;
  if (promote) persistent = stage(checkpoints_, iteration);
  auto save = config_.checkpoint.save_config(dir);
  // Every rank's file holds its whole state (replicated parameters too), so that a part, on its
  // own disk or a peer's, is all a rank needs to resume.
  auto plan = formats::distributed::plan(state, comm_, save, options_.program_config,
                                         cairn::detail::with_iteration(metadata, iteration), &layouts_,
                                         replica_writer_rule::each);
  // metadata.json, rank 0's, on every node.
  auto text = comm::broadcast_string(comm_, plan.closing.front().text);
  auto mine = plan.bytes_per_rank(comm_.size())[static_cast<std::size_t>(rank)];
  auto bytes = static_cast<std::uint64_t>(comm::sum(comm_, static_cast<std::int64_t>(mine)));
  last_local_ = iteration;
  pending_local_ = true;
  pending_promotion_ = promote;
  auto finite = pending_written_finite_ = std::make_shared<bool>(true);
  if (promote) last_checkpoint_ = iteration;
  auto via = transfers_ ? *transfers_ : comm_;
  auto write = [plan, dir, persistent, promote, rank, leader, text = std::move(text), copies = std::move(copies), via,
                finite, iteration](model_state const& from) mutable {
    if (promote) *finite = detail::finite_written(plan, from, rank);
    auto write_own = [&] {
      detail::execute_alone(plan, dir, from, rank); // rank 0 writes metadata.json there too
      if (leader && rank != 0)
        io::write_stored(formats::metadata_file(dir).string(), std::as_bytes(std::span(text.data(), text.size())));
    };
    if (copies.empty()) {
      write_own();
    } else {
      // Every rank's own write is agreed before any copy: a rank whose disk failed (full) makes
      // every rank skip the copies, instead of leaving its peers waiting in the exchange.
      comm::all_succeed(via, "local checkpoint " + std::to_string(iteration) + " not written (no copy made)",
                        write_own);
    }
    for (auto const& outcome : detail::run_transfers(via, copies, dir, dir))
      if (!outcome.problem.empty()) throw training_error(training_errc::storage, outcome.problem);
    if (!promote) return;
    // The persistent checkpoint: the files just written, copied (uploaded to an object store),
    // never serialized again.
    detail::copy_file(formats::rank_file(dir, rank), formats::rank_file(persistent, rank));
    if (rank == 0) detail::copy_file(formats::metadata_file(dir), formats::metadata_file(persistent));
  };
  if (!options_.async) {
    writer_.run(iteration, dir, bytes, started, [&] { write(state); });
    commit_pending();
    return;
  }
  auto snapshot = writer_.copy_to_host(state, plan, rank);
  auto paused = std::chrono::duration<double>(clock::now() - started).count();
  writer_.start(iteration, dir, bytes, started, paused,
                [snapshot = std::move(snapshot), write = std::move(write)]() mutable { write(snapshot); });
}

CAIRN_DECL void basic_checkpoint_manager::commit_local(background_writer::write& write) {
  auto& dir = *local_;
  auto const iteration = write.iteration;
  bool const leader = nodes().leads(comm_.rank());
  auto abandon_local = [&] {
    if (!leader) return;
    try {
      auto staged = io::open_location(dir.staging(iteration).string());
      staged.backend->remove_tree(staged.key);
    } catch (std::exception const& e) {
      emit(severity::warning, {dir.staging(iteration).string(), e.what()});
    }
  };
  bool const promoted = std::exchange(pending_promotion_, false);
  try {
    comm::all_succeed(comm_, "local checkpoint " + std::to_string(iteration) + " was not saved",
                      [&] { write.done.get(); });
    comm::all_succeed(comm_, "cannot commit local checkpoint " + std::to_string(iteration), [&] {
      if (!leader) return;
      boost::json::object info{{"kind", "local"},
                               {"world_size", comm_.size()},
                               {"experiment", experiment_id_},
                               {"time", static_cast<std::int64_t>(std::time(nullptr))}};
      dir.commit(iteration, std::move(info));
    });
  } catch (std::exception const& e) {
    abandon_local();
    if (promoted) abandon(checkpoints_, iteration);
    // A local save that failed (a node's disk full or failing) is warned of, and training goes
    // on: the persistent tier stands. One promoted to a persistent checkpoint fails as that would,
    // and so does a communicator that failed.
    if (promoted || detail::communicator_failed(e)) throw;
    // Every rank says so: on a node whose disk is full, its own log shows why.
    emit(severity::warning, {dir.path(iteration).string(), std::string("local checkpoint not saved: ") + e.what()});
    return;
  }
  report("saved local checkpoint", dir.path(iteration), write.bytes, write.started, write.paused);
  if (leader) {
    auto complete = dir.complete();
    auto keep = static_cast<std::size_t>(std::max<std::int64_t>(config_.checkpoint.local.keep, 1));
    for (std::size_t k = 0; k + keep < complete.size(); ++k) {
      if (complete[k] == iteration) continue;
      try {
        dir.remove(complete[k]);
      } catch (std::exception const& e) {
        emit(severity::warning,
             {dir.path(complete[k]).string(), std::string("retention could not remove it: ") + e.what()});
      }
    }
  }
  if (!promoted) return;
  // Every rank's copy is written: the persistent checkpoint is whole.
  pending_finite_ = comm::all_of(comm_, *pending_written_finite_);
  commit(checkpoints_, config_.checkpoint, iteration, "checkpoint", write.bytes, write.started, write.paused,
         pending_finite_);
}

namespace detail {

/// A local save as the nodes hold it: every copy of each rank's part.
struct local_candidate {
  std::int64_t iteration = 0;
  std::string save_id;
  std::int64_t time = 0; // when committed (unix seconds), the latest of its nodes' markers
  std::map<int, std::vector<std::pair<int, std::uint64_t>>> copies; // rank -> (node, size), by node
  std::set<int> nodes;                                              // those holding it
};

} // namespace detail

CAIRN_DECL std::optional<resumed_checkpoint>
basic_checkpoint_manager::recover_local(model_state& state, std::optional<std::int64_t> persistent) {
  auto const& tier = nodes();
  int const rank = comm_.rank(), world = comm_.size();
  int const node = tier.node_of[static_cast<std::size_t>(rank)];
  bool const leader = tier.leads(rank);
  auto& dir = *local_;
  auto const& experiment = experiment_id_;
  auto tell = [&](severity level, std::string const& where, std::string const& text) {
    if (rank == 0) emit(level, {where, text});
  };
  // 1. What each node holds: its leader lists its complete local saves (after removing what
  // interrupted ones left: a torn save is never a candidate).
  boost::json::array held;
  comm::all_succeed(comm_, "cannot look for local checkpoints in " + dir.root().string(), [&] {
    if (!leader) return;
    for (auto const& message : dir.clean()) emit(severity::warning, {dir.root().string(), message});
    for (auto i : dir.complete()) {
      if (auto problem = dir.problem(i)) {
        emit(severity::warning, {dir.path(i).string(), "skipped: " + *problem});
        continue;
      }
      try {
        auto marker = detail::read_json(dir.path(i) / completion_marker, std::size_t{1} << 24).as_object();
        auto const* owner = marker.if_contains("experiment");
        if (!owner || !owner->is_string() || owner->get_string() != experiment) {
          emit(severity::warning, {dir.path(i).string(), "skipped: a local checkpoint of another experiment (" +
                                                             (owner ? to_compact_json(*owner) : std::string("none")) +
                                                             ", not " + experiment + ")"});
          continue;
        }
        auto metadata = read_checkpoint_metadata(formats::metadata_file(dir.path(i)));
        if (options_.architecture_check) // another model: said by its keys, as a persistent resume does
          if (auto differences = options_.architecture_check(metadata.config, dir.path(i).string());
              !differences.empty())
            throw config_error(std::move(differences));
        boost::json::object files;
        for (auto const& [name, about] : marker.at("files").as_object()) // {size, xxh3}, or a size (older)
          if (auto r = detail::rank_of_file(name))
            files[std::to_string(*r)] = about.is_object() ? about.as_object().at("size") : about;
        auto const* time = marker.if_contains("time");
        held.push_back(boost::json::object{{"iteration", i},
                                           {"save", metadata.save_id},
                                           {"world", metadata.world_size()},
                                           {"time", time && time->is_int64() ? time->as_int64() : 0},
                                           {"files", std::move(files)}});
      } catch (config_error const&) {
        throw;
      } catch (std::exception const& e) {
        emit(severity::warning, {dir.path(i).string(), std::string("skipped: ") + e.what()});
      }
    }
  });
  auto views = comm::all_gather_strings(comm_, leader ? boost::json::serialize(held) : std::string());
  std::map<std::pair<std::int64_t, std::string>, detail::local_candidate> by_save;
  std::set<std::int64_t> other_world;
  for (int n = 0; n < tier.count(); ++n) {
    auto listed = boost::json::parse(views[static_cast<std::size_t>(tier.leader(n))]);
    for (auto const& entry : listed.as_array()) {
      auto const& e = entry.as_object();
      auto iteration = e.at("iteration").to_number<std::int64_t>();
      if (e.at("world").to_number<std::int64_t>() != world) {
        other_world.insert(iteration);
        continue;
      }
      auto& c = by_save[{iteration, std::string(e.at("save").as_string())}];
      c.iteration = iteration;
      c.save_id = e.at("save").as_string();
      c.time = std::max(c.time, e.at("time").to_number<std::int64_t>());
      c.nodes.insert(n);
      for (auto const& [r, size] : e.at("files").as_object())
        c.copies[std::stoi(std::string(r))].emplace_back(n, size.to_number<std::uint64_t>());
    }
  }
  // Newest first; two saves of one iteration (by attempts of the run before and after a resume)
  // by when they were committed, the later first.
  std::vector<detail::local_candidate> found;
  for (auto& [key, c] : by_save) found.push_back(std::move(c));
  std::sort(found.begin(), found.end(), [](auto const& a, auto const& b) {
    return std::tie(a.iteration, a.time, a.save_id) > std::tie(b.iteration, b.time, b.save_id);
  });
  std::string failures; // why each local checkpoint of this run was not resumed from
  if (!other_world.empty()) {
    failures += "\n  local checkpoints " + std::to_string(*other_world.rbegin()) +
                " and older: saved by another number of ranks";
    tell(severity::warning, dir.root().string(),
         "local checkpoints " + std::to_string(*other_world.rbegin()) +
             " and older were saved by another number of "
             "ranks: a local part is one rank's whole state, so resharding resumes from the persistent tier");
  }
  auto const floor = persistent.value_or(-1);
  for (auto& c : found) {
    if (c.iteration < floor) {
      tell(severity::info, dir.root().string(),
           "the persistent checkpoint " + std::to_string(floor) + " is newer than every whole local checkpoint");
      break;
    }
    std::vector<int> lost;
    for (int r = 0; r < world; ++r)
      if (!c.copies.contains(r)) lost.push_back(r);
    if (!lost.empty()) {
      auto why = "not whole: no node holds a copy of the parts of " + detail::ranks_text(lost) +
                 " (their node and the peers keeping them lost)";
      failures += "\n  local checkpoint " + std::to_string(c.iteration) + ": " + why;
      tell(severity::warning, dir.path(c.iteration).string(), why);
      continue;
    }
    // 2. Every copy checked whole (checksums, and that it is this save's part of that rank) by a
    // rank of the node holding it, before any is chosen.
    auto checker = [&](int r, std::size_t k) {
      auto n = c.copies[r][k].first;
      auto const& members = tier.ranks[static_cast<std::size_t>(n)];
      return members[static_cast<std::size_t>(r + static_cast<int>(k)) % members.size()];
    };
    std::string refused;
    std::optional<checkpoint_metadata> saved;
    for (int r = 0; r < world; ++r)
      for (std::size_t k = 0; k < c.copies[r].size(); ++k) {
        if (checker(r, k) != rank) continue;
        auto file = formats::rank_file(dir.path(c.iteration), r);
        std::string problem;
        try {
          if (!saved) saved = read_checkpoint_metadata(formats::metadata_file(dir.path(c.iteration)));
          verification_report report;
          detail::verify_checksums(file, true, {}, report);
          if (!report.ok()) problem = report.problems.front();
          io::safetensors_file opened(file);
          if (auto wrong = detail::identity_problem(opened, *saved, r); wrong && problem.empty())
            problem = file.string() + ": " + *wrong;
        } catch (std::exception const& e) {
          problem = e.what();
        }
        std::replace(problem.begin(), problem.end(), '\n', ' '); // one line a copy
        if (!problem.empty()) refused += std::to_string(r) + " " + std::to_string(k) + " " + problem + "\n";
      }
    std::set<std::pair<int, std::size_t>> bad;
    for (auto const& report : comm::all_gather_strings(comm_, refused)) {
      std::size_t at = 0;
      while (at < report.size()) {
        auto end = report.find('\n', at);
        auto line = report.substr(at, end - at);
        at = end + 1;
        auto first = line.find(' '), second = line.find(' ', first + 1);
        int r = std::stoi(line.substr(0, first));
        auto k = static_cast<std::size_t>(std::stoul(line.substr(first + 1, second - first - 1)));
        bad.emplace(r, k);
        auto n = c.copies[r][k].first;
        tell(severity::warning, line.substr(second + 1),
             "refused: rank " + std::to_string(r) + "'s part on node " + std::to_string(n) + " (" + tier.describe(n) +
                 ") does not check");
      }
    }
    // 3. Each rank's source: its own node's copy, else the next node's (in node order) that checks.
    std::vector<detail::file_transfer> transfers;
    std::vector<int> unsound;
    std::string chosen;
    std::uint64_t own_bytes = 0, peer_bytes = 0;
    std::vector<int> from_own;
    for (int r = 0; r < world; ++r) {
      auto home = tier.node_of[static_cast<std::size_t>(r)];
      std::optional<std::size_t> best;
      for (std::size_t k = 0; k < c.copies[r].size(); ++k) {
        if (bad.contains({r, k})) continue;
        auto distance = (c.copies[r][k].first - home + tier.count()) % tier.count();
        if (!best || distance < (c.copies[r][*best].first - home + tier.count()) % tier.count()) best = k;
      }
      if (!best) {
        unsound.push_back(r);
        continue;
      }
      auto [n, size] = c.copies[r][*best];
      if (n == home) {
        from_own.push_back(r);
        own_bytes += size;
        continue;
      }
      peer_bytes += size;
      transfers.push_back({checker(r, *best), r, formats::rank_file({}, r).string()});
      chosen += "; rank " + std::to_string(r) + " from rank " + std::to_string(checker(r, *best)) + " on node " +
                std::to_string(n) + " (" + std::to_string(size) + " bytes)";
    }
    if (!unsound.empty()) {
      auto why = "not whole: no copy of the parts of " + detail::ranks_text(unsound) + " checks";
      failures += "\n  local checkpoint " + std::to_string(c.iteration) + ": " + why;
      tell(severity::warning, dir.path(c.iteration).string(), why);
      continue;
    }
    // metadata.json for the nodes without this save (a replaced node), from the first node with it.
    auto source_node = *c.nodes.begin();
    for (int n = 0; n < tier.count(); ++n)
      if (!c.nodes.contains(n))
        transfers.push_back({tier.leader(source_node), tier.leader(n), formats::metadata_file({}).string()});
    bool have = c.nodes.contains(node);
    auto target = have ? dir.path(c.iteration) : dir.staging(c.iteration);
    std::string text = "local checkpoint " + std::to_string(c.iteration) + ": " +
                       (from_own.empty() ? std::string("no rank")
                                         : detail::ranks_text(from_own) + " from their node's disk (" +
                                               std::to_string(own_bytes) + " bytes)") +
                       chosen;
    if (!transfers.empty()) text += "; " + std::to_string(peer_bytes) + " bytes from peers";
    try {
      // 4. The parts sent where they are missing, kept there: a replaced node has its local
      // checkpoint again.
      comm::all_succeed(comm_, "cannot prepare " + target.string(), [&] {
        if (leader && !have) dir.begin(c.iteration);
      });
      auto outcomes = detail::run_transfers(comm_, transfers, dir.path(c.iteration), target);
      comm::all_succeed(comm_, "local checkpoint " + std::to_string(c.iteration) + " cannot be recovered", [&] {
        for (auto const& outcome : outcomes)
          if (!outcome.problem.empty()) throw training_error(training_errc::storage, outcome.problem);
      });
      comm::all_succeed(comm_, "cannot commit " + target.string(), [&] {
        if (leader && !have)
          dir.commit(c.iteration, boost::json::object{{"kind", "local"},
                                                      {"world_size", world},
                                                      {"experiment", experiment},
                                                      {"time", c.time},
                                                      {"recovered", true}});
      });
      // 5. Loaded as any checkpoint is, each rank reading its own part on its node's disk.
      checkpoint_load_config load;
      load.path = dir.path(c.iteration);
      load.format = checkpoint_format::distributed;
      load.model_weights = true;
      load.optimizer_state = true;
      resumed_checkpoint out{c.iteration, load.path, {}, true};
      auto started = clock::now();
      comm::all_succeed(comm_, "cannot load local checkpoint " + load.path.string(), [&] {
        auto metadata = read_checkpoint_metadata(formats::metadata_file(load.path));
        if (!(metadata.layout_of(rank) == state.layout()))
          throw checkpoint_error(checkpoint_errc::mismatch,
                                 load.path.string() + ": saved with another layout of rank " + std::to_string(rank) +
                                     " than this run's: resharding resumes from the persistent tier");
        out.metadata = load_checkpoint(state, comm_, load, options_.verify);
        if (out.metadata.iteration != c.iteration)
          throw checkpoint_error(checkpoint_errc::mismatch,
                                 load.path.string() + ": its metadata says iteration " +
                                     (out.metadata.iteration ? std::to_string(*out.metadata.iteration) : "nothing"));
      });
      tell(severity::info, dir.root().string(), text);
      report("loaded local checkpoint", load.path, own_bytes + peer_bytes, started, {});
      return out;
    } catch (std::exception const& e) {
      // What a failed load left in `state` is overwritten whole by the checkpoint loaded next;
      // with none, the run stops (below): it never trains on from a state half loaded.
      if (detail::communicator_failed(e)) throw;
      failures += "\n  local checkpoint " + std::to_string(c.iteration) + ": not recovered: " + e.what();
      tell(severity::warning, dir.path(c.iteration).string(),
           std::string("not recovered (") + e.what() + "): the next older checkpoint, local or persistent, is tried");
    }
  }
  if (failures.empty()) return std::nullopt; // no local checkpoint of this run: nothing to say
  if (!persistent)
    throw training_error(training_errc::no_checkpoint,
                         "no local checkpoint in " + dir.root().string() +
                             " can be recovered, no persistent checkpoint either, and none was deleted; repair or "
                             "move them to start over:" +
                             failures);
  tell(severity::warning, dir.root().string(),
       "resuming from the persistent tier's checkpoint " + std::to_string(*persistent) +
           " (no newer local one "
           "is whole)");
  return std::nullopt;
}

} // namespace cairn
