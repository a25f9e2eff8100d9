// Definitions of <cairn/checkpoint/convert.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/convert.hpp>
#include <cairn/checkpoint/detail/identity.hpp>
#include <cairn/checkpoint/detail/save_files.hpp>
#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/checkpoint/verify.hpp>
#include <cairn/config/docs.hpp>
#include <cairn/config/json.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/error.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/safetensors.hpp>
#include <cairn/io/safetensors_writer.hpp>
#include <cairn/progress.hpp>

#include <boost/describe/class.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <unistd.h>
#include <vector>

namespace cairn {

CAIRN_DECL detail::checkpoint_reader::checkpoint_reader(checkpoint_load_metadata_config const& input) : input_(input) {
  if (input.format == checkpoint_format::distributed) {
    metadata_ = read_checkpoint_metadata(formats::metadata_file(input.path));
    if (metadata_.rules) { // a conversion goes through every rank's file: every rank's layout
      metadata_.ranks = metadata_.layouts();
      metadata_.rules.reset();
    }
    auto writers = replica_writers_of(metadata_.ranks, metadata_.replica_writers);
    for (std::size_t r = 0; r < metadata_.ranks.size(); ++r)
      for (auto const& p : metadata_.ranks[r].parameters) {
        auto whole = p;
        whole.replicated = false;
        whole.shard = shard_layout::whole(p.shape);
        parameters_.try_emplace(p.name, whole);
        // A replicated parameter is in its writer's file only.
        if (!p.replicated || writers.of(p.name, p.shard) == static_cast<int>(r))
          holders_[p.name].emplace_back(static_cast<int>(r), p.shard);
      }
  } else if (input.format == checkpoint_format::state_dict) {
    auto index_path = formats::state_dict_index(input.path);
    index_ = io::read_index(index_path);
    metadata_ = parse_checkpoint_metadata(index_.metadata, index_path.string());
    for (auto const& p : metadata_.parameters) parameters_.emplace(p.name, p);
    // Every tensor of the files is one the index lists there, as a load and `verify` require:
    // a tensor the index lost (a parameter edited out of it) is not silently left behind.
    std::set<std::string> file_names;
    for (auto const& [tensor, file_name] : index_.weight_map) file_names.insert(file_name);
    for (auto const& file_name : file_names)
      for (auto const& t : file(input_.path / file_name, std::nullopt).tensors())
        if (auto listed = index_.weight_map.find(t.name);
            listed == index_.weight_map.end() || listed->second != file_name)
          throw io::io_error(input_.path / file_name,
                             "tensor '" + t.name + "' is not where " + index_path.filename().string() + " lists it");
  } else {
    throw checkpoint_error(
        checkpoint_errc::needs_converter,
        "convert reads the distributed and state_dict formats; the external format needs the model's "
        "converter: cairn-llama convert for llama, mistral and qwen2, a program's own convert for its model "
        "(as cairn-train convert)");
  }
  // Layouts that do not tile their parameters are refused before anything is read.
  std::vector<diagnostic> problems;
  for (auto const& p :
       tiling_problems(metadata_.ranks.empty() ? std::vector<rank_layout>{{metadata_.parameters}} : metadata_.ranks))
    problems.push_back({input.path.string(), p});
  if (!problems.empty()) throw checkpoint_error("cannot convert " + input.path.string(), std::move(problems));
}

CAIRN_DECL std::vector<std::byte> detail::checkpoint_reader::read(parameter_layout const& p, std::string const& shard) {
  auto tensor = cairn::detail::tensor_name(p.name, shard);
  // Where the parameter's elements are: each file's tensor checked against what the metadata
  // says of it (elements, type) before anything is allocated or read.
  struct piece {
    io::safetensors_file const* file;
    io::tensor_info const* info;
    shard_layout saved;
  };
  std::vector<piece> pieces;
  auto add = [&](io::safetensors_file const& file, shard_layout saved, std::optional<int> rank) {
    auto const& t = file.at(tensor);
    if (t.dtype != p.dtype)
      throw io::io_error(file.path(), "tensor '" + tensor + "' is stored as " + std::string(io::name(t.dtype)) +
                                          ", the checkpoint's metadata says " + std::string(io::name(p.dtype)));
    if (!rank && t.shape != p.shape) // whole tensors keep their shape; rank files hold flat ones
      throw io::io_error(file.path(), "tensor '" + tensor + "' has shape " + shape_text(t.shape) + ", the index says " +
                                          shape_text(p.shape));
    if (t.numel() != saved.numel())
      throw io::io_error(file.path(), "tensor '" + tensor + "' holds " + std::to_string(t.numel()) +
                                          " elements, the checkpoint's metadata says " + std::to_string(saved.numel()));
    pieces.push_back({&file, &t, std::move(saved)});
  };
  if (input_.format == checkpoint_format::distributed) {
    if (auto held = holders_.find(p.name); held != holders_.end())
      for (auto const& [rank, saved] : held->second)
        add(file(formats::rank_file(input_.path, rank), rank), saved, rank);
  } else {
    auto entry = index_.weight_map.find(tensor);
    if (entry == index_.weight_map.end())
      throw checkpoint_error(checkpoint_errc::missing_tensor, "'" + tensor + "' is not in the index");
    add(file(input_.path / entry->second, std::nullopt), shard_layout::whole(p.shape), std::nullopt);
  }
  auto size = io::size_of(p.dtype);
  std::vector<std::byte> whole(cairn::detail::whole_numel(p) * size); // the pieces tile it: no larger than they are
  std::uint64_t written = 0;
  for (auto const& [file, t, saved] : pieces) {
    file->verify(*t); // every tensor of cairn's formats has a checksum
    auto bytes = file->bytes(*t);
    for (auto const& run : overlap(p.shape, saved, shard_layout::whole(p.shape))) {
      std::memcpy(whole.data() + run.target * size, bytes.data() + run.source * size, run.length * size);
      written += run.length;
      progress_scope::count(run.length * size);
    }
    file->release(*t); // an object's tensor: one held at a time, not the whole input
  }
  if (written != cairn::detail::whole_numel(p))
    throw checkpoint_error(checkpoint_errc::incomplete,
                           "'" + tensor + "': the checkpoint holds " + std::to_string(written) + " of its " +
                               std::to_string(cairn::detail::whole_numel(p)) + " elements");
  return whole;
}

CAIRN_DECL io::safetensors_file const& detail::checkpoint_reader::file(std::filesystem::path const& path,
                                                                       std::optional<int> rank) {
  auto& slot = files_[path.string()];
  if (!slot) {
    // Its identity, once: a file of another save (or rank) is refused before anything is read.
    auto opened = std::make_unique<io::safetensors_file>(path);
    if (auto problem = identity_problem(*opened, metadata_, rank)) throw io::io_error(path, *problem);
    slot = std::move(opened);
  }
  return *slot;
}

CAIRN_DECL void detail::refuse_overlap(std::filesystem::path const& input, std::filesystem::path const& output) {
  bool stored_in = io::is_object_store_path(input.string()), stored_out = io::is_object_store_path(output.string());
  if (stored_in != stored_out) return; // an object store's keys and a local directory never overlap
  bool overlaps = false;
  if (stored_in) { // keys: one is the other, or under it
    auto key = [](std::filesystem::path const& p) {
      auto text = p.string();
      while (text.ends_with('/')) text.pop_back();
      return text + '/';
    };
    auto in = key(input), out = key(output);
    overlaps = in.starts_with(out) || out.starts_with(in);
  } else {
    auto in = std::filesystem::weakly_canonical(input), out = std::filesystem::weakly_canonical(output);
    auto inside = [](std::filesystem::path const& inner, std::filesystem::path const& outer) {
      return std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end()).first == outer.end();
    };
    overlaps = inside(out, in) || inside(in, out);
  }
  if (overlaps)
    throw config_error({{"output.path", "'" + output.string() + "' is or overlaps the input '" + input.string() +
                                            "': write the conversion somewhere else"}});
}

namespace detail {

/// A name no other process picks: the pid and 64 random bits.
inline std::string unique_suffix() { return std::to_string(::getpid()) + "-" + new_save_id().substr(0, 16); }

/// Whether `dir` has any entry.
inline bool has_entries(std::filesystem::path const& dir) {
  std::error_code ec;
  return std::filesystem::directory_iterator(dir, ec) != std::filesystem::directory_iterator();
}

/// An object store's prefix as a path, without the trailing '/' a user may give.
inline std::filesystem::path object_prefix(std::filesystem::path const& path) {
  auto text = path.string();
  while (text.ends_with('/')) text.pop_back();
  return text;
}

/// Whether `name` is a file a conversion writes: the metadata or index, a rank file of the
/// distributed format, a file of the state_dict format.
inline bool written_by_conversion(std::string const& name) {
  auto numbered = [&](std::string_view prefix) {
    if (!name.starts_with(prefix) || !name.ends_with(".safetensors")) return false;
    auto digits = std::string_view(name).substr(prefix.size(), name.size() - prefix.size() - 12);
    return !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  return name == formats::metadata_file("").string() || name == formats::state_dict_index("").string() ||
         numbered("rank_") || numbered("state_dict_");
}

/// Why the non-empty directory `dir` may not be replaced by a conversion, or nothing: only what a
/// conversion writes may be, whole or the remains of one that failed (files of the distributed
/// or state_dict formats alone), never a save of an experiment nor anything else.
inline std::optional<std::string> not_replaceable(std::filesystem::path const& dir) {
  if (save_status(dir).is_save) return "is a save of an experiment: a conversion never replaces one";
  std::vector<io::listed_entry> entries;
  try {
    entries = folder_entries(dir);
  } catch (io::io_error const& e) {
    return std::string("cannot be listed: ") + e.what();
  }
  for (auto const& entry : entries)
    if (entry.directory || entry.link || !written_by_conversion(entry.name))
      return "holds " + entry.name + ", which no conversion writes: replace=true replaces an earlier conversion only";
  return std::nullopt;
}

/// Whether `name` in `parent` is where an experiment's directory of saves keeps a save
/// (`checkpoints/<n>`, `export/.partial-<n>`, …): what it finds there without a marker, it removes.
inline bool in_saves(std::filesystem::path const& parent, std::string const& name) {
  auto folder = parent.filename();
  if (folder != experiment_layout::checkpoints_folder && folder != experiment_layout::exports_folder) return false;
  for (std::string_view prefix : {"", ".partial-", ".replaced-"})
    if (name.starts_with(prefix) && save_directory::iteration_of(std::string_view(name).substr(prefix.size())))
      return true;
  return false;
}

/// Whether `path` is, or is inside, where an experiment keeps a save (`…/checkpoints/<n>/…`): a
/// conversion there would be removed with that save.
inline bool within_saves(std::filesystem::path const& path) {
  for (auto at = path; at.has_filename() && at.has_parent_path() && at.parent_path() != at; at = at.parent_path())
    if (in_saves(at.parent_path(), at.filename().string())) return true;
  return false;
}

} // namespace detail

CAIRN_DECL staged_output::staged_output(std::filesystem::path output, bool replace)
    : output_(std::move(output)), replace_(replace) {
  auto refuse = [&](std::string const& why) {
    throw config_error({{"output.path", "'" + output_.string() + "' " + why}});
  };
  if (io::is_object_store_path(output_.string())) {
    write_in_place();
    return;
  }
  auto name = output_.lexically_normal().filename();
  if (name.empty() || name == "." || name == "..")
    name = std::filesystem::absolute(output_).lexically_normal().filename();
  if (name.empty()) refuse("names no directory that can be written");
  std::error_code ec;
  auto status = std::filesystem::symlink_status(output_, ec);
  if (std::filesystem::exists(status) && save_status(output_).is_save)
    refuse("is a save of an experiment: a conversion never replaces one; write it somewhere else");
  if (detail::within_saves(std::filesystem::absolute(output_).lexically_normal()))
    refuse("is where an experiment keeps its saves (its resume would remove what it finds there): write the "
           "conversion somewhere else");
  if (std::filesystem::exists(status)) {
    if (!std::filesystem::is_directory(std::filesystem::status(output_, ec))) refuse("exists and is not a directory");
    if (detail::has_entries(output_)) {
      if (!replace_) refuse("is not empty: write the conversion somewhere else, or give replace=true to replace it");
      if (auto problem = detail::not_replaceable(output_)) refuse(*problem);
    }
  }
  auto parent = output_.parent_path();
  if (parent.empty()) parent = ".";
  io::make_directories(parent);
  staging_ = parent / ("." + name.string() + ".partial-" + detail::unique_suffix());
  io::make_directories(staging_);
}

CAIRN_DECL void staged_output::write_in_place() {
  auto refuse = [&](std::string const& why) {
    throw config_error({{"output.path", "'" + output_.string() + "' " + why}});
  };
  output_ = staging_ = detail::object_prefix(output_);
  in_place_ = true;
  auto name = output_.filename().string();
  if (name.empty() || output_.parent_path().string().find('/') == std::string::npos)
    refuse("names a bucket, not a prefix in it: write the conversion under a prefix (s3://bucket/prefix)");
  if (save_status(output_).is_save)
    refuse("is a save of an experiment: a conversion never replaces one; write it somewhere else");
  if (auto location = io::open_location(output_.string()); location.backend->size(location.key))
    refuse("is an object, not a prefix: write the conversion somewhere else");
  if (detail::within_saves(output_))
    refuse("is where an experiment keeps its saves (its resume would remove what it finds there): write the "
           "conversion somewhere else");
  if (detail::folder_entries(output_).empty()) return;
  if (!replace_) refuse("is not empty: write the conversion somewhere else, or give replace=true to replace it");
  if (auto problem = detail::not_replaceable(output_)) refuse(*problem);
  // Nothing renames on an object store: the earlier conversion goes before this one is written,
  // its metadata and index first, so that no reader takes what is left of it for a checkpoint.
  for (auto const& describing : {formats::metadata_file(output_), formats::state_dict_index(output_)}) {
    auto file = io::open_location(describing.string());
    file.backend->remove(file.key);
  }
  auto location = io::open_location(output_.string());
  location.backend->remove_tree(location.key);
}

CAIRN_DECL staged_output::~staged_output() {
  if (committed_) return;
  if (in_place_) { // what this conversion wrote, its metadata last: without it, nothing is a checkpoint
    try {
      auto location = io::open_location(output_.string());
      location.backend->remove_tree(location.key);
    } catch (std::exception const&) { // unreachable store: replace=true takes the remains next time
    }
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(staging_, ec);
}

CAIRN_DECL void staged_output::commit() {
  if (in_place_) { // the metadata, written last, made it whole
    committed_ = true;
    return;
  }
  io::fsync_directory(staging_);
  auto parent = staging_.parent_path();
  std::filesystem::path aside;
  std::error_code ec;
  if (std::filesystem::is_directory(output_, ec) && detail::has_entries(output_)) {
    if (!replace_)
      throw config_error({{"output.path", "'" + output_.string() +
                                              "' was written by something else during the conversion: left as "
                                              "it is; the conversion is not kept"}});
    if (auto problem = detail::not_replaceable(output_))
      throw config_error({{"output.path", "'" + output_.string() + "' changed during the conversion and " + *problem +
                                              ": left as it is"}});
    aside = parent / ("." + staging_.filename().string().substr(1) + ".replaced");
    io::rename_path(output_, aside);
  }
  try {
    io::rename_path(staging_, output_); // an empty directory in the way is replaced atomically
  } catch (io::io_error const&) {
    if (!aside.empty()) io::rename_path(aside, output_); // put it back
    throw;
  }
  committed_ = true;
  io::fsync_directory(parent);
  if (!aside.empty()) io::remove_tree(aside);
}

CAIRN_DECL void detail::refuse_incomplete_save(std::filesystem::path const& input) {
  if (auto status = save_status(input); status.is_save && status.problem)
    throw checkpoint_error(checkpoint_errc::incomplete, "input.path: not a complete save: " + *status.problem);
}

namespace detail {

/// The metadata of the conversion of a save described by `in`: a fresh identity, the shards asked for.
inline checkpoint_metadata converted_metadata(checkpoint_metadata const& in, convert_config const& config) {
  checkpoint_metadata out;
  out.format = config.output.format;
  out.save_id = new_save_id();
  out.config = in.config;
  out.metadata = in.metadata;
  for (std::size_t i = 0; i < in.shard_names.size(); ++i)
    if (i == 0 ? config.output.model_weights : config.output.optimizer_state)
      out.shard_names.push_back(in.shard_names[i]);
  if (out.shard_names.empty())
    throw checkpoint_error(checkpoint_errc::invalid_request,
                           "nothing to convert: neither model_weights nor optimizer_state");
  return out;
}

/// Writes the tensors of a conversion, parameter by parameter, each read whole from the input.
struct conversion_writer {
  checkpoint_reader& reader;
  checkpoint_metadata const& out;
  std::optional<data_type> conversion;
  std::vector<std::vector<std::byte>> buffers; // alive until their file is written
  std::size_t tensors = 0;

  void add(io::safetensors_writer& writer, parameter_layout const& p, std::vector<std::uint64_t> shape) {
    for (auto const& shard : out.shard_names) {
      buffers.push_back(reader.read(p, shard));
      writer.add(tensor_name(p.name, shard), p.dtype, shape, buffers.back(), stored_type(p.dtype, conversion));
      ++tensors;
    }
  }
  parameter_layout stored(parameter_layout p) const {
    p.dtype = stored_type(p.dtype, conversion);
    return p;
  }
  /// One rank holding everything whole: any world size loads it by resharding.
  void write_distributed(std::filesystem::path const& dir, checkpoint_metadata& metadata) {
    rank_layout layout;
    for (auto const& [name, p] : reader.parameters()) layout.parameters.push_back(stored(p));
    metadata.ranks.push_back(std::move(layout));
    io::safetensors_writer writer(formats::rank_file(dir, 0));
    writer.set_metadata("format", "cairn.distributed");
    record_identity(writer, metadata, 0);
    for (auto const& [name, p] : reader.parameters()) add(writer, p, {whole_numel(p)});
    writer.write();
    write_distributed_metadata(dir, metadata);
  }
  void write_state_dict(std::filesystem::path const& dir, checkpoint_metadata& metadata, std::uint64_t per_file) {
    auto file_of = assign_state_dict_files(reader.parameters(), metadata.shard_names.size(), per_file);
    std::map<std::string, std::string> weight_map;
    std::map<std::size_t, std::vector<parameter_layout const*>> by_file;
    for (auto const& [name, p] : reader.parameters()) by_file[file_of[name]].push_back(&p);
    for (auto const& [file, params] : by_file) {
      io::safetensors_writer writer(dir / formats::state_dict_file(file));
      record_identity(writer, metadata);
      for (auto const* p : params) {
        add(writer, *p, p->shape);
        for (auto const& shard : metadata.shard_names)
          weight_map[tensor_name(p->name, shard)] = formats::state_dict_file(file);
        metadata.parameters.push_back(stored(*p));
      }
      writer.write();
      buffers.clear();
    }
    write_state_dict_index(dir, metadata, std::move(weight_map));
  }
};

} // namespace detail

CAIRN_DECL std::string convert_checkpoint(convert_config const& given) {
  auto requested = given;
  requested.input.path = resolve_save(given.input.path); // a save on a store: its newest complete generation
  detail::refuse_overlap(requested.input.path, requested.output.path);
  detail::refuse_incomplete_save(requested.input.path);
  if (requested.output.format == checkpoint_format::external)
    throw checkpoint_error(
        checkpoint_errc::needs_converter,
        "convert writes the distributed and state_dict formats; the external format needs the model's "
        "converter: cairn-llama convert for llama, mistral and qwen2, a program's own convert for its model "
        "(as cairn-train convert)");
  detail::checkpoint_reader reader(requested.input);
  if (reader.parameters().empty()) // a checkpoint of nothing: its metadata lost its layouts, or was edited
    throw checkpoint_error(checkpoint_errc::invalid_state,
                           requested.input.path.string() + ": holds no parameter: nothing to convert");
  if (reader.metadata().format == checkpoint_format::distributed) // the ranks' items stay behind: say so
    for (std::size_t r = 0; r < reader.metadata().ranks.size(); ++r) {
      io::safetensors_file file(formats::rank_file(requested.input.path, static_cast<int>(r)));
      auto const& recorded = file.metadata();
      auto item = std::find_if(recorded.begin(), recorded.end(),
                               [](auto const& entry) { return entry.first.starts_with(formats::item_key_prefix); });
      if (item == recorded.end()) continue;
      emit(severity::warning,
           {requested.input.path.string(), "the ranks' items (rank " + std::to_string(r) + "'s '" +
                                               item->first.substr(formats::item_key_prefix.size()) +
                                               "', say) are not converted: a conversion carries tensors alone"});
      break;
    }
  staged_output staged(requested.output.path, requested.replace);
  auto config = requested;
  config.output.path = staged.path();
  auto out = detail::converted_metadata(reader.metadata(), config);

  std::uint64_t input_bytes = 0;
  for (auto const& [name, p] : reader.parameters())
    input_bytes += detail::whole_numel(p) * io::size_of(p.dtype) * out.shard_names.size();
  progress_scope progress("converting", requested.output.path.string(), 2 * input_bytes); // read, then written

  io::make_folder(config.output.path.string());
  detail::conversion_writer writer{reader, out, config.output.data_type, {}, 0};
  if (config.output.format == checkpoint_format::distributed)
    writer.write_distributed(config.output.path, out);
  else
    writer.write_state_dict(config.output.path, out, config.output.parameters_per_file);
  staged.commit();
  return "converted " + std::to_string(writer.tensors) + " tensors of " + std::to_string(reader.parameters().size()) +
         " parameters to " + requested.output.path.string();
}

} // namespace cairn
