// build/bin/cairn: inspect and verify checkpoint files, launch local distributed runs.
#include <cairn/checkpoint/detail/files.hpp>
#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/io.hpp>

#include <boost/json/serialize.hpp>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "convert.hpp"
#include "launch.hpp"

namespace {

constexpr char const* usage = R"(usage: cairn COMMAND ...

commands:
  inspect PATH              format, completeness, metadata, config and every tensor (name, dtype,
                            shape, bytes) of a checkpoint directory or a .safetensors file, totals
  verify PATH               exit 0 if the save is complete (its completion marker, when it is one
                            of an experiment's saves) and every file intact (checksums, indexes),
                            else non-zero naming each problem
  convert input.path=... input.format=... output.path=... output.format=... [output.data_type=...]
                            convert between distributed and state_dict without the model's code
                            (keys as in the library's configs; `cairn convert --help` lists them)
  launch -n N [--port P] -- PROGRAM ARGS...
                            run N local processes with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR
                            and MASTER_PORT set; output prefixed with the rank; signals forwarded;
                            all stopped when one fails
)";

int usage_error(std::string const& message) {
  std::fprintf(stderr, "cairn: %s\n\n%s", message.c_str(), usage);
  return 2;
}

std::vector<std::filesystem::path> safetensors_files(std::filesystem::path const& path) {
  if (!std::filesystem::is_directory(path)) return {path};
  std::vector<std::filesystem::path> files;
  for (auto const& entry : std::filesystem::directory_iterator(path))
    if (entry.path().extension() == ".safetensors") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

/// The format of a checkpoint directory, from the files it holds.
std::string detect_format(std::filesystem::path const& path) {
  if (!std::filesystem::is_directory(path)) return "safetensors file";
  if (std::filesystem::exists(cairn::formats::metadata_file(path))) return "distributed";
  if (std::filesystem::exists(cairn::formats::state_dict_index(path))) return "state_dict";
  if (std::filesystem::exists(path / "config.json")) return "external";
  return "directory of safetensors files";
}

/// Whether `path` is a save of an experiment (`<dir>/checkpoints/<n>` or `<dir>/export/<n>`),
/// and if so, why it is not complete, or nothing when it is.
std::optional<std::optional<std::string>> save_problem(std::filesystem::path const& path) {
  auto dir = path.lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();
  auto name = dir.filename().string();
  auto parent = dir.parent_path().filename().string();
  bool numbered = !name.empty() && name.find_first_not_of("0123456789") == std::string::npos && name.size() < 19;
  if (!std::filesystem::exists(dir / cairn::completion_marker) &&
      !(numbered && (parent == "checkpoints" || parent == "export")))
    return std::nullopt;
  if (!numbered) return std::optional<std::string>(dir.string() + ": a completion marker outside a directory of saves");
  auto problem = cairn::save_directory(dir.parent_path()).problem(std::stoll(name));
  if (problem && problem->find('/') == std::string::npos) *problem = dir.string() + ": " + *problem;
  return problem;
}

/// The checkpoint metadata of a distributed or state_dict directory.
std::optional<cairn::checkpoint_metadata> metadata_of(std::filesystem::path const& path, std::string const& format) {
  if (format == "distributed") return cairn::detail::read_stored_metadata(path, cairn::checkpoint_format::distributed);
  if (format == "state_dict") return cairn::detail::read_stored_metadata(path, cairn::checkpoint_format::state_dict);
  return std::nullopt;
}

int inspect(std::filesystem::path const& path) {
  if (!std::filesystem::exists(path)) {
    std::fprintf(stderr, "cairn inspect: %s: no such file or directory\n", path.c_str());
    return 1;
  }
  auto format = detect_format(path);
  std::printf("format: %s\n", format.c_str());
  if (auto save = save_problem(path)) std::printf("complete: %s\n", *save ? save->value().c_str() : "yes");
  if (auto metadata = metadata_of(path, format)) {
    std::printf("version: %s\n", metadata->version.c_str());
    std::string shards;
    for (auto const& s : metadata->shard_names) shards += (shards.empty() ? "" : ", ") + s;
    std::printf("state shards: %s\n", shards.c_str());
    if (!metadata->ranks.empty()) std::printf("saved by %zu ranks\n", metadata->ranks.size());
    std::printf("metadata: %s\n", cairn::detail::compact(metadata->metadata).c_str());
    std::printf("config: %s", cairn::detail::pretty(metadata->config).c_str());
  } else if (format == "external") {
    std::printf("config: %s", cairn::detail::pretty(cairn::read_json_file(path / "config.json")).c_str());
  }
  std::uint64_t tensors = 0, elements = 0, bytes = 0;
  auto files = safetensors_files(path);
  for (auto const& file_path : files) {
    cairn::io::safetensors_file file(file_path);
    std::printf("%s\n", file_path.c_str());
    for (auto const& [key, value] : file.metadata())
      if (!key.starts_with("cairn.xxh3:")) std::printf("  metadata %s = %s\n", key.c_str(), value.c_str());
    std::printf("  checksums: %s\n", file.has_checksums() ? "recorded" : "none");
    for (auto const& t : file.tensors()) {
      std::printf("  %-40s %-7s %-20s %12llu bytes\n", t.name.c_str(), std::string(cairn::io::name(t.dtype)).c_str(),
                  cairn::detail::shape_text(t.shape).c_str(), static_cast<unsigned long long>(t.byte_size()));
      ++tensors;
      elements += t.numel();
      bytes += t.byte_size();
    }
  }
  std::printf("total: %zu files, %llu tensors, %llu elements, %llu bytes\n", files.size(),
              static_cast<unsigned long long>(tensors), static_cast<unsigned long long>(elements),
              static_cast<unsigned long long>(bytes));
  return 0;
}

int verify(std::filesystem::path const& path) {
  std::vector<std::string> problems;
  if (!std::filesystem::exists(path)) problems.push_back(path.string() + ": no such file or directory");
  std::size_t checked = 0;
  if (problems.empty()) {
    for (auto const& file_path : safetensors_files(path)) {
      try {
        cairn::io::safetensors_file file(file_path);
        if (!file.has_checksums()) problems.push_back(file_path.string() + ": no checksums recorded");
        for (auto const& t : file.tensors()) {
          try {
            if (file.metadata().contains(cairn::io::checksum_key(t.name))) file.verify(t);
          } catch (cairn::error const& e) {
            problems.emplace_back(e.what());
          }
        }
        ++checked;
      } catch (cairn::error const& e) {
        problems.emplace_back(e.what());
      }
    }
    try {
      auto format = detect_format(path);
      if (auto metadata = metadata_of(path, format); metadata && format == "distributed") {
        // Every saved rank's file, with every tensor its layout lists.
        for (std::size_t r = 0; r < metadata->ranks.size(); ++r) {
          auto file_path = cairn::formats::rank_file(path, static_cast<int>(r));
          if (!std::filesystem::exists(file_path)) {
            problems.push_back(file_path.string() + ": missing (rank " + std::to_string(r) + " of " +
                               std::to_string(metadata->ranks.size()) + ")");
            continue;
          }
          try {
            cairn::io::safetensors_file file(file_path);
            for (auto const& p : metadata->ranks[r].parameters) {
              if (p.replicated && r != 0) continue;
              for (auto const& shard : metadata->shard_names) {
                auto const* t = file.find(cairn::detail::tensor_name(p.name, shard));
                if (!t)
                  problems.push_back(file_path.string() + ": tensor '" + cairn::detail::tensor_name(p.name, shard) +
                                     "' is missing");
                else if (t->numel() != p.shard.numel())
                  problems.push_back(file_path.string() + ": tensor '" + t->name + "' holds " +
                                     std::to_string(t->numel()) + " elements, its layout " +
                                     std::to_string(p.shard.numel()));
              }
            }
          } catch (cairn::error const&) {
            // the file's own problem is reported with the files
          }
        }
      }
    } catch (cairn::error const& e) {
      problems.emplace_back(e.what());
    }
    if (auto save = save_problem(path); save && *save) problems.push_back(**save);
    if (std::filesystem::is_directory(path)) {
      for (auto const& entry : std::filesystem::directory_iterator(path)) {
        if (!entry.path().string().ends_with(".safetensors.index.json")) continue;
        try {
          auto index = cairn::io::read_index(entry.path());
          for (auto const& [tensor, file_name] : index.weight_map) {
            auto file_path = path / file_name;
            if (!std::filesystem::exists(file_path)) {
              problems.push_back(entry.path().string() + ": '" + tensor + "' is in " + file_name +
                                 ", which is missing");
              continue;
            }
            try {
              if (!cairn::io::safetensors_file(file_path).find(tensor))
                problems.push_back(entry.path().string() + ": '" + tensor + "' is not in " + file_name);
            } catch (cairn::error const&) {
              // the file's own problem is reported above
            }
          }
        } catch (cairn::error const& e) {
          problems.emplace_back(e.what());
        }
      }
    }
  }
  for (auto const& p : problems) std::fprintf(stderr, "cairn verify: %s\n", p.c_str());
  if (!problems.empty()) return 1;
  std::printf("%s: ok (%zu files)\n", path.c_str(), checked);
  return 0;
}

int launch(std::vector<std::string> const& args) {
  cairn::tool::launch_options options;
  std::size_t i = 0;
  for (; i < args.size() && args[i] != "--"; ++i) {
    auto value = [&]() -> int {
      if (i + 1 >= args.size()) throw cairn::error(args[i] + " needs a value");
      auto text = args[++i];
      try {
        std::size_t used = 0;
        int v = std::stoi(text, &used);
        if (used == text.size() && v > 0) return v;
      } catch (std::exception const&) {
      }
      throw cairn::error(args[i - 1] + " needs a positive integer, got '" + text + "'");
    };
    if (args[i] == "-n" || args[i] == "--nproc")
      options.processes = value();
    else if (args[i] == "--port")
      options.port = value();
    else
      throw cairn::error("unknown option '" + args[i] + "' for launch");
  }
  if (options.processes == 0) throw cairn::error("launch needs -n N");
  if (i >= args.size() || i + 1 >= args.size()) throw cairn::error("launch needs -- PROGRAM ARGS...");
  options.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
  return cairn::tool::launch(options);
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage_error("no command given");
  auto command = args[0];
  args.erase(args.begin());
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(usage, stdout);
    return 0;
  }
  try {
    if (command == "launch") return launch(args);
    if (command == "convert") {
      if (args.size() == 1 && args[0] == "--help") {
        std::fputs(cairn::document<cairn::tool::convert_config>().c_str(), stdout);
        return 0;
      }
      for (auto const& a : args)
        if (a.find('=') == std::string::npos)
          return usage_error("convert takes key.path=value arguments, got '" + a + "'");
      auto config = cairn::from_json<cairn::tool::convert_config>(boost::json::object{}, args);
      std::printf("%s\n", cairn::tool::convert(config).c_str());
      return 0;
    }
    if (command == "inspect" || command == "verify") {
      if (args.size() != 1) return usage_error(command + " takes exactly one PATH");
      return command == "inspect" ? inspect(args[0]) : verify(args[0]);
    }
  } catch (cairn::config_error const& e) {
    std::fprintf(stderr, "cairn %s: %s\n", command.c_str(), e.what());
    return 2;
  } catch (cairn::error const& e) {
    if (command == "launch" && std::string(e.what()).find("cannot start") == std::string::npos)
      return usage_error(e.what());
    std::fprintf(stderr, "cairn %s: %s\n", command.c_str(), e.what());
    return 1;
  }
  return usage_error("unknown command '" + command + "'");
}
