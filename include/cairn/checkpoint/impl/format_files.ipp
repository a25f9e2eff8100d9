// Definitions of <cairn/checkpoint/format_files.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/checkpoint/detail/identity.hpp>
#include <cairn/checkpoint/directory.hpp>
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

CAIRN_DECL std::optional<std::string> detail::item_problem(std::map<std::string, std::string> const& items) {
  std::size_t total = 0;
  for (auto const& [name, bytes] : items) {
    if (name.empty()) return "an item has an empty name";
    if (name.size() > 200) return "item '" + name.substr(0, 40) + "...': a name of more than 200 characters";
    for (unsigned char c : name)
      if (c < 0x20 || c == 0x7f) return "item '" + name + "': a control character in its name";
    total += bytes.size();
  }
  if (total > max_item_bytes)
    return "the items hold " + std::to_string(total) + " bytes, more than a rank may save (" +
           std::to_string(max_item_bytes) + ")";
  return std::nullopt;
}

CAIRN_DECL void detail::put_items(std::map<std::string, std::string>& metadata,
                                  std::map<std::string, std::string> const& items) {
  static constexpr char digits[] = "0123456789abcdef";
  for (auto const& [name, bytes] : items) {
    std::string hex;
    hex.reserve(2 * bytes.size());
    for (unsigned char c : bytes) {
      hex += digits[c >> 4];
      hex += digits[c & 15];
    }
    metadata[std::string(formats::item_key_prefix) + name] = std::move(hex);
    metadata[std::string(formats::item_checksum_prefix) + name] =
        io::to_hex(io::checksum_of(std::as_bytes(std::span(bytes))));
  }
}

CAIRN_DECL std::map<std::string, std::string> detail::read_items(std::map<std::string, std::string> const& metadata,
                                                                 std::vector<std::string>& problems) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::map<std::string, std::string> items;
  for (auto const& [key, hex] : metadata) {
    if (!key.starts_with(formats::item_key_prefix)) continue;
    auto name = key.substr(formats::item_key_prefix.size());
    std::string bytes;
    bytes.reserve(hex.size() / 2);
    bool valid = hex.size() % 2 == 0;
    for (std::size_t i = 0; valid && i < hex.size(); i += 2) {
      int high = nibble(hex[i]), low = nibble(hex[i + 1]);
      valid = high >= 0 && low >= 0;
      bytes += static_cast<char>(high * 16 + low);
    }
    if (!valid) {
      problems.push_back("item '" + name + "': its bytes are not hexadecimal");
      continue;
    }
    auto recorded = metadata.find(std::string(formats::item_checksum_prefix) + name);
    if (recorded == metadata.end()) {
      problems.push_back("item '" + name + "' has no recorded checksum");
      continue;
    }
    if (io::from_hex(recorded->second) != io::checksum_of(std::as_bytes(std::span(bytes)))) {
      problems.push_back("item '" + name + "' is corrupt: its checksum does not match");
      continue;
    }
    items.emplace(std::move(name), std::move(bytes));
  }
  if (auto problem = item_problem(items)) { // what no save writes: the file was altered
    problems.push_back(*problem + " (no save writes that)");
    items.clear();
  }
  for (auto const& [key, value] : metadata) // a checksum whose item is gone: the item was removed
    if (key.starts_with(formats::item_checksum_prefix) &&
        !metadata.contains(std::string(formats::item_key_prefix) + key.substr(formats::item_checksum_prefix.size())))
      problems.push_back("item '" + key.substr(formats::item_checksum_prefix.size()) +
                         "' is recorded by its checksum alone: its bytes were removed");
  return items;
}

CAIRN_DECL std::optional<checkpoint_format> detect_format(std::filesystem::path const& dir) {
  if (!cairn::detail::is_folder(dir)) return std::nullopt;
  if (cairn::detail::present(formats::metadata_file(dir))) return checkpoint_format::distributed;
  if (cairn::detail::present(formats::state_dict_index(dir))) return checkpoint_format::state_dict;
  if (cairn::detail::present(formats::external_config(dir))) return checkpoint_format::external;
  return std::nullopt;
}

CAIRN_DECL checkpoint_metadata read_stored_metadata(std::filesystem::path const& given, checkpoint_format format) {
  auto dir = resolve_save(given); // a save on a store: its newest complete generation
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

namespace detail {
// Declared here too: <cairn/checkpoint/detail/identity.hpp> includes this file's header first.
CAIRN_DECL std::optional<std::string> identity_problem(io::safetensors_file const& file,
                                                       checkpoint_metadata const& metadata, std::optional<int> rank);
} // namespace detail

namespace detail {
inline std::map<std::string, std::string> items_of_rank(std::filesystem::path const& dir,
                                                        checkpoint_metadata const& metadata, int r) {
  auto file_path = formats::rank_file(dir, r);
  io::safetensors_file file(file_path);
  if (auto problem = detail::identity_problem(file, metadata, r)) throw io::io_error(file_path, *problem);
  std::vector<std::string> problems;
  auto items = detail::read_items(file.metadata(), problems);
  if (!problems.empty()) throw io::io_error(file_path, problems.front());
  return items;
}

inline checkpoint_metadata items_metadata(std::filesystem::path const& dir) {
  auto metadata = read_checkpoint_metadata(formats::metadata_file(dir));
  if (metadata.format != checkpoint_format::distributed)
    throw checkpoint_error(checkpoint_errc::invalid_request,
                           dir.string() + ": items are saved by the distributed format alone, and this checkpoint is " +
                               format_name(metadata.format));
  return metadata;
}
} // namespace detail

CAIRN_DECL std::vector<std::map<std::string, std::string>> saved_items(std::filesystem::path const& path) {
  auto dir = resolve_save(path);
  auto metadata = detail::items_metadata(dir);
  std::vector<std::map<std::string, std::string>> out;
  for (int r = 0; r < metadata.world_size(); ++r) out.push_back(detail::items_of_rank(dir, metadata, r));
  return out;
}

CAIRN_DECL std::map<std::string, std::string> saved_items(std::filesystem::path const& path, int rank) {
  auto dir = resolve_save(path);
  auto metadata = detail::items_metadata(dir);
  if (rank < 0 || rank >= metadata.world_size())
    throw checkpoint_error(checkpoint_errc::invalid_request, dir.string() + ": saved by " +
                                                                 std::to_string(metadata.world_size()) +
                                                                 " ranks, no rank " + std::to_string(rank));
  return detail::items_of_rank(dir, metadata, rank);
}

} // namespace cairn
