#pragma once

// A directory of saves named by iteration (an experiment's checkpoints/ and export/), and the
// durable commit that makes a save complete. No libtorch: tools use it too.
//
//   <root>/<iteration>/                 a save; complete only when it holds the marker
//   <root>/<iteration>/complete.json    the completion marker, written last
//   <root>/.partial-<iteration>/        a save being written
//   <root>/.replaced-<iteration>/       a complete save being replaced by a new one
//
// A save is written under .partial-<iteration>, then renamed to <iteration>, then its marker is
// written and fsynced. A crash at any instant leaves the earlier saves as they were, and at most
// a leftover that `clean()` removes: nothing without a marker is ever taken for complete.

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

namespace cairn {

namespace detail {

/// A checksum of what identifies a file of a save: the header of a safetensors file (its length
/// and JSON, which record the save, the rank and every tensor's checksum), the first 16 MiB of
/// any other file (metadata.json, config.json and indexes are far smaller).
inline std::string identity_checksum(std::filesystem::path const& file) {
  io::mapped_file mapped(file);
  auto bytes = mapped.bytes();
  std::uint64_t n = std::min<std::uint64_t>(bytes.size(), std::uint64_t{16} << 20);
  if (file.extension() == ".safetensors" && bytes.size() >= 8)
    n = std::min<std::uint64_t>(bytes.size(), 8 + std::min(io::detail::read_le64(bytes), io::max_header_size));
  return io::to_hex(io::checksum_of(bytes.first(static_cast<std::size_t>(n))));
}

} // namespace detail

/// The file whose presence makes a save complete.
inline constexpr char const* completion_marker = "complete.json";

/// The folders of an experiment directory: `<experiment_dir>/checkpoints/<iteration>/` for
/// resume checkpoints, `<experiment_dir>/export/<iteration>/` for exports.
struct experiment_layout {
  static constexpr char const* checkpoints_folder = "checkpoints";
  static constexpr char const* exports_folder = "export";

  std::filesystem::path dir;

  [[nodiscard]] std::filesystem::path checkpoints() const { return dir / checkpoints_folder; }
  [[nodiscard]] std::filesystem::path exports() const { return dir / exports_folder; }
};

class save_directory {
public:
  explicit save_directory(std::filesystem::path root) : root_(std::move(root)) {}

  [[nodiscard]] std::filesystem::path const& root() const noexcept { return root_; }
  [[nodiscard]] std::filesystem::path path(std::int64_t iteration) const { return root_ / std::to_string(iteration); }
  [[nodiscard]] std::filesystem::path staging(std::int64_t iteration) const {
    return root_ / (".partial-" + std::to_string(iteration));
  }
  [[nodiscard]] std::filesystem::path replaced(std::int64_t iteration) const {
    return root_ / (".replaced-" + std::to_string(iteration));
  }

  /// The iterations of the saves holding a marker, ascending.
  [[nodiscard]] std::vector<std::int64_t> complete() const {
    std::vector<std::int64_t> out;
    for (auto const& [iteration, dir] : numbered(""))
      if (std::filesystem::exists(dir / completion_marker)) out.push_back(iteration);
    std::sort(out.begin(), out.end());
    return out;
  }

  /// Why the save at `iteration` is not complete and sound, or nothing when it is: its marker
  /// must parse, and every file it lists must be there with the listed size and the listed
  /// checksum of its header (so a file of another save, or of another rank, is not taken for
  /// this one's). The checksums of the contents are checked by loading or by `cairn verify`.
  [[nodiscard]] std::optional<std::string> problem(std::int64_t iteration) const {
    auto dir = path(iteration);
    auto marker = dir / completion_marker;
    if (!std::filesystem::exists(marker)) return "no completion marker: the save did not finish";
    try {
      auto document = read_json_file(marker);
      auto const* files = document.is_object() ? document.as_object().if_contains("files") : nullptr;
      if (!files || !files->is_object()) return marker.string() + ": no \"files\" object";
      auto const* recorded = document.as_object().if_contains("iteration");
      if (recorded && (!recorded->is_int64() || recorded->as_int64() != iteration))
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

  /// Removes what interrupted saves left: staging directories and saves without a marker. A
  /// complete save that was being replaced is put back when its replacement did not finish.
  /// Returns what was removed or restored, for the caller to report.
  std::vector<std::string> clean() {
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

  /// An empty staging directory for the save at `iteration`, replacing a stale one.
  std::filesystem::path begin(std::int64_t iteration) {
    auto dir = staging(iteration);
    io::remove_tree(dir);
    io::make_directories(dir);
    return dir;
  }

  /// Makes the staged save at `iteration` complete: fsyncs the staging directory, renames it to
  /// its final name (a complete save already there is set aside until the new one is complete),
  /// and writes the marker, listing every file with its size and a checksum of its header, plus
  /// `info`. Every file must
  /// already be durable (cairn's writers fsync each file before naming it).
  void commit(std::int64_t iteration, boost::json::object info = {}) {
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

  /// Removes the save at `iteration`: its marker first (durably), so that a crash midway
  /// leaves a save that is plainly incomplete, then everything else.
  void remove(std::int64_t iteration) {
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

  /// The iteration a directory named `name` holds, when `name` is one (decimal digits, no sign,
  /// no leading zero).
  [[nodiscard]] static std::optional<std::int64_t> iteration_of(std::string_view name) {
    std::int64_t iteration = 0;
    auto [end, status] = std::from_chars(name.data(), name.data() + name.size(), iteration);
    if (status != std::errc() || end != name.data() + name.size() || name.empty() || iteration < 0 ||
        std::to_string(iteration) != name)
      return std::nullopt;
    return iteration;
  }

private:
  /// Subdirectories named `<prefix><iteration>`.
  [[nodiscard]] std::vector<std::pair<std::int64_t, std::filesystem::path>> numbered(std::string_view prefix) const {
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

  std::filesystem::path root_;
};

/// Whether a directory is one save of an experiment's directory of saves, and when it is, why
/// it is not complete and sound (nothing when it is).
struct save_completeness {
  bool is_save = false;
  std::optional<std::string> problem;
};

/// The completeness of `path` as a save: a directory named by an iteration under an
/// experiment's `checkpoints/` or `export/`, or any directory holding a completion marker.
inline save_completeness save_status(std::filesystem::path const& path) {
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
