// Definitions of <cairn/checkpoint/verify.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/files.hpp>
#include <cairn/checkpoint/verify.hpp>
#include <cairn/io/index.hpp>
#include <cairn/io/safetensors.hpp>
#include <cairn/progress.hpp>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace cairn {

CAIRN_DECL std::vector<std::filesystem::path> safetensors_files(std::filesystem::path const& path) {
  if (!std::filesystem::is_directory(path)) return {path};
  std::vector<std::filesystem::path> files;
  for (auto const& entry : std::filesystem::directory_iterator(path))
    if (entry.path().extension() == ".safetensors") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

CAIRN_DECL std::optional<std::string> not_a_checkpoint(std::filesystem::path const& path) {
  if (!std::filesystem::is_directory(path) || detect_format(path)) return std::nullopt;
  bool experiment = std::filesystem::is_directory(experiment_layout{path}.checkpoints()) ||
                    std::filesystem::is_directory(experiment_layout{path}.exports());
  return path.string() + (experiment ? ": an experiment directory; name one of its saves (checkpoints/<iteration> "
                                       "or export/<iteration>)"
                                     : ": holds no checkpoint (no metadata.json, state_dict index or config.json)");
}

} // namespace cairn

namespace cairn::detail {

CAIRN_DECL void verify_distributed_layout(std::filesystem::path const& path, checkpoint_metadata const& metadata,
                                          std::vector<std::string>& problems) {
  for (auto const& p : tiling_problems(metadata.ranks))
    problems.push_back(formats::metadata_file(path).string() + ": " + p);
  for (std::size_t r = 0; r < metadata.ranks.size(); ++r) {
    auto file_path = formats::rank_file(path, static_cast<int>(r));
    if (!std::filesystem::exists(file_path)) {
      problems.push_back(file_path.string() + ": missing (rank " + std::to_string(r) + " of " +
                         std::to_string(metadata.ranks.size()) + ")");
      continue;
    }
    try {
      io::safetensors_file file(file_path);
      if (auto problem = identity_problem(file, metadata, static_cast<int>(r)))
        problems.push_back(file_path.string() + ": " + *problem);
      for (auto const& p : metadata.ranks[r].parameters) {
        if (p.replicated && r != 0) continue;
        for (auto const& shard : metadata.shard_names) {
          auto const* t = file.find(tensor_name(p.name, shard));
          if (!t)
            problems.push_back(file_path.string() + ": tensor '" + tensor_name(p.name, shard) + "' is missing");
          else if (t->numel() != p.shard.numel())
            problems.push_back(file_path.string() + ": tensor '" + t->name + "' holds " + std::to_string(t->numel()) +
                               " elements, its layout " + std::to_string(p.shard.numel()));
        }
      }
    } catch (error const&) {
      // the file's own problem is reported with the files
    }
  }
}

CAIRN_DECL void verify_state_dict_layout(std::filesystem::path const& path, checkpoint_metadata const& metadata,
                                         std::vector<std::string>& problems) {
  for (auto const& p : tiling_problems({rank_layout{metadata.parameters}}))
    problems.push_back(formats::state_dict_index(path).string() + ": " + p);
  for (auto const& file_path : safetensors_files(path)) {
    try {
      if (auto problem = identity_problem(io::safetensors_file(file_path), metadata))
        problems.push_back(file_path.string() + ": " + *problem);
    } catch (error const&) {
      // the file's own problem is reported with the files
    }
  }
}

CAIRN_DECL void verify_indexes(std::filesystem::path const& dir, std::vector<std::string>& problems) {
  for (auto const& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.path().string().ends_with(".safetensors.index.json")) continue;
    try {
      auto index = io::read_index(entry.path());
      for (auto const& [tensor, file_name] : index.weight_map) {
        auto file_path = dir / file_name;
        if (!std::filesystem::exists(file_path)) {
          problems.push_back(entry.path().string() + ": '" + tensor + "' is in " + file_name + ", which is missing");
          continue;
        }
        try {
          if (!io::safetensors_file(file_path).find(tensor))
            problems.push_back(entry.path().string() + ": '" + tensor + "' is not in " + file_name);
        } catch (error const&) {
          // the file's own problem is reported with the files
        }
      }
    } catch (error const& e) {
      problems.emplace_back(e.what());
    }
  }
}

} // namespace cairn::detail

namespace cairn {

CAIRN_DECL verification_report verify_checkpoint(std::filesystem::path const& path) {
  verification_report report;
  auto& problems = report.problems;
  if (!std::filesystem::exists(path)) {
    problems.push_back(path.string() + ": no such file or directory");
    return report;
  }
  if (auto problem = not_a_checkpoint(path)) {
    problems.push_back(*problem);
    return report;
  }
  auto files = safetensors_files(path);
  std::uint64_t total = 0;
  for (auto const& f : files) {
    std::error_code ec;
    auto size = std::filesystem::file_size(f, ec);
    if (!ec) total += size;
  }
  progress_scope progress("verifying", path.string(), total);
  for (auto const& file_path : files) {
    try {
      io::safetensors_file file(file_path);
      if (!file.has_checksums()) problems.push_back(file_path.string() + ": no checksums recorded");
      for (auto const& t : file.tensors()) {
        try {
          if (file.metadata().contains(io::checksum_key(t.name))) file.verify(t);
          progress_scope::count(t.end - t.begin);
        } catch (error const& e) {
          problems.emplace_back(e.what());
        }
      }
      ++report.files;
    } catch (error const& e) {
      problems.emplace_back(e.what());
    }
  }
  try {
    auto format = detect_format(path);
    if (format == checkpoint_format::distributed)
      detail::verify_distributed_layout(path, read_stored_metadata(path, *format), problems);
    else if (format == checkpoint_format::state_dict)
      detail::verify_state_dict_layout(path, read_stored_metadata(path, *format), problems);
  } catch (error const& e) {
    problems.emplace_back(e.what());
  }
  if (auto status = save_status(path); status.is_save && status.problem) problems.push_back(*status.problem);
  if (std::filesystem::is_directory(path)) detail::verify_indexes(path, problems);
  return report;
}

} // namespace cairn
