// build/bin/cairn: inspect, verify and convert checkpoints, launch local distributed runs. A
// thin command line over the library's public API.
#include <cairn/checkpoint/convert.hpp>
#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/load_plan.hpp>
#include <cairn/checkpoint/verify.hpp>
#include <cairn/comm/launch.hpp>
#include <cairn/config/docs.hpp>
#include <cairn/config/json.hpp>
#include <cairn/io.hpp>
#include <cairn/io/storage.hpp>
#include <cairn/progress.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr char const* usage = R"(usage: cairn COMMAND ...

commands:
  inspect PATH              format, completeness, metadata, config and every tensor (name, dtype,
                            shape, bytes) of a checkpoint directory or a .safetensors file, totals;
                            of an experiment directory, each save and export (iteration, kind,
                            complete, finite, files, size)
  verify [--require-checksums] PATH
                            exit 0 if the save is complete (its completion marker, when it is one
                            of an experiment's saves) and every file intact and consistent with
                            what a load reads (checksums, layouts, indexes, config.json), else 1
                            naming each problem; files of other tools without checksums are a
                            note, or a problem with --require-checksums
  convert input.path=... input.format=... output.path=... output.format=... [output.data_type=...]
          [replace=true]    convert between distributed and state_dict without the model's code
                            (keys as in the library's configs; `cairn convert --help` lists them);
                            written aside and renamed into place; a non-empty output is refused
                            unless replace=true, a save of an experiment always
  launch -n N [--nnodes M --node-rank R --master-addr HOST] [--master-port P] -- PROGRAM ARGS...
                            run N processes on this node with the torchrun variables (RANK,
                            WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,
                            MASTER_PORT); output prefixed with the rank; signals forwarded once
                            per stop request; all stopped when one fails. A job of M nodes runs
                            one launcher a node, each with its R and node 0's HOST and port
  plan --checkpoint DIR --layout FILE [--json]
                            resume dry run, no tensor read: what loading DIR (distributed or
                            state_dict) into the run of FILE (a JSON run_layout: its state shards
                            and every rank's holdings) reshards and what each rank reads (files,
                            bytes); exit 2 listing every problem the load would refuse (a
                            parameter missing or new, another shape, optimizer state missing or
                            with no place in the run), 1 when DIR or FILE cannot be read
  check-storage DIR         what the filesystem of DIR guarantees of what saves rely on (fsync,
                            rename, flock, read-after-write, mmap, free space); exit 1 if any fails
)";

/// `text` as it may reach a terminal: a byte below 0x20 or 0x7f, from a name in a file, becomes
/// \xNN, so that a name cannot move the cursor, recolour the terminal or forge a line of
/// output. With `keep_lines`, the line breaks of a message listing its problems (each next line
/// indented by two spaces) stay.
std::string shown(std::string_view text, bool keep_lines = false) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size(); ++at) {
    auto c = static_cast<unsigned char>(text[at]);
    bool listing_break = keep_lines && c == '\n' && text.substr(at + 1, 2) == "  ";
    // A C1 control (U+0080 to U+009F, 0xc2 0x80-0x9f in UTF-8): CSI among them clears a screen.
    if (c == 0xc2 && at + 1 < text.size() && static_cast<unsigned char>(text[at + 1]) >= 0x80 &&
        static_cast<unsigned char>(text[at + 1]) <= 0x9f) {
      char escaped[16];
      std::snprintf(escaped, sizeof escaped, "\\xc2\\x%02x", static_cast<unsigned char>(text[++at]));
      out += escaped;
    } else if ((c < 0x20 && !listing_break) || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

/// A message that may quote names from files: its lines kept, everything else escaped.
std::string shown_message(std::string_view text) { return shown(text, true); }

/// An item's bytes as `inspect` shows them: JSON text as it was saved (escaped for the terminal);
/// other bytes counted, with their first 32 in hexadecimal.
std::string item_text(std::string const& bytes) {
  boost::system::error_code failed;
  (void)boost::json::parse(bytes, failed);
  if (!failed) return shown(bytes);
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex;
  for (std::size_t i = 0; i < bytes.size() && i < 32; ++i) {
    auto c = static_cast<unsigned char>(bytes[i]);
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  return std::to_string(bytes.size()) + (bytes.size() == 1 ? " byte" : " bytes") +
         (bytes.empty() ? std::string() : ": " + hex + (bytes.size() > 32 ? "..." : ""));
}

/// Arguments the tool cannot take: reported with the usage, exit status 2.
class usage_error : public cairn::error {
public:
  using cairn::error::error;
};

/// The part of the usage about `command`: its line and the lines indented under it.
std::string command_usage(std::string_view command) {
  std::string_view text = usage;
  auto at = text.find("\n  " + std::string(command) + " ");
  if (at == std::string_view::npos) return usage;
  auto end = at + 1;
  do end = text.find('\n', end) + 1;
  while (end < text.size() && text.substr(end, 3) == "   "); // a continuation: indented further
  return "usage: cairn " + std::string(text.substr(at + 3, end - at - 3));
}

int print_usage_error(std::string const& message) {
  std::fprintf(stderr, "cairn: %s\n\n%s", message.c_str(), usage);
  return 2;
}

/// Whether `path` is a directory, or on an object store a prefix with objects under it.
bool is_folder(std::filesystem::path const& path) {
  auto where = cairn::io::open_location(path.string());
  if (where.backend->guarantees().directories) return std::filesystem::is_directory(path);
  return !where.backend->list(where.key).empty();
}

/// Whether there is a file, object or directory at `path`.
bool stored(std::filesystem::path const& path) {
  auto where = cairn::io::open_location(path.string());
  if (where.backend->guarantees().directories) return std::filesystem::exists(path);
  return where.backend->size(where.key) || is_folder(path);
}

/// What `inspect` calls the thing at `path`.
std::string kind_of(std::filesystem::path const& path, std::optional<cairn::checkpoint_format> format) {
  if (format) return cairn::format_name(*format);
  return is_folder(path) ? "directory of safetensors files" : "safetensors file";
}

/// The JSON file or object `path`.
boost::json::value read_json(std::filesystem::path const& path) {
  auto where = cairn::io::open_location(path.string());
  if (where.backend->guarantees().directories) return cairn::read_json_file(path, cairn::max_config_file_size);
  return cairn::parse_json(where.backend->read_all(where.key, cairn::max_config_file_size), path.string());
}

/// `n` and `noun`, plural unless `n` is 1: "1 rank", "2 ranks".
std::string counted(std::uint64_t n, std::string_view noun) {
  return std::to_string(n) + " " + std::string(noun) + (n == 1 ? "" : "s");
}

/// Whether `path` is an experiment directory: no checkpoint itself, but a folder of saves or of
/// exports under it.
bool is_experiment(std::filesystem::path const& path) {
  cairn::experiment_layout experiment{path};
  return is_folder(experiment.checkpoints()) || is_folder(experiment.exports());
}

/// `inspect` of an experiment directory: a line for each save and export (iteration, kind,
/// complete or why not, finite, files, size), oldest first.
int inspect_experiment(std::filesystem::path const& path) {
  cairn::experiment_layout experiment{path};
  std::printf("experiment: %s\n", shown(path.string()).c_str());
  for (auto const& folder : {experiment.checkpoints(), experiment.exports()}) {
    if (!is_folder(folder)) continue;
    cairn::save_directory dir(folder);
    auto where = cairn::io::open_location(folder.string());
    std::vector<std::int64_t> iterations;
    std::uint64_t others = 0;
    for (auto const& entry : where.backend->list(where.key)) {
      if (auto iteration = cairn::save_directory::iteration_of(entry.name); iteration && entry.directory && !entry.link)
        iterations.push_back(*iteration);
      else
        ++others;
    }
    std::sort(iterations.begin(), iterations.end());
    std::printf("%s: %s\n", shown(folder.string()).c_str(), counted(iterations.size(), "save").c_str());
    for (auto iteration : iterations) {
      std::string kind = "-", finite = "-", size = "-";
      auto problem = dir.problem(iteration);
      if (!problem) {
        auto marker = read_json(dir.resolved(iteration) / cairn::completion_marker);
        static boost::json::object const none;
        auto const& object = marker.is_object() ? marker.get_object() : none; // checked by problem()
        if (auto const* k = object.if_contains("kind"); k && k->is_string()) kind = std::string(k->as_string());
        auto const* flag = object.if_contains("finite");
        finite = flag && flag->is_bool() && !flag->as_bool() ? "no" : "yes";
        std::uint64_t files = 0, bytes = 0;
        if (auto const* listed = object.if_contains("files"); listed && listed->is_object())
          for (auto const& [name, file] : listed->as_object()) {
            ++files;
            if (auto const* n = file.is_object() ? file.as_object().if_contains("size") : nullptr; n && n->is_uint64())
              bytes += n->as_uint64();
            else if (n && n->is_int64() && n->as_int64() >= 0)
              bytes += static_cast<std::uint64_t>(n->as_int64());
          }
        size = counted(files, "file") + ", " + cairn::size_text(static_cast<double>(bytes));
      }
      std::printf("  %-10lld %-11s complete: %-3s finite: %-3s %s\n", static_cast<long long>(iteration),
                  shown(kind).c_str(), problem ? "no" : "yes", finite.c_str(), size.c_str());
      if (problem) std::printf("             %s\n", shown(*problem).c_str());
    }
    if (others > 0)
      std::printf("  and %s that %s no save (staging, set aside, or named otherwise)\n",
                  counted(others, "other entry").c_str(), others == 1 ? "is" : "are");
  }
  return 0;
}

int inspect(std::filesystem::path const& given) {
  auto path = cairn::resolve_save(given); // a save on a store: its newest complete generation
  if (!stored(path)) {
    std::fprintf(stderr, "cairn inspect: %s: no such file or directory\n", path.c_str());
    return 1;
  }
  auto format = cairn::detect_format(path);
  if (!format && !cairn::save_status(path).is_save && is_experiment(path)) return inspect_experiment(path);
  std::printf("format: %s\n", kind_of(path, format).c_str());
  auto save = cairn::save_status(path);
  if (save.is_save) std::printf("complete: %s\n", save.problem ? save.problem->c_str() : "yes");
  if (format == cairn::checkpoint_format::distributed || format == cairn::checkpoint_format::state_dict) {
    auto metadata = cairn::read_stored_metadata(path, *format);
    std::printf("version: %s\n", metadata.version.c_str());
    std::string shards;
    for (auto const& s : metadata.shard_names) shards += (shards.empty() ? "" : ", ") + s;
    std::printf("state shards: %s\n", shown(shards).c_str());
    if (metadata.world_size() > 0)
      std::printf("saved by %s\n", counted(static_cast<std::uint64_t>(metadata.world_size()), "rank").c_str());
    std::printf("metadata: %s\n", cairn::to_compact_json(metadata.metadata).c_str());
    std::printf("config: %s", cairn::to_pretty_json(metadata.config).c_str());
  } else if (format == cairn::checkpoint_format::external) {
    std::printf("config: %s", cairn::to_pretty_json(read_json(cairn::formats::external_config(path))).c_str());
    if (auto index = path / "model.safetensors.index.json"; stored(index)) {
      auto read = cairn::io::read_index(index);
      std::printf("index: %s in %s\n", counted(read.weight_map.size(), "tensor").c_str(),
                  counted(read.files().size(), "file").c_str());
    }
  }
  std::uint64_t tensors = 0, elements = 0, bytes = 0;
  auto files = cairn::safetensors_files(path);
  for (auto const& file_path : files) {
    cairn::io::safetensors_file file(file_path);
    std::printf("%s\n", shown(file_path.string()).c_str());
    for (auto const& [key, value] : file.metadata())
      if (!cairn::io::is_checksum_key(key) && !key.starts_with(cairn::formats::item_key_prefix) &&
          !key.starts_with(cairn::formats::item_checksum_prefix))
        std::printf("  metadata %s = %s\n", shown(key).c_str(), shown(value).c_str());
    // The rank's items (`model_state::items`): JSON as JSON, other bytes counted, each checked.
    std::vector<std::string> item_problems;
    for (auto const& [name, value] : cairn::rank_file_items(file.metadata(), item_problems))
      std::printf("  item %s = %s\n", shown(name).c_str(), item_text(value).c_str());
    for (auto const& problem : item_problems) std::printf("  item problem: %s\n", shown(problem).c_str());
    std::printf("  checksums: %s\n", file.has_checksums() ? "recorded" : "none");
    for (auto const& t : file.tensors()) {
      std::printf("  %-40s %-7s %-20s %12llu bytes\n", shown(t.name).c_str(),
                  std::string(cairn::io::name(t.dtype)).c_str(), cairn::shape_text(t.shape).c_str(),
                  static_cast<unsigned long long>(t.byte_size()));
      ++tensors;
      elements += t.numel();
      bytes += t.byte_size();
    }
  }
  std::printf("total: %s, %s, %s, %s\n", counted(files.size(), "file").c_str(), counted(tensors, "tensor").c_str(),
              counted(elements, "element").c_str(), counted(bytes, "byte").c_str());
  // As `verify` would: a save that is not complete, or a directory of no checkpoint, is not a
  // good checkpoint.
  auto problem = save.problem ? save.problem : cairn::not_a_checkpoint(path);
  if (!problem && format && files.empty()) problem = path.string() + ": holds no tensors (no .safetensors file)";
  if (problem) {
    std::fprintf(stderr, "cairn inspect: %s\n", shown_message(*problem).c_str());
    return 1;
  }
  return 0;
}

int verify(std::vector<std::string> const& args) {
  cairn::verify_options options;
  std::vector<std::string> paths;
  for (auto const& a : args) {
    if (a == "--require-checksums")
      options.require_checksums = true;
    else if (a.starts_with("--"))
      throw usage_error("unknown option '" + a + "' for verify");
    else
      paths.push_back(a);
  }
  if (paths.size() != 1) throw usage_error("verify takes exactly one PATH");
  std::filesystem::path path = paths.front();
  auto report = cairn::verify_checkpoint(path, options);
  for (auto const& n : report.notes) std::fprintf(stderr, "cairn verify: note: %s\n", shown_message(n).c_str());
  for (auto const& p : report.problems) std::fprintf(stderr, "cairn verify: %s\n", shown_message(p).c_str());
  if (!report.ok()) return 1;
  std::printf("%s: ok (%s%s)\n", path.c_str(), counted(report.files, "file").c_str(),
              report.notes.empty() ? "" : "; structure only where no checksums are recorded");
  return 0;
}

/// `plan`'s text: what reshards, then each rank's reads.
void print_load_plan(std::filesystem::path const& dir, cairn::run_layout const& run, cairn::load_plan const& plan) {
  std::printf("checkpoint %s (%s) into a run of %s\n", dir.c_str(), cairn::format_name(plan.format),
              counted(static_cast<std::uint64_t>(run.world_size()), "rank").c_str());
  if (plan.same_layout)
    std::printf("layout: the saving one; each rank reads its own shards (replicated ones from their writer)\n");
  else if (plan.format == cairn::checkpoint_format::state_dict)
    std::printf("layout: whole tensors; each rank reads its parts of them\n");
  else if (plan.resharded.empty())
    std::printf("layout: the saved shards, held by another number of replicas; each rank reads its own\n");
  else
    std::printf("layout: resharded, %s held otherwise than saved\n",
                counted(plan.resharded.size(), "parameter").c_str());
  for (auto const& name : plan.resharded) std::printf("  reshards %s\n", shown(name).c_str());
  for (auto const& name : plan.zeroed) std::printf("zeroed: %s (not loaded)\n", shown(name).c_str());
  for (auto const& name : plan.dropped_items)
    std::printf("dropped: item %s (saved by each rank of another number: this run's ranks get none; "
                "cairn::saved_items reads them)\n",
                shown(name).c_str());
  if (!plan.problems.empty()) return; // refused: nothing is read
  for (std::size_t r = 0; r < plan.reads.size(); ++r) {
    std::uint64_t total = 0; // saturating: a hostile layout may ask for more than 2^64 bytes
    for (auto const& read : plan.reads[r])
      if (__builtin_add_overflow(total, read.bytes, &total)) total = UINT64_MAX;
    std::printf("rank %zu reads %s from %s\n", r, counted(total, "byte").c_str(),
                counted(plan.reads[r].size(), "file").c_str());
    for (auto const& read : plan.reads[r])
      std::printf("  %-32s %12llu bytes\n", shown(read.file).c_str(), static_cast<unsigned long long>(read.bytes));
  }
}

int plan(std::vector<std::string> const& args) {
  std::string checkpoint, layout;
  bool json = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    auto value = [&] {
      if (i + 1 >= args.size()) throw usage_error(args[i] + " needs a value");
      return args[++i];
    };
    if (args[i] == "--checkpoint")
      checkpoint = value();
    else if (args[i] == "--layout")
      layout = value();
    else if (args[i] == "--json")
      json = true;
    else
      throw usage_error("unknown argument '" + args[i] + "' for plan");
  }
  if (checkpoint.empty() || layout.empty()) throw usage_error("plan needs --checkpoint DIR and --layout FILE");
  cairn::run_layout run;
  try {
    run = cairn::parse<cairn::run_layout>(cairn::read_json_file(layout));
  } catch (cairn::config_error const& e) { // a file that cannot be read, not a mismatch
    std::fprintf(stderr, "cairn plan: %s: %s\n", layout.c_str(), e.what());
    return 1;
  }
  if (run.world_size() == 0) {
    std::fprintf(stderr, "cairn plan: %s: a run of no ranks (\"ranks\" is empty, no \"rules\")\n", layout.c_str());
    return 1;
  }
  if (run.rules && !run.ranks.empty()) {
    std::fprintf(stderr, "cairn plan: %s: \"rules\" stand for \"ranks\", which it lists too: one or the other\n",
                 layout.c_str());
    return 1;
  }
  auto planned = cairn::plan_load(std::filesystem::path(checkpoint), run);
  if (json)
    std::fputs(cairn::to_pretty_json(cairn::to_json(planned)).c_str(), stdout);
  else
    print_load_plan(checkpoint, run, planned);
  for (auto const& p : planned.problems) std::fprintf(stderr, "cairn plan: %s\n", shown_message(p).c_str());
  if (!planned.problems.empty())
    std::fprintf(stderr, "cairn plan: the load would be refused: %zu problem%s\n", planned.problems.size(),
                 planned.problems.size() == 1 ? "" : "s");
  return planned.problems.empty() ? 0 : 2;
}

int check_storage(std::vector<std::string> const& args) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs("usage: cairn check-storage DIR\n"
               "Checks that DIR's file system gives what checkpoints rely on (fsync of files and\n"
               "directories, atomic renames, locks, a write seen by another process, mmap, free space);\n"
               "DIR and its missing parents are created for the check and removed after it.\n"
               "DIR may be s3://bucket/prefix: the store's read after write, ranged reads, listing,\n"
               "conditional create, multipart uploads and deletes are checked under a scratch prefix.\n"
               "Exit status 0 when everything holds, 1 otherwise.\n",
               stdout);
    return 0;
  }
  if (args.size() != 1) throw usage_error("check-storage takes exactly one DIR");
  if (args[0].starts_with("-"))
    throw usage_error("unknown option '" + args[0] + "' for check-storage (DIR: ./" + args[0] + ")");
  auto report = cairn::io::check_storage(args.front());
  std::fputs(cairn::io::to_string(report).c_str(), stdout);
  return report.ok() ? 0 : 1;
}

int launch(std::vector<std::string> const& args) {
  cairn::comm::launch_options options;
  std::size_t i = 0;
  for (; i < args.size() && args[i] != "--"; ++i) {
    auto text = [&] {
      if (i + 1 >= args.size()) throw usage_error(args[i] + " needs a value");
      return args[++i];
    };
    auto number = [&](int low, int high) {
      auto option = args[i];
      auto value = text();
      try {
        std::size_t used = 0;
        int v = std::stoi(value, &used);
        if (used == value.size() && v >= low && v <= high) return v;
      } catch (std::exception const&) {
      }
      throw usage_error(option + " needs an integer in [" + std::to_string(low) + ", " + std::to_string(high) +
                        "], got '" + value + "'");
    };
    if (args[i] == "-n" || args[i] == "--nproc" || args[i] == "--nproc-per-node")
      options.processes = number(1, 1 << 20);
    else if (args[i] == "--port" || args[i] == "--master-port")
      options.port = number(1, 65535);
    else if (args[i] == "--nnodes")
      options.nnodes = number(1, 1 << 16);
    else if (args[i] == "--node-rank")
      options.node_rank = number(0, (1 << 16) - 1);
    else if (args[i] == "--master-addr")
      options.master_addr = text();
    else
      throw usage_error("unknown option '" + args[i] + "' for launch");
  }
  if (options.processes == 0) throw usage_error("launch needs -n N");
  if (i >= args.size() || i + 1 >= args.size()) throw usage_error("launch needs -- PROGRAM ARGS...");
  options.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
  return cairn::comm::launch(options);
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return print_usage_error("no command given");
  auto command = args[0];
  args.erase(args.begin());
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(usage, stdout);
    return 0;
  }
  bool const asks_help = args.size() == 1 && (args[0] == "--help" || args[0] == "-h");
  if (asks_help && (command == "inspect" || command == "verify" || command == "launch" || command == "plan")) {
    std::fputs(command_usage(command).c_str(), stdout);
    return 0;
  }
  try {
    if (command == "launch") return launch(args);
    if (command == "convert") {
      if (args.size() == 1 && args[0] == "--help") {
        std::fputs(cairn::document<cairn::convert_config>().c_str(), stdout);
        return 0;
      }
      for (auto const& a : args)
        if (a.find('=') == std::string::npos)
          return print_usage_error("convert takes key.path=value arguments, got '" + a + "'");
      auto config = cairn::from_json<cairn::convert_config>(boost::json::object{}, args);
      std::printf("%s\n", cairn::convert_checkpoint(config).c_str());
      return 0;
    }
    if (command == "verify") return verify(args);
    if (command == "check-storage") return check_storage(args);
    if (command == "plan") return plan(args);
    if (command == "inspect") {
      if (args.size() != 1) return print_usage_error(command + " takes exactly one PATH");
      return inspect(args[0]);
    }
  } catch (usage_error const& e) {
    return print_usage_error(e.what());
  } catch (cairn::config_error const& e) {
    std::fprintf(stderr, "cairn %s: %s\n", command.c_str(), shown_message(e.what()).c_str());
    return 2;
  } catch (std::bad_alloc const&) {
    std::fprintf(stderr, "cairn %s: out of memory\n", command.c_str());
    return 1;
  } catch (std::exception const& e) {
    // cairn's errors name their file; std::filesystem's carry the paths involved (a loop of
    // links, a name too long, a directory removed meanwhile, permission denied).
    std::fprintf(stderr, "cairn %s: %s\n", command.c_str(), shown_message(e.what()).c_str());
    return 1;
  }
  return print_usage_error("unknown command '" + command + "'");
}
