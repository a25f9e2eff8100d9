#pragma once

// Converting a checkpoint between cairn's own formats (distributed <-> state_dict) without the
// model's code, from the checkpoint's own metadata: what `cairn convert` does. No libtorch.

#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/checkpoint/verify.hpp>
#include <cairn/config/docs.hpp>
#include <cairn/config/json.hpp>
#include <cairn/detail/decl.hpp>
#include <cairn/io/index.hpp>
#include <cairn/io/safetensors.hpp>
#include <cairn/io/safetensors_writer.hpp>
#include <cairn/progress.hpp>

#include <boost/describe/class.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cairn {

/// What `cairn convert` takes: the checkpoint to read and how to write it.
struct convert_config {
  checkpoint_load_metadata_config input;
  checkpoint_save_config output;
  bool replace = false;

  convert_config() { output.optimizer_state = true; }
};
BOOST_DESCRIBE_STRUCT(convert_config, (), (input, output, replace))

constexpr auto cairn_fields(convert_config const*) {
  return fields(field(&convert_config::input, "The checkpoint to convert (path and format).", hint::core),
                field(&convert_config::output,
                      "Where and how to write it: path, format, which state (weights, optimizer_state: whatever "
                      "the input holds by default), parameters_per_file, data_type.",
                      hint::core),
                field(&convert_config::replace,
                      "Replace output.path when it is a directory that is not empty: an earlier conversion, or "
                      "what a failed one left (files a conversion writes, nothing else). A save of an experiment "
                      "(checkpoints/<n>, export/<n>, or any directory with a completion marker) is never replaced.",
                      hint::feature));
}

/// The output directory of a conversion: written under a staging name beside it
/// (`.<name>.partial-<id>`) and renamed into place once whole, so that no reader ever sees half a
/// conversion, a failed one leaves nothing, and two conversions into one path never mix files.
/// On an object store (no rename) it is written in place, its metadata or index last: a reader
/// finds no checkpoint until then, a failed one is removed, and replace=true removes the earlier
/// conversion before writing (two conversions into one prefix at once are not told apart).
class staged_output {
public:
  /// Refuses, as a config_error on `output.path`, an output that exists but is not a directory,
  /// that holds a save of an experiment (never replaced), or that is a directory with anything
  /// in it unless `replace`; then makes the staging directory.
  CAIRN_DECL staged_output(std::filesystem::path output, bool replace);
  staged_output(staged_output const&) = delete;
  staged_output& operator=(staged_output const&) = delete;
  /// Removes the staging directory unless committed.
  CAIRN_DECL ~staged_output();

  /// Where the conversion writes its files.
  [[nodiscard]] std::filesystem::path const& path() const noexcept { return staging_; }

  /// Puts the staged directory in the output's place, durably: an empty directory there is
  /// replaced; a non-empty one (with `replace`) is set aside, then removed. An output that
  /// another conversion put in place meanwhile is an error, and nothing of it is touched.
  CAIRN_DECL void commit();

private:
  /// An object store's output: checked and emptied, then written in place.
  CAIRN_DECL void write_in_place();

  std::filesystem::path output_;
  std::filesystem::path staging_;
  bool replace_;
  bool in_place_ = false;
  bool committed_ = false;
};

namespace detail {

/// A checkpoint read without the model: every parameter whole, one tensor at a time.
class checkpoint_reader {
public:
  CAIRN_DECL explicit checkpoint_reader(checkpoint_load_metadata_config const& input);

  [[nodiscard]] checkpoint_metadata const& metadata() const noexcept { return metadata_; }

  [[nodiscard]] std::map<std::string, parameter_layout> const& parameters() const noexcept { return parameters_; }

  /// The whole tensor `name`/`shard`, checksums verified, in its saved dtype.
  [[nodiscard]] CAIRN_DECL std::vector<std::byte> read(parameter_layout const& p, std::string const& shard);

private:
  /// The file at `path`, opened once, after checking it is a file of this save (rank `rank`'s,
  /// for a distributed one).
  CAIRN_DECL io::safetensors_file const& file(std::filesystem::path const& path, std::optional<int> rank);

  checkpoint_load_metadata_config input_;
  checkpoint_metadata metadata_;
  io::safetensors_index index_;
  std::map<std::string, parameter_layout> parameters_;
  std::map<std::string, std::vector<std::pair<int, shard_layout>>> holders_; ///< distributed: who wrote what
  std::map<std::string, std::unique_ptr<io::safetensors_file>> files_;
};

/// A config_error when `output` is `input`, or one is inside the other: a conversion never
/// writes into or over what it reads.
CAIRN_DECL void refuse_overlap(std::filesystem::path const& input, std::filesystem::path const& output);

/// An error when `input` is a save of an experiment that is not complete (no marker, or files
/// other than its marker lists): a conversion never reads half a save.
CAIRN_DECL void refuse_incomplete_save(std::filesystem::path const& input);
} // namespace detail

/// Converts the checkpoint `config.input` names into `config.output`, checksums verified;
/// returns a one-line summary.
CAIRN_DECL std::string convert_checkpoint(convert_config const& config);

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/convert.ipp>
#else
#include <cairn/config/detail/reflect.hpp>
namespace cairn::detail { // made once, in cairn::compiled (src.hpp)
extern template config_ops const& config_of<convert_config>();
} // namespace cairn::detail
#endif
