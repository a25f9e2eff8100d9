// Definitions of <cairn/training/resume.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/checkpoint/save_load.hpp>
#include <cairn/comm/collectives.hpp>
#include <cairn/config/json.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/training/resume.hpp>

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace cairn {

namespace detail {
/// The iteration a save's metadata records, as written, for messages: "20", "\"20\"" (not an
/// integer), "nothing".
inline std::string stored_iteration_text(checkpoint_metadata const& metadata) {
  if (metadata.iteration) return std::to_string(*metadata.iteration);
  auto const* raw = metadata.metadata.is_object() ? metadata.metadata.get_object().if_contains("iteration") : nullptr;
  return raw ? to_compact_json(*raw) + " (not an integer)" : std::string("nothing");
}
} // namespace detail

CAIRN_DECL resume_candidates_found resume_candidates(save_directory const& checkpoints,
                                                     std::vector<save_directory> cleaned) {
  for (auto& dir : cleaned)
    for (auto const& message : dir.clean()) emit(severity::warning, {dir.root().string(), message});
  resume_candidates_found out;
  for (auto const& path : checkpoints.misnamed()) {
    emit(severity::warning, {path.string(), "skipped: a save under a name that is not an iteration"});
    out.refused.push_back(path.string() +
                          ": a save under a name that is not an iteration (renamed by hand?): never resumed from; "
                          "name it by its iteration to resume from it");
  }
  auto complete = checkpoints.complete();
  for (auto it = complete.rbegin(); it != complete.rend(); ++it) {
    bool any = false;
    for (auto const& folder : checkpoints.complete_folders(*it)) {
      if (auto problem = detail::save_problem(folder, *it)) {
        emit(severity::warning, {folder.string(), "skipped: " + *problem});
        out.refused.push_back(folder.string() + ": " + *problem);
      } else {
        out.folders.emplace_back(*it, folder.string());
        any = true;
      }
    }
    if (any) out.loadable.push_back(*it);
  }
  return out;
}

CAIRN_DECL std::optional<resumed_checkpoint>
load_newest(save_directory const& checkpoints, resume_candidates_found found, model_state& state,
            comm::communicator_ref comm, verification verify,
            std::function<std::vector<diagnostic>(boost::json::value const&, std::string const&)> const&
                architecture_check) {
  std::string failures;
  for (auto const& refused : found.refused) failures += "\n  " + refused;
  // Every rank learns from rank 0 why the saves it refused were refused.
  failures = comm::broadcast_string(comm, failures);
  std::vector<std::int64_t> iterations;
  for (auto const& candidate : found.folders) iterations.push_back(candidate.first);
  if (found.folders.empty()) iterations = found.loadable; // each resolved when its turn comes
  iterations = comm::broadcast_integers(comm, iterations);
  for (std::size_t i = 0; i < iterations.size(); ++i) {
    auto iteration = iterations[i];
    checkpoint_load_config load;
    // The folder that holds it (on a store, a complete generation), as rank 0 found it.
    std::string folder;
    comm::all_succeed(comm, "cannot look for " + checkpoints.path(iteration).string(), [&] {
      if (comm.rank() != 0) return;
      folder = i < found.folders.size() ? found.folders[i].second : checkpoints.resolved(iteration).string();
    });
    load.path = comm::broadcast_string(comm, folder);
    if (architecture_check) {
      // Another model: said once, by its config keys, before anything is loaded (a load would
      // report a shape per parameter, and so would every older checkpoint).
      std::vector<diagnostic> differences;
      std::string text;
      comm::all_succeed(comm, "cannot compare the config stored in " + load.path.string(), [&] {
        if (comm.rank() != 0) return;
        boost::json::value stored;
        try {
          stored = read_stored_metadata(load.path, checkpoint_format::distributed).config;
        } catch (error const&) {
          return; // a checkpoint whose metadata does not read: its load says so, and the next is tried
        }
        boost::json::array list;
        for (auto const& d : architecture_check(stored, load.path.string()))
          list.push_back(boost::json::array{boost::json::string(d.path), boost::json::string(d.message)});
        text = list.empty() ? std::string() : boost::json::serialize(list);
      });
      text = comm::broadcast_string(comm, text);
      if (!text.empty()) {
        auto parsed = boost::json::parse(text);
        for (auto const& entry : parsed.as_array())
          differences.push_back({std::string(entry.at(0).as_string()), std::string(entry.at(1).as_string())});
        throw config_error(std::move(differences));
      }
    }
    load.format = checkpoint_format::distributed;
    load.model_weights = true;
    load.optimizer_state = true;
    try {
      resumed_checkpoint out{iteration, checkpoints.path(iteration), {}};
      comm::all_succeed(comm, "cannot load " + load.path.string(), [&] {
        out.metadata = load_checkpoint(state, comm, load, verify);
        // As the seed checks: the checkpoint is of the iteration its directory names.
        if (out.metadata.iteration != iteration)
          throw checkpoint_error(checkpoint_errc::mismatch, load.path.string() + ": its metadata says iteration " +
                                                                detail::stored_iteration_text(out.metadata) +
                                                                ", its directory " + std::to_string(iteration));
      });
      return out;
    } catch (std::exception const& e) {
      // A store that did not answer says nothing of the checkpoint: never a reason to take an
      // older one (which the run would then overwrite the newer one from).
      if (auto const* known = dynamic_cast<error const*>(&e); known && known->kind() == io_errc::storage) throw;
      failures += std::string("\n  ") + e.what();
      if (comm.rank() == 0)
        emit(severity::warning, {load.path.string(), std::string("skipped, it does not load: ") + e.what()});
    }
  }
  if (!failures.empty())
    throw training_error(training_errc::no_checkpoint,
                         "no checkpoint in " + checkpoints.root().string() +
                             " can be loaded, and none was deleted; repair or move them to start over:" + failures);
  return std::nullopt;
}

} // namespace cairn
