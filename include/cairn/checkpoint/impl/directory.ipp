// Definitions of <cairn/checkpoint/directory.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/directory.hpp>
#include <cairn/config/detail/pretty.hpp>
#include <cairn/config/json.hpp>
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
  io::mapped_file mapped(file);
  auto bytes = mapped.bytes();
  std::uint64_t n = std::min<std::uint64_t>(bytes.size(), std::uint64_t{16} << 20);
  if (file.extension() == ".safetensors" && bytes.size() >= 8)
    n = std::min<std::uint64_t>(bytes.size(), 8 + std::min(io::detail::read_le64(bytes), io::max_header_size));
  return io::to_hex(io::checksum_of(bytes.first(static_cast<std::size_t>(n))));
}

} // namespace cairn::detail

namespace cairn {

CAIRN_DECL std::vector<std::int64_t> save_directory::complete() const {
  std::vector<std::int64_t> out;
  for (auto const& [iteration, dir] : numbered(""))
    if (std::filesystem::exists(dir / completion_marker)) out.push_back(iteration);
  std::sort(out.begin(), out.end());
  return out;
}

CAIRN_DECL std::vector<std::filesystem::path> save_directory::misnamed() const {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    auto name = it->path().filename().string();
    if (it->is_symlink(ec) || !it->is_directory(ec) || name.starts_with(".") || iteration_of(name)) continue;
    if (std::filesystem::exists(it->path() / completion_marker, ec)) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

CAIRN_DECL std::optional<std::string> save_directory::problem(std::int64_t iteration) const {
  auto dir = path(iteration);
  auto marker = dir / completion_marker;
  if (!std::filesystem::exists(marker)) return "no completion marker: the save did not finish";
  try {
    auto document = read_json_file(marker, max_config_file_size);
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
      std::error_code ec;
      auto actual = std::filesystem::file_size(file, ec);
      if (ec) return file.string() + ": listed by the marker but missing";
      if (static_cast<std::int64_t>(actual) != size->as_int64())
        return file.string() + ": " + std::to_string(actual) + " bytes, the marker says " +
               std::to_string(size->as_int64());
      if (hash && detail::identity_checksum(file) != std::string_view(hash->as_string()))
        return file.string() + ": its header differs from the one the marker recorded (a file of another save "
                               "or rank?)";
    }
  } catch (error const& e) {
    return e.what();
  }
  return std::nullopt;
}

CAIRN_DECL std::vector<std::string> save_directory::clean() {
  std::vector<std::string> report;
  for (auto const& [iteration, dir] : numbered(".replaced-")) {
    if (!std::filesystem::exists(path(iteration) / completion_marker) &&
        std::filesystem::exists(dir / completion_marker)) {
      io::remove_tree(path(iteration));
      io::rename_path(dir, path(iteration));
      report.push_back("restored " + path(iteration).string() + ": its replacement did not finish");
    } else {
      io::remove_tree(dir);
      report.push_back("removed " + dir.string() + ": left by an interrupted save");
    }
  }
  for (auto const& [iteration, dir] : numbered(".partial-")) {
    io::remove_tree(dir);
    report.push_back("removed " + dir.string() + ": left by an interrupted save");
  }
  for (auto const& [iteration, dir] : numbered(""))
    if (!std::filesystem::exists(dir / completion_marker)) {
      io::remove_tree(dir);
      report.push_back("removed " + dir.string() + ": it has no completion marker");
    }
  std::error_code ec;
  for (auto const& entry : std::filesystem::directory_iterator(root_, ec))
    if (entry.is_symlink() && iteration_of(entry.path().filename().string()))
      report.push_back("left " + entry.path().string() +
                       " alone: a symbolic link is not one of this directory's saves (never resumed from "
                       "nor deleted)");
  if (!report.empty()) io::fsync_directory(root_);
  return report;
}

CAIRN_DECL std::filesystem::path save_directory::begin(std::int64_t iteration) {
  auto dir = staging(iteration);
  io::remove_tree(dir);
  io::make_directories(dir);
  return dir;
}

CAIRN_DECL void save_directory::commit(std::int64_t iteration, boost::json::object info) {
  auto from = staging(iteration), to = path(iteration);
  boost::json::object files;
  for (auto const& entry : std::filesystem::directory_iterator(from))
    if (entry.is_regular_file())
      files[entry.path().filename().string()] = {{"size", entry.file_size()},
                                                 {"xxh3", detail::identity_checksum(entry.path())}};
  io::fsync_directory(from);
  bool replacing = std::filesystem::exists(to);
  if (replacing) {
    io::remove_tree(replaced(iteration));
    io::rename_path(to, replaced(iteration));
  }
  io::rename_path(from, to);
  io::fsync_directory(root_);
  info["iteration"] = iteration;
  info["files"] = std::move(files);
  auto text = detail::pretty(info);
  io::write_file_atomically(to / completion_marker, std::as_bytes(std::span(text)));
  if (replacing) io::remove_tree(replaced(iteration));
}

CAIRN_DECL bool save_directory::finite(std::int64_t iteration) const {
  try {
    auto document = read_json_file(path(iteration) / completion_marker, max_config_file_size);
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
  if (std::filesystem::is_symlink(dir)) throw io::io_error(dir, "a symbolic link: not removed");
  auto marker = dir / completion_marker;
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
  std::error_code ec;
  if (!std::filesystem::is_directory(root_, ec)) return out;
  for (auto const& entry : std::filesystem::directory_iterator(root_, ec)) {
    auto name = entry.path().filename().string();
    // A symbolic link is never a save of this directory: following it could delete another
    // run's files.
    if (entry.is_symlink() || !entry.is_directory() || !name.starts_with(prefix)) continue;
    if (auto iteration = iteration_of(std::string_view(name).substr(prefix.size())))
      out.emplace_back(*iteration, entry.path());
  }
  return out;
}

CAIRN_DECL detail::save_completeness save_status(std::filesystem::path const& path) {
  auto dir = path.lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();
  auto iteration = save_directory::iteration_of(dir.filename().string());
  auto parent = dir.parent_path().filename().string();
  bool in_saves = parent == experiment_layout::checkpoints_folder || parent == experiment_layout::exports_folder;
  if (!std::filesystem::exists(dir / completion_marker) && !(iteration && in_saves)) return {};
  if (!iteration) return {true, dir.string() + ": a completion marker outside a directory of saves"};
  auto problem = save_directory(dir.parent_path()).problem(*iteration);
  if (problem && problem->find('/') == std::string::npos) *problem = dir.string() + ": " + *problem;
  return {true, problem};
}

} // namespace cairn
