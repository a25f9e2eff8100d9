// Definitions of <cairn/checkpoint/format_files.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/config/detail/pretty.hpp>
#include <cairn/io/checksum.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/index.hpp>
#include <cairn/io/safetensors.hpp>
#include <cairn/io/safetensors_writer.hpp>

#include <boost/describe/enum_to_string.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace cairn {

CAIRN_DECL std::string shape_text(std::vector<std::uint64_t> const& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

CAIRN_DECL std::optional<checkpoint_format> detect_format(std::filesystem::path const& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return std::nullopt;
  if (std::filesystem::exists(formats::metadata_file(dir), ec)) return checkpoint_format::distributed;
  if (std::filesystem::exists(formats::state_dict_index(dir), ec)) return checkpoint_format::state_dict;
  if (std::filesystem::exists(formats::external_config(dir), ec)) return checkpoint_format::external;
  return std::nullopt;
}

CAIRN_DECL checkpoint_metadata read_stored_metadata(std::filesystem::path const& dir, checkpoint_format format) {
  switch (format) {
  case checkpoint_format::distributed:
    return read_checkpoint_metadata(formats::metadata_file(dir));
  case checkpoint_format::state_dict: {
    auto index = formats::state_dict_index(dir);
    return parse_checkpoint_metadata(io::read_index(index).metadata, index.string());
  }
  case checkpoint_format::external:
    break;
  }
  throw checkpoint_error(checkpoint_errc::invalid_request,
                         dir.string() + ": an external checkpoint stores no cairn metadata");
}

} // namespace cairn
