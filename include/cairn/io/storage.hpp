#pragma once

// What a filesystem guarantees of the operations cairn's durability rests on, checked on the
// filesystem itself before a run writes to it: `cairn check-storage DIR`. No libtorch.

#include <cairn/detail/decl.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace cairn::io {

/// One property of a filesystem: whether it holds, what was seen, and what cairn loses when it
/// does not.
struct storage_check {
  std::string name;
  bool holds = false;
  std::string detail;
  std::string consequence; ///< when it does not hold
};

/// What `check_storage` found.
struct storage_report {
  std::filesystem::path directory;
  std::string filesystem;       ///< "ext4", "tmpfs", "nfs", … (from statfs)
  std::uint64_t free_bytes = 0; ///< available to this user
  std::vector<storage_check> checks;

  [[nodiscard]] bool ok() const noexcept {
    for (auto const& c : checks)
      if (!c.holds) return false;
    return true;
  }
};

/// Checks, in a scratch directory inside `dir` (created if needed, removed after), what cairn's
/// guarantees rest on: a directory can be created and written; fsync of a file and of a
/// directory succeed; rename replaces a file atomically and moves a directory; flock excludes a
/// second process (of this host: a second host cannot be checked from one); what one process
/// writes another reads, through read and through mmap; free space. An `s3://bucket/prefix`
/// is checked as an object store (`check_object_store`). Throws io_error only when `dir` cannot
/// be used at all.
CAIRN_DECL storage_report check_storage(std::filesystem::path const& dir);

/// The report as people read it, one line a check, with the consequence of each that fails.
CAIRN_DECL std::string to_string(storage_report const& report);

} // namespace cairn::io

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/io/impl/storage.ipp>
#endif
