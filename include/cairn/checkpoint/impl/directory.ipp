// Definitions of <cairn/checkpoint/directory.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/directory.hpp>
#include <cairn/config/detail/pretty.hpp>
#include <cairn/config/json.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/checksum.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/safetensors.hpp>

#include <boost/json/value.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <optional>
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
  if (!io::is_object_store_path(file.string())) return read_json_file(file, limit);
  auto where = io::open_location(file.string());
  return parse_json(where.backend->read_all(where.key, limit), file.string());
}

} // namespace cairn::detail

namespace cairn {

CAIRN_DECL bool save_directory::exists(std::filesystem::path const& path) const { return detail::present(path); }

CAIRN_DECL std::string save_directory::key_of(std::filesystem::path const& path) const {
  return io::open_location(path.string()).key;
}

CAIRN_DECL std::vector<std::int64_t> save_directory::complete() const {
  std::vector<std::int64_t> out;
  for (auto const& [iteration, dir] : numbered(""))
    if (exists(dir / completion_marker)) out.push_back(iteration);
  std::sort(out.begin(), out.end());
  return out;
}

CAIRN_DECL std::vector<std::filesystem::path> save_directory::misnamed() const {
  std::vector<std::filesystem::path> out;
  for (auto const& entry : storage_.backend->list(storage_.key)) {
    if (entry.link || !entry.directory || entry.name.starts_with(".") || iteration_of(entry.name)) continue;
    if (exists(root_ / entry.name / completion_marker)) out.push_back(root_ / entry.name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

CAIRN_DECL std::optional<std::string> save_directory::problem(std::int64_t iteration) const {
  auto dir = path(iteration);
  auto marker = dir / completion_marker;
  try {
    if (!exists(marker)) return "no completion marker: the save did not finish";
    auto document = detail::read_json(marker, max_config_file_size);
    auto const* files = document.is_object() ? document.as_object().if_contains("files") : nullptr;
    if (!files || !files->is_object()) return marker.string() + ": no \"files\" object";
    auto const* recorded = document.as_object().if_contains("iteration");
    if (recorded && !recorded->is_int64())
      return marker.string() + ": \"iteration\" is " + detail::compact(*recorded) + ", not an integer";
    if (recorded && recorded->as_int64() != iteration)
      return marker.string() + ": the save of another iteration (" + detail::compact(*recorded) + ")";
    for (auto const& [name, entry] : files->as_object()) {
      auto file = dir / std::string(name);
      // {"size": n, "xxh3": "…"}; markers written before header checksums hold the size alone.
      auto const* size = entry.is_object() ? entry.as_object().if_contains("size") : &entry;
      auto const* hash = entry.is_object() ? entry.as_object().if_contains("xxh3") : nullptr;
      if (name.empty() || std::string_view(name).find('/') != std::string_view::npos || !size || !size->is_int64() ||
          (entry.is_object() && (!hash || !hash->is_string())))
        return marker.string() + ": malformed entry '" + std::string(name) + "'";
      auto where = io::open_location(file.string());
      std::optional<std::uint64_t> actual;
      try {
        actual = where.backend->size(where.key);
      } catch (io::io_error const&) {
        if (where.backend->guarantees().directories)
          actual.reset(); // not a regular file: as missing
        else
          throw;
      }
      if (!actual) return file.string() + ": listed by the marker but missing";
      if (static_cast<std::int64_t>(*actual) != size->as_int64())
        return file.string() + ": " + std::to_string(*actual) + " bytes, the marker says " +
               std::to_string(size->as_int64());
      if (hash && detail::identity_checksum(file) != std::string_view(hash->as_string()))
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

CAIRN_DECL std::vector<std::string> save_directory::clean() {
  std::vector<std::string> report;
  auto remove = [&](std::filesystem::path const& dir) { storage_.backend->remove_tree(key_of(dir)); };
  for (auto const& [iteration, dir] : numbered(".replaced-")) {
    if (!exists(path(iteration) / completion_marker) && exists(dir / completion_marker)) {
      remove(path(iteration));
      io::rename_path(dir, path(iteration));
      report.push_back("restored " + path(iteration).string() + ": its replacement did not finish");
    } else {
      remove(dir);
      report.push_back("removed " + dir.string() + ": left by an interrupted save");
    }
  }
  for (auto const& [iteration, dir] : numbered(".partial-")) {
    remove(dir);
    report.push_back("removed " + dir.string() + ": left by an interrupted save");
  }
  for (auto const& [iteration, dir] : numbered(""))
    if (!exists(dir / completion_marker)) {
      remove(dir);
      report.push_back("removed " + dir.string() + ": it has no completion marker");
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
  auto dir = staging(iteration);
  if (!renames() && exists(dir / completion_marker)) {
    // Replaced in place: its marker goes first, so that what follows is plainly incomplete.
    auto marker = io::open_location((dir / completion_marker).string());
    marker.backend->remove(marker.key);
  }
  storage_.backend->remove_tree(key_of(dir));
  if (storage_.backend->guarantees().directories) io::make_directories(dir);
  return dir;
}

CAIRN_DECL void save_directory::commit(std::int64_t iteration, boost::json::object info) {
  auto from = staging(iteration), to = path(iteration);
  boost::json::object files;
  for (auto const& entry : storage_.backend->list(key_of(from)))
    if (!entry.directory && !entry.link)
      files[entry.name] = {{"size", entry.size}, {"xxh3", detail::identity_checksum(from / entry.name)}};
  info["iteration"] = iteration;
  info["files"] = std::move(files);
  auto text = detail::pretty(info);
  if (!renames()) {
    // No rename: every file is confirmed stored (each writer's commit returned), and the marker,
    // written last, is what makes the save complete.
    auto marker = io::open_location((to / completion_marker).string());
    marker.backend->write(marker.key, std::as_bytes(std::span(text)));
    return;
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
  if (replacing) io::remove_tree(replaced(iteration));
}

CAIRN_DECL bool save_directory::finite(std::int64_t iteration) const {
  try {
    auto document = detail::read_json(path(iteration) / completion_marker, max_config_file_size);
    auto const* object = document.if_object();
    if (!object) return false;
    auto const* flag = object->if_contains("finite");
    return !flag || (flag->is_bool() && flag->as_bool());
  } catch (std::exception const&) {
    return false;
  }
}

CAIRN_DECL void save_directory::remove(std::int64_t iteration) {
  auto dir = path(iteration);
  auto marker = dir / completion_marker;
  if (!storage_.backend->guarantees().directories) {
    // Marker first: a save interrupted while being removed is plainly incomplete.
    auto where = io::open_location(marker.string());
    where.backend->remove(where.key);
    storage_.backend->remove_tree(key_of(dir));
    return;
  }
  if (std::filesystem::is_symlink(dir)) throw io::io_error(dir, "a symbolic link: not removed");
  if (std::filesystem::exists(marker)) {
    io::detail::fault_point("remove", marker);
    if (::unlink(marker.c_str()) != 0) throw io::system_error(marker, "cannot remove");
    io::fsync_directory(dir);
  }
  io::remove_tree(dir);
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
  auto iteration = save_directory::iteration_of(dir.filename().string());
  auto parent = dir.parent_path().filename().string();
  bool in_saves = parent == experiment_layout::checkpoints_folder || parent == experiment_layout::exports_folder;
  if (!detail::present(dir / completion_marker) && !(iteration && in_saves)) return {};
  if (!iteration) return {true, dir.string() + ": a completion marker outside a directory of saves"};
  auto problem = save_directory(dir.parent_path()).problem(*iteration);
  if (problem && problem->find('/') == std::string::npos) *problem = dir.string() + ": " + *problem;
  return {true, problem};
}

} // namespace cairn
