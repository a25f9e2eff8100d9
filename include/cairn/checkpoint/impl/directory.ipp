// Definitions of <cairn/checkpoint/directory.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/directory.hpp>
#include <cairn/config/detail/pretty.hpp>
#include <cairn/config/json.hpp>
#include <cairn/detail/json_feed.hpp>
#include <cairn/detail/writer.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/checksum.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/safetensors.hpp>

#include <boost/json/value.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace cairn::detail {

CAIRN_DECL std::string identity_checksum(std::filesystem::path const& file) {
  constexpr std::uint64_t first_bytes = std::uint64_t{16} << 20;
  bool safetensors = file.extension() == ".safetensors";
  if (!io::is_object_store_path(file.string())) {
    io::mapped_file mapped(file);
    auto bytes = mapped.bytes();
    std::uint64_t n = std::min<std::uint64_t>(bytes.size(), first_bytes);
    if (safetensors && bytes.size() >= 8)
      n = std::min<std::uint64_t>(bytes.size(), 8 + std::min(io::detail::read_le64(bytes), io::max_header_size));
    return io::to_hex(io::checksum_of(bytes.first(static_cast<std::size_t>(n))));
  }
  // An object: its first bytes only, with ranged reads.
  auto where = io::open_location(file.string());
  auto size = where.backend->size(where.key);
  if (!size) throw io::io_error(file, std::make_error_code(std::errc::no_such_file_or_directory), "no such object");
  std::uint64_t n = std::min(*size, first_bytes);
  std::vector<std::byte> prefix;
  if (safetensors && *size >= 8) {
    prefix.resize(8);
    where.backend->read(where.key, 0, prefix);
    n = std::min<std::uint64_t>(*size, 8 + std::min(io::detail::read_le64(prefix), io::max_header_size));
  }
  auto had = prefix.size();
  prefix.resize(static_cast<std::size_t>(n));
  if (n > had) where.backend->read(where.key, had, std::span(prefix).subspan(had));
  return io::to_hex(io::checksum_of(prefix));
}

CAIRN_DECL bool present(std::filesystem::path const& path) {
  auto where = io::open_location(path.string());
  try {
    return where.backend->size(where.key).has_value();
  } catch (io::io_error const&) {
    if (where.backend->guarantees().directories) return true; // something else than a file: there
    throw;                                                    // an unreachable store is never "not there"
  }
}

CAIRN_DECL bool is_folder(std::filesystem::path const& path) {
  if (!io::is_object_store_path(path.string())) {
    std::error_code ec;
    return std::filesystem::is_directory(path, ec);
  }
  return !folder_entries(path).empty();
}

CAIRN_DECL std::optional<std::uint64_t> stored_size(std::filesystem::path const& path) {
  auto where = io::open_location(path.string());
  try {
    return where.backend->size(where.key);
  } catch (io::io_error const&) {
    if (where.backend->guarantees().directories) return std::nullopt; // not a regular file
    throw;
  }
}

CAIRN_DECL std::vector<io::listed_entry> folder_entries(std::filesystem::path const& path) {
  auto where = io::open_location(path.string());
  return where.backend->list(where.key);
}

CAIRN_DECL boost::json::value read_json(std::filesystem::path const& file, std::size_t limit) {
  // Parsed as it is read, piece by piece, within json_limits: never held whole.
  if (!io::is_object_store_path(file.string())) return read_json_file(file, limit);
  auto where = io::open_location(file.string());
  json_feed feed;
  where.backend->read_pieces(where.key, limit, [&](std::string_view piece) { return feed.feed(piece); });
  return finish_json(feed, file.string());
}

CAIRN_DECL std::optional<std::string> save_problem(std::filesystem::path const& folder,
                                                   std::optional<std::int64_t> iteration) {
  auto marker = folder / completion_marker;
  try {
    if (!present(marker)) return "no completion marker: the save did not finish";
    auto document = read_json(marker, max_config_file_size);
    auto const* files = document.is_object() ? document.as_object().if_contains("files") : nullptr;
    if (!files || !files->is_object()) return marker.string() + ": no \"files\" object";
    auto const* recorded = document.as_object().if_contains("iteration");
    if (recorded && !recorded->is_int64())
      return marker.string() + ": \"iteration\" is " + compact(*recorded) + ", not an integer";
    if (recorded && iteration && recorded->as_int64() != *iteration)
      return marker.string() + ": the save of another iteration (" + compact(*recorded) + ")";
    for (auto const& [name, entry] : files->as_object()) {
      auto file = folder / std::string(name);
      // {"size": n, "xxh3": "…"}; markers written before header checksums hold the size alone.
      auto const* size = entry.is_object() ? entry.as_object().if_contains("size") : &entry;
      auto const* hash = entry.is_object() ? entry.as_object().if_contains("xxh3") : nullptr;
      if (name.empty() || std::string_view(name).find('/') != std::string_view::npos || !size || !size->is_int64() ||
          (entry.is_object() && (!hash || !hash->is_string())))
        return marker.string() + ": malformed entry '" + std::string(name) + "'";
      auto actual = stored_size(file);
      if (!actual) return file.string() + ": listed by the marker but missing";
      if (static_cast<std::int64_t>(*actual) != size->as_int64())
        return file.string() + ": " + std::to_string(*actual) + " bytes, the marker says " +
               std::to_string(size->as_int64());
      if (hash && identity_checksum(file) != std::string_view(hash->as_string()))
        return file.string() + ": its header differs from the one the marker recorded (a file of another save "
                               "or rank?)";
    }
  } catch (error const& e) {
    // A store that did not answer says nothing of the save: the caller must not pass it over.
    if (e.kind() == io_errc::storage) throw;
    return e.what();
  }
  return std::nullopt;
}

/// A save folder's generations, newest first.
inline std::vector<save_generation> generations_in(std::vector<io::listed_entry> const& entries) {
  std::vector<save_generation> out;
  for (auto const& entry : entries)
    if (entry.directory && !entry.link)
      if (auto generation = save_generation::parse(entry.name)) out.push_back(std::move(*generation));
  std::sort(out.begin(), out.end(), std::greater<>());
  return out;
}

/// What is directly in the folder `path` (nothing when it is no folder: a file, or nothing there).
inline std::vector<io::listed_entry> entries_of(std::filesystem::path const& path) {
  auto where = io::open_location(path.string());
  try {
    return where.backend->list(where.key);
  } catch (io::io_error const&) {
    if (where.backend->guarantees().directories) return {}; // not a directory
    throw;                                                  // an unreachable store is never "nothing there"
  }
}

} // namespace cairn::detail

namespace cairn {

CAIRN_DECL std::string save_generation::name() const {
  return "gen-" + std::to_string(since) + "-" + writer + "-" + std::to_string(number);
}

CAIRN_DECL std::optional<save_generation> save_generation::parse(std::string_view name) {
  // gen-<digits>-<lowercase hex>-<digits>
  if (!name.starts_with("gen-")) return std::nullopt;
  name.remove_prefix(4);
  auto first = name.find('-'), last = name.rfind('-');
  if (first == std::string_view::npos || first == last) return std::nullopt;
  save_generation out;
  auto number = [](std::string_view text, std::int64_t& value) {
    auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
    return status == std::errc() && end == text.data() + text.size() && !text.empty() && value >= 0 &&
           value <= save_generation::max_number && std::to_string(value) == text;
  };
  auto writer = name.substr(first + 1, last - first - 1);
  if (!number(name.substr(0, first), out.since) || !number(name.substr(last + 1), out.number) || writer.empty() ||
      writer.size() > 64 || writer.find_first_not_of("0123456789abcdef") != std::string_view::npos)
    return std::nullopt;
  out.writer = writer;
  return out;
}

CAIRN_DECL std::filesystem::path resolve_save(std::filesystem::path const& path) {
  // A save with its marker in place (what rename commits; a generation never holds generations).
  if (detail::present(path / completion_marker)) return path;
  for (auto const& generation : detail::generations_in(detail::entries_of(path))) {
    auto folder = path / generation.name();
    if (detail::present(folder / completion_marker)) return folder;
  }
  return path;
}

CAIRN_DECL save_directory::save_directory(std::filesystem::path root)
    : root_(std::move(root)), storage_(io::open_location(root_.string())), since_(detail::unix_milliseconds()),
      writer_(detail::random_writer_name()) {}

CAIRN_DECL void save_directory::set_writer(std::int64_t since, std::string writer) {
  since_ = since;
  writer_ = std::move(writer);
}

CAIRN_DECL std::optional<std::string> save_directory::pass_future_generations() {
  if (renames()) return std::nullopt;
  auto now = detail::unix_milliseconds();
  std::optional<save_generation> newest;
  std::filesystem::path where;
  auto consider = [&](std::filesystem::path const& save, std::string_view name) {
    auto generation = save_generation::parse(name);
    if (generation && generation->since > now && (!newest || generation->since > newest->since)) {
      newest = generation;
      where = save / name;
    }
  };
  if (auto keys = storage_.backend->list_all(storage_.key)) {
    for (auto const& key : *keys) { // <iteration>/gen-…/<file>
      auto first = key.name.find('/');
      auto second = first == std::string::npos ? first : key.name.find('/', first + 1);
      if (second == std::string::npos || !iteration_of(std::string_view(key.name).substr(0, first))) continue;
      consider(root_ / key.name.substr(0, first), std::string_view(key.name).substr(first + 1, second - first - 1));
    }
  } else {
    for (auto const& [iteration, dir] : numbered(""))
      for (auto const& entry : storage_.backend->list(key_of(dir)))
        if (entry.directory) consider(dir, entry.name);
  }
  if (!newest || newest->since < since_) return std::nullopt;
  if (newest->since >= save_generation::max_number)
    return where.string() + " is dated " + std::to_string(newest->since) +
           " (unix milliseconds), the latest date a generation may have: no save of this writer's can be newer, and "
           "it stays the save of its iteration until it is removed by hand";
  auto was = since_;
  since_ = newest->since + 1;
  return "this writer's saves are dated " + std::to_string(since_) + " instead of " + std::to_string(was) +
         " (unix milliseconds), after " + where.string() + ", dated " + std::to_string(newest->since - now) +
         " ms ahead of this host's clock (written where the clock runs ahead, or copied in): otherwise it would "
         "outrank this run's saves of its iteration";
}

CAIRN_DECL bool save_directory::exists(std::filesystem::path const& path) const { return detail::present(path); }

CAIRN_DECL std::string save_directory::key_of(std::filesystem::path const& path) const {
  return io::open_location(path.string()).key;
}

CAIRN_DECL std::filesystem::path save_directory::staging(std::int64_t iteration) const {
  if (auto it = staged_.find(iteration); it != staged_.end()) return it->second;
  if (!renames()) return {}; // nothing begun: a generation is named when begun
  return root_ / (".partial-" + std::to_string(iteration));
}

CAIRN_DECL std::vector<std::int64_t> save_directory::complete() const {
  std::vector<std::int64_t> out;
  if (auto keys = storage_.backend->list_all(storage_.key)) {
    // Every key at once (a store: a request per 1,000): a save is complete when a marker is
    // directly in its folder or in one of its generations.
    for (auto const& key : *keys) {
      auto slash = key.name.find('/');
      if (slash == std::string::npos) continue;
      auto iteration = iteration_of(std::string_view(key.name).substr(0, slash));
      auto rest = std::string_view(key.name).substr(slash + 1);
      auto inner = rest.find('/');
      bool marker = rest == completion_marker ||
                    (inner != std::string_view::npos && rest.substr(inner + 1) == completion_marker &&
                     save_generation::parse(rest.substr(0, inner)));
      if (iteration && marker && (out.empty() || out.back() != *iteration)) out.push_back(*iteration);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  for (auto const& [iteration, dir] : numbered(""))
    if (exists(resolve_save(dir) / completion_marker)) out.push_back(iteration);
  std::sort(out.begin(), out.end());
  return out;
}

CAIRN_DECL std::vector<std::filesystem::path> save_directory::complete_folders(std::int64_t iteration) const {
  auto dir = path(iteration);
  std::vector<std::filesystem::path> out;
  if (exists(dir / completion_marker)) out.push_back(dir);
  for (auto const& generation : detail::generations_in(detail::entries_of(dir)))
    if (auto folder = dir / generation.name(); exists(folder / completion_marker)) out.push_back(folder);
  return out;
}

CAIRN_DECL std::vector<std::filesystem::path> save_directory::misnamed() const {
  std::vector<std::filesystem::path> out;
  for (auto const& entry : storage_.backend->list(storage_.key)) {
    if (entry.link || !entry.directory || entry.name.starts_with(".") || iteration_of(entry.name)) continue;
    if (exists(resolve_save(root_ / entry.name) / completion_marker)) out.push_back(root_ / entry.name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

CAIRN_DECL std::optional<std::string> save_directory::problem(std::int64_t iteration) const {
  return detail::save_problem(resolved(iteration), iteration);
}

CAIRN_DECL std::vector<std::string> save_directory::clean() {
  std::vector<std::string> report;
  auto remove = [&](std::filesystem::path const& dir) { storage_.backend->remove_tree(key_of(dir)); };
  for (auto const& [iteration, dir] : numbered(".replaced-")) {
    bool restore = !exists(resolve_save(path(iteration)) / completion_marker) && exists(dir / completion_marker);
    if (restore && renames()) {
      remove(path(iteration));
      io::rename_path(dir, path(iteration));
      report.push_back("restored " + path(iteration).string() + ": its replacement did not finish");
    } else if (restore) {
      // Cannot be renamed back on a store (left by a copy of a POSIX experiment?): never a save of
      // this directory, never deleted either.
      report.push_back("left " + dir.string() +
                       " alone: a save set aside by an interrupted replacement, which a store without rename "
                       "cannot put back (move it to " +
                       path(iteration).string() + " to resume from it)");
    } else {
      remove(dir);
      report.push_back("removed " + dir.string() + ": left by an interrupted save");
    }
  }
  for (auto const& [iteration, dir] : numbered(".partial-")) {
    remove(dir);
    report.push_back("removed " + dir.string() + ": left by an interrupted save");
  }
  for (auto const& [iteration, dir] : numbered("")) {
    if (renames()) {
      if (!exists(resolve_save(dir) / completion_marker)) {
        remove(dir);
        report.push_back("removed " + dir.string() + ": it has no completion marker");
      }
      continue;
    }
    // On a store: each generation without a marker that this writer may remove, and files beside
    // them without a marker of their own (a save of the time before generations, torn).
    auto entries = storage_.backend->list(key_of(dir));
    for (auto const& generation : detail::generations_in(entries)) {
      auto folder = dir / generation.name();
      if (may_remove(generation) && !exists(folder / completion_marker)) {
        remove(folder);
        report.push_back("removed " + folder.string() + ": it has no completion marker");
      }
    }
    bool flat_files = std::any_of(entries.begin(), entries.end(), [](auto const& e) { return !e.directory; });
    if (flat_files && !exists(dir / completion_marker)) {
      remove_flat_files(dir);
      report.push_back("removed the files of " + dir.string() + " beside its generations: no completion marker");
    }
  }
  for (auto const& unfinished : storage_.backend->end_unfinished(storage_.key))
    report.push_back("ended " + unfinished + ": an upload left by an interrupted save");
  for (auto const& entry : storage_.backend->list(storage_.key))
    if (entry.link && iteration_of(entry.name))
      report.push_back("left " + (root_ / entry.name).string() +
                       " alone: a symbolic link is not one of this directory's saves (never resumed from "
                       "nor deleted)");
  if (!report.empty() && storage_.backend->guarantees().directories) io::fsync_directory(root_);
  return report;
}

CAIRN_DECL std::filesystem::path save_directory::begin(std::int64_t iteration) {
  std::filesystem::path dir;
  if (renames()) {
    dir = root_ / (".partial-" + std::to_string(iteration));
    storage_.backend->remove_tree(key_of(dir));
    if (storage_.backend->guarantees().directories) io::make_directories(dir);
  } else {
    // A place no other writer ever writes: nothing to clear.
    dir = path(iteration) / save_generation{since_, writer_, ++begun_}.name();
  }
  staged_[iteration] = dir;
  return dir;
}

CAIRN_DECL std::filesystem::path save_directory::commit(std::int64_t iteration, boost::json::object info) {
  auto from = staging(iteration), to = path(iteration);
  if (from.empty()) throw io::io_error(to, "no save of this iteration was begun here");
  boost::json::object files;
  for (auto const& entry : storage_.backend->list(key_of(from)))
    if (!entry.directory && !entry.link)
      files[entry.name] = {{"size", entry.size}, {"xxh3", detail::identity_checksum(from / entry.name)}};
  if (files.empty()) // removed meanwhile (by a run that took the experiment over?): never a save of nothing
    throw io::io_error(from, "holds no file to commit");
  info["iteration"] = iteration;
  info["files"] = std::move(files);
  auto text = detail::pretty(info);
  if (!renames()) {
    // No rename: every file is confirmed stored (each writer's commit returned), and the marker,
    // written last, is what makes the save complete. A save of this iteration from before
    // generations (its files directly in the save's folder) is retired first, since its marker
    // would hide the generation; older generations go after, the newest complete one being the save.
    auto flat = io::open_location((to / completion_marker).string());
    flat.backend->remove(flat.key);
    auto marker = io::open_location((from / completion_marker).string());
    marker.backend->write(marker.key, std::as_bytes(std::span(text)));
    auto entries = storage_.backend->list(key_of(to));
    for (auto const& generation : detail::generations_in(entries))
      if (to / generation.name() != from && may_remove(generation)) remove_folder(to / generation.name());
    if (std::any_of(entries.begin(), entries.end(), [](auto const& e) { return !e.directory; })) remove_flat_files(to);
    staged_.erase(iteration);
    return from;
  }
  io::fsync_directory(from);
  bool replacing = std::filesystem::exists(to);
  if (replacing) {
    io::remove_tree(replaced(iteration));
    io::rename_path(to, replaced(iteration));
  }
  io::rename_path(from, to);
  io::fsync_directory(root_);
  io::write_file_atomically(to / completion_marker, std::as_bytes(std::span(text)));
  staged_.erase(iteration);
  if (replacing) io::remove_tree(replaced(iteration));
  return to;
}

CAIRN_DECL void save_directory::abandon(std::int64_t iteration) {
  auto staged = staging(iteration);
  staged_.erase(iteration);
  if (!staged.empty()) storage_.backend->remove_tree(key_of(staged)); // only what this writer staged
}

CAIRN_DECL bool save_directory::finite(std::int64_t iteration) const {
  auto document = detail::read_json(resolved(iteration) / completion_marker, max_config_file_size);
  auto const* object = document.if_object();
  if (!object) return false;
  auto const* flag = object->if_contains("finite");
  return !flag || (flag->is_bool() && flag->as_bool());
}

CAIRN_DECL void save_directory::remove_folder(std::filesystem::path const& folder) {
  auto marker = folder / completion_marker;
  if (!storage_.backend->guarantees().directories) {
    // Marker first: a save interrupted while being removed is plainly incomplete.
    auto where = io::open_location(marker.string());
    where.backend->remove(where.key);
    storage_.backend->remove_tree(key_of(folder));
    return;
  }
  if (std::filesystem::is_symlink(folder)) throw io::io_error(folder, "a symbolic link: not removed");
  if (std::filesystem::exists(marker)) {
    io::detail::fault_point("remove", marker);
    if (::unlink(marker.c_str()) != 0) throw io::system_error(marker, "cannot remove");
    io::fsync_directory(folder);
  }
  io::remove_tree(folder);
}

CAIRN_DECL void save_directory::remove_flat_files(std::filesystem::path const& dir) {
  auto marker = io::open_location((dir / completion_marker).string());
  marker.backend->remove(marker.key);
  for (auto const& entry : storage_.backend->list(key_of(dir)))
    if (!entry.directory && entry.name != completion_marker) storage_.backend->remove(key_of(dir / entry.name));
}

CAIRN_DECL void save_directory::remove(std::int64_t iteration) {
  auto dir = path(iteration);
  if (renames()) return remove_folder(dir);
  auto entries = storage_.backend->list(key_of(dir));
  for (auto const& generation : detail::generations_in(entries))
    if (may_remove(generation)) remove_folder(dir / generation.name());
  if (std::any_of(entries.begin(), entries.end(), [](auto const& e) { return !e.directory; })) remove_flat_files(dir);
}

CAIRN_DECL std::optional<std::int64_t> save_directory::iteration_of(std::string_view name) {
  std::int64_t iteration = 0;
  auto [end, status] = std::from_chars(name.data(), name.data() + name.size(), iteration);
  if (status != std::errc() || end != name.data() + name.size() || name.empty() || iteration < 0 ||
      std::to_string(iteration) != name)
    return std::nullopt;
  return iteration;
}

CAIRN_DECL std::vector<std::pair<std::int64_t, std::filesystem::path>>
save_directory::numbered(std::string_view prefix) const {
  std::vector<std::pair<std::int64_t, std::filesystem::path>> out;
  if (storage_.backend->guarantees().directories) {
    std::error_code ec;
    if (!std::filesystem::exists(root_, ec) && !ec) return out; // nothing saved yet
  }
  for (auto const& entry : storage_.backend->list(storage_.key)) {
    // A symbolic link is never a save of this directory: following it could delete another
    // run's files.
    if (entry.link || !entry.directory || !entry.name.starts_with(prefix)) continue;
    if (auto iteration = iteration_of(std::string_view(entry.name).substr(prefix.size())))
      out.emplace_back(*iteration, root_ / entry.name);
  }
  return out;
}

CAIRN_DECL detail::save_completeness save_status(std::filesystem::path const& path) {
  std::filesystem::path dir;
  if (io::is_object_store_path(path.string())) {
    auto text = path.string();
    while (text.ends_with('/')) text.pop_back();
    dir = text;
  } else {
    dir = path.lexically_normal();
    if (!dir.has_filename()) dir = dir.parent_path();
  }
  auto folder = resolve_save(dir);
  // The iteration a save must record: its folder's name, or the name of the folder of its
  // generations; a save copied under another name records its own.
  auto name = folder.filename().string();
  auto iteration = save_generation::parse(name) ? save_directory::iteration_of(folder.parent_path().filename().string())
                                                : save_directory::iteration_of(name);
  auto parent = dir.parent_path().filename().string();
  bool in_saves = parent == experiment_layout::checkpoints_folder || parent == experiment_layout::exports_folder;
  bool generation = save_generation::parse(name).has_value();
  if (!detail::present(folder / completion_marker) &&
      !(save_directory::iteration_of(dir.filename().string()) && in_saves) && !generation)
    return {};
  auto problem = detail::save_problem(folder, iteration);
  if (problem && problem->find('/') == std::string::npos) *problem = folder.string() + ": " + *problem;
  return {true, problem};
}

} // namespace cairn
