// Definitions of <cairn/checkpoint/verify.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/detail/identity.hpp>
#include <cairn/checkpoint/detail/save_files.hpp>
#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/verify.hpp>
#include <cairn/config/json.hpp>
#include <cairn/io/index.hpp>
#include <cairn/io/safetensors.hpp>
#include <cairn/progress.hpp>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <vector>

namespace cairn {

CAIRN_DECL std::vector<std::filesystem::path> safetensors_files(std::filesystem::path const& path) {
  if (!detail::is_folder(path)) return {path};
  std::vector<std::filesystem::path> files;
  for (auto const& entry : detail::folder_entries(path))
    if (std::filesystem::path(entry.name).extension() == ".safetensors") files.push_back(path / entry.name);
  std::sort(files.begin(), files.end());
  return files;
}

CAIRN_DECL std::optional<std::string> not_a_checkpoint(std::filesystem::path const& path) {
  if (!detail::is_folder(path) || detect_format(path)) return std::nullopt;
  bool experiment =
      detail::is_folder(experiment_layout{path}.checkpoints()) || detail::is_folder(experiment_layout{path}.exports());
  return path.string() + (experiment ? ": an experiment directory; name one of its saves (checkpoints/<iteration> "
                                       "or export/<iteration>)"
                                     : ": holds no checkpoint (no metadata.json, state_dict index or config.json)");
}

} // namespace cairn

namespace cairn::detail {

CAIRN_DECL void verify_distributed_layout(std::filesystem::path const& path, checkpoint_metadata const& metadata,
                                          std::vector<std::string>& problems) {
  if (!metadata.rules) // rules tile their parameters by construction
    for (auto const& p : tiling_problems(metadata.ranks))
      problems.push_back(formats::metadata_file(path).string() + ": " + p);
  saved_writers writers(metadata);
  for (std::int64_t r = 0; r < metadata.world_size(); ++r) {
    auto file_path = formats::rank_file(path, static_cast<int>(r));
    if (!present(file_path)) {
      problems.push_back(file_path.string() + ": missing (rank " + std::to_string(r) + " of " +
                         std::to_string(metadata.world_size()) + ")");
      continue;
    }
    try {
      io::safetensors_file file(file_path);
      if (auto problem = identity_problem(file, metadata, static_cast<int>(r)))
        problems.push_back(file_path.string() + ": " + *problem);
      for (auto const& p : metadata.layout_of(r).parameters) {
        if (p.replicated && !writers.every_holder() && writers.of(p.name, p.shard) != static_cast<int>(r))
          continue; // in its writer's file
        for (auto const& shard : metadata.shard_names) {
          auto name = tensor_name(p.name, shard);
          auto const* t = file.find(name);
          if (!t)
            problems.push_back(file_path.string() + ": tensor '" + name + "' is missing");
          else if (t->numel() != p.shard.numel())
            problems.push_back(file_path.string() + ": tensor '" + name + "' holds " + std::to_string(t->numel()) +
                               " elements, its layout " + std::to_string(p.shard.numel()));
          else if (t->dtype != p.dtype)
            problems.push_back(file_path.string() + ": tensor '" + name + "' is stored as " +
                               std::string(io::name(t->dtype)) + ", its layout says " + std::string(io::name(p.dtype)));
        }
      }
    } catch (error const&) {
      // the file's own problem is reported with the files
    }
  }
}

CAIRN_DECL void verify_state_dict_layout(std::filesystem::path const& path, checkpoint_metadata const& metadata,
                                         std::vector<std::string>& problems) {
  auto index_path = formats::state_dict_index(path);
  for (auto const& p : tiling_problems({rank_layout{metadata.parameters}}))
    problems.push_back(index_path.string() + ": " + p);
  io::safetensors_index index;
  try {
    index = io::read_index(index_path);
  } catch (error const& e) {
    problems.emplace_back(e.what());
    return;
  }
  std::map<std::string, std::unique_ptr<io::safetensors_file>> files; // opened once, null when unreadable
  auto open = [&](std::string const& name) -> io::safetensors_file const* {
    auto [at, added] = files.try_emplace(name);
    if (added) {
      try {
        at->second = std::make_unique<io::safetensors_file>(path / name);
      } catch (error const&) {
        // the file's own problem is reported with the files
      }
    }
    return at->second.get();
  };
  // Every tensor the metadata lists: in the index, in its file, with the listed shape and type.
  std::set<std::string> listed;
  for (auto const& p : metadata.parameters)
    for (auto const& shard : metadata.shard_names) {
      auto name = tensor_name(p.name, shard);
      listed.insert(name);
      auto entry = index.weight_map.find(name);
      if (entry == index.weight_map.end()) {
        problems.push_back(index_path.string() + ": '" + name + "' is not in its weight_map");
        continue;
      }
      auto const* file = open(entry->second);
      auto const* t = file ? file->find(name) : nullptr;
      if (!t) continue; // reported with the index entries, or the file's own problem with the files
      if (t->shape != p.shape)
        problems.push_back(file->path().string() + ": tensor '" + name + "' has shape " + shape_text(t->shape) +
                           ", the index says " + shape_text(p.shape));
      else if (t->dtype != p.dtype)
        problems.push_back(file->path().string() + ": tensor '" + name + "' is stored as " +
                           std::string(io::name(t->dtype)) + ", the index says " + std::string(io::name(p.dtype)));
    }
  for (auto const& [name, file_name] : index.weight_map)
    if (!listed.contains(name))
      problems.push_back(index_path.string() + ": weight_map lists '" + name +
                         "', which its metadata does not (no such parameter or state shard)");
  // Every file belongs to this save and holds only what the index maps to it.
  for (auto const& file_path : safetensors_files(path)) {
    auto const* file = open(file_path.filename().string());
    if (!file) continue;
    if (auto problem = identity_problem(*file, metadata)) problems.push_back(file_path.string() + ": " + *problem);
    for (auto const& t : file->tensors()) {
      auto entry = index.weight_map.find(t.name);
      if (entry == index.weight_map.end() || entry->second != file_path.filename().string())
        problems.push_back(file_path.string() + ": holds '" + t.name + "', which the index does not map to it");
    }
  }
}

CAIRN_DECL void verify_external_config(std::filesystem::path const& path, std::vector<std::string>& problems) {
  auto file = formats::external_config(path);
  try {
    auto document = cairn::detail::read_json(file, max_config_file_size);
    if (!document.is_object())
      problems.push_back(file.string() + ": must be a JSON object");
    else if (auto const* type = document.get_object().if_contains("model_type"); !type || !type->is_string())
      problems.push_back(file.string() + ": names no model_type (a string): no converter can read it");
  } catch (error const& e) {
    problems.emplace_back(e.what());
  }
}

CAIRN_DECL void verify_indexes(std::filesystem::path const& dir, std::vector<std::string>& problems) {
  std::vector<io::listed_entry> listed;
  try {
    listed = folder_entries(dir);
  } catch (error const& e) {
    problems.emplace_back(e.what());
  }
  for (auto const& entry : listed) {
    auto index_path = dir / entry.name;
    if (!entry.name.ends_with(".safetensors.index.json")) continue;
    try {
      auto index = io::read_index(index_path);
      std::map<std::string, std::unique_ptr<io::safetensors_file>> files; // each opened once
      std::set<std::string> missing;
      for (auto const& [tensor, file_name] : index.weight_map) {
        auto [at, added] = files.try_emplace(file_name);
        if (added) {
          if (!present(dir / file_name)) {
            missing.insert(file_name);
          } else {
            try {
              at->second = std::make_unique<io::safetensors_file>(dir / file_name);
            } catch (error const&) {
              // the file's own problem is reported with the files
            }
          }
        }
        if (missing.contains(file_name))
          problems.push_back(index_path.string() + ": '" + tensor + "' is in " + file_name + ", which is missing");
        else if (at->second && !at->second->find(tensor))
          problems.push_back(index_path.string() + ": '" + tensor + "' is not in " + file_name);
      }
      // And every tensor of those files where the index says: a second copy elsewhere is one
      // reader loads and another does not (transformers loads every file, the last copy winning).
      bool external = index_path.filename() == "model.safetensors.index.json"; // cairn's own: checked with its metadata
      for (auto const& [file_name, file] : files) {
        if (!file || !external) continue;
        for (auto const& t : file->tensors()) {
          auto mapped = index.weight_map.find(t.name);
          if (mapped == index.weight_map.end())
            problems.push_back(file->path().string() + ": holds '" + t.name + "', which " +
                               index_path.filename().string() + " does not map");
          else if (std::filesystem::path(mapped->second).lexically_normal() !=
                   std::filesystem::path(file_name).lexically_normal())
            problems.push_back(file->path().string() + ": holds a second copy of '" + t.name + "', which " +
                               index_path.filename().string() + " maps to " + mapped->second);
        }
      }
    } catch (error const& e) {
      problems.emplace_back(e.what());
    }
  }
}

CAIRN_DECL void verify_checksums(std::filesystem::path const& file_path, bool own_format, verify_options const& options,
                                 verification_report& report) {
  try {
    io::safetensors_file file(file_path);
    // In the file's order: an object is then read front to back in windows of 64 MiB (few
    // requests for many small tensors), each tensor let go once checked.
    std::vector<io::tensor_info const*> in_order;
    for (auto const& t : file.tensors()) in_order.push_back(&t);
    std::sort(in_order.begin(), in_order.end(), [](auto const* a, auto const* b) { return a->begin < b->begin; });
    file.read_ahead(std::uint64_t{64} << 20);
    std::size_t unchecked = 0;
    for (auto const* t : in_order) {
      try {
        if (file.metadata().contains(io::checksum_key(t->name)))
          file.verify(*t);
        else
          ++unchecked;
        file.release(*t);
        progress_scope::count(t->end - t->begin);
      } catch (error const& e) {
        report.problems.emplace_back(e.what());
      }
    }
    std::vector<std::string> item_problems; // the items of a rank, checksummed as its tensors are
    (void)read_items(file.metadata(), item_problems);
    for (auto const& problem : item_problems) report.problems.push_back(file_path.string() + ": " + problem);
    bool some_recorded = unchecked < file.tensors().size();
    if (unchecked > 0 && (own_format || some_recorded || options.require_checksums))
      report.problems.push_back(file_path.string() + ": " + std::to_string(unchecked) + " of its " +
                                std::to_string(file.tensors().size()) + " tensors have no recorded checksum");
    else if (unchecked > 0)
      report.notes.push_back(file_path.string() + ": no checksums recorded (not written by cairn?): its "
                                                  "structure is checked, its contents cannot be");
    ++report.files;
  } catch (error const& e) {
    report.problems.emplace_back(e.what());
  }
}

/// What a load would check of the checkpoint's structure: layouts against files, indexes against
/// files, the config of an external checkpoint.
inline void verify_structure(std::filesystem::path const& path, std::optional<checkpoint_format> format,
                             std::vector<std::string>& problems) {
  try {
    if (format == checkpoint_format::distributed)
      verify_distributed_layout(path, read_stored_metadata(path, *format), problems);
    else if (format == checkpoint_format::state_dict)
      verify_state_dict_layout(path, read_stored_metadata(path, *format), problems);
    else if (format == checkpoint_format::external)
      verify_external_config(path, problems);
  } catch (error const& e) {
    problems.emplace_back(e.what());
  }
  if (auto status = save_status(path); status.is_save && status.problem) problems.push_back(*status.problem);
  if (is_folder(path)) verify_indexes(path, problems);
}

} // namespace cairn::detail

namespace cairn {

CAIRN_DECL verification_report verify_checkpoint(std::filesystem::path const& given, verify_options options) {
  verification_report report;
  auto& problems = report.problems;
  try {
    auto path = resolve_save(given); // a save on a store: its newest complete generation
    if (!detail::present(path) && !detail::is_folder(path)) {
      problems.push_back(path.string() + ": no such file or directory");
      return report;
    }
    if (auto problem = not_a_checkpoint(path)) {
      problems.push_back(*problem);
      return report;
    }
    auto format = detect_format(path);
    bool own_format = format == checkpoint_format::distributed || format == checkpoint_format::state_dict;
    auto files = safetensors_files(path);
    std::uint64_t total = 0;
    for (auto const& f : files)
      if (auto size = detail::stored_size(f)) total += *size;
    progress_scope progress("verifying", path.string(), total);
    for (auto const& file_path : files) detail::verify_checksums(file_path, own_format, options, report);
    detail::verify_structure(path, format, problems);
  } catch (std::filesystem::filesystem_error const& e) {
    problems.emplace_back(e.what());
  } catch (error const& e) {
    problems.emplace_back(e.what());
  }
  return report;
}

} // namespace cairn
