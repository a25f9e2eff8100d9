#pragma once

// Converting a checkpoint between cairn's own formats (distributed <-> state_dict) without the
// model's code, from the checkpoint's own metadata: what `cairn convert` does. No libtorch.

#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/files.hpp>
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
#include <string>
#include <vector>

namespace cairn {

/// What `cairn convert` takes: the checkpoint to read and how to write it.
struct convert_config {
  checkpoint_load_metadata_config input;
  checkpoint_save_config output;

  convert_config() { output.optimizer_state = true; }
};
BOOST_DESCRIBE_STRUCT(convert_config, (), (input, output))

constexpr auto cairn_fields(convert_config const*) {
  return fields(field(&convert_config::input, "The checkpoint to convert (path and format).", hint::core),
                field(&convert_config::output,
                      "Where and how to write it: path, format, which state (weights, optimizer_state: whatever "
                      "the input holds by default), parameters_per_file, data_type.",
                      hint::core));
}

/// A checkpoint read without the model: every parameter whole, one tensor at a time.
class checkpoint_reader {
public:
  CAIRN_DECL explicit checkpoint_reader(checkpoint_load_metadata_config const& input);

  [[nodiscard]] checkpoint_metadata const& metadata() const noexcept { return metadata_; }

  [[nodiscard]] std::map<std::string, parameter_layout> const& parameters() const noexcept { return parameters_; }

  /// The whole tensor `name`/`shard`, checksums verified, in its saved dtype.
  [[nodiscard]] CAIRN_DECL std::vector<std::byte> read(parameter_layout const& p, std::string const& shard);

private:
  CAIRN_DECL io::safetensors_file const& file(std::filesystem::path const& path);

  checkpoint_load_metadata_config input_;
  checkpoint_metadata metadata_;
  io::safetensors_index index_;
  std::map<std::string, parameter_layout> parameters_;
  std::map<std::string, std::unique_ptr<io::safetensors_file>> files_;
};

/// A config_error when `output` is `input`, or one is inside the other: a conversion never
/// writes into or over what it reads.
CAIRN_DECL void refuse_overlap(std::filesystem::path const& input, std::filesystem::path const& output);

/// Converts the checkpoint `config.input` names into `config.output`, checksums verified;
/// returns a one-line summary.
CAIRN_DECL std::string convert_checkpoint(convert_config const& config);

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/convert.ipp>
#endif
