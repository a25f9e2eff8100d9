// Definitions of <cairn/io/safetensors.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/detail/json_keys.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/checksum.hpp>
#include <cairn/io/detail/checked.hpp>
#include <cairn/io/dtype.hpp>
#include <cairn/io/error.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/safetensors.hpp>
#include <cairn/io/slice.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cairn::io {

CAIRN_DECL std::uint64_t tensor_info::numel() const noexcept {
  std::uint64_t n = 1;
  for (auto d : shape) n *= d; // checked when the header was parsed
  return n;
}

CAIRN_DECL tensor_info const* safetensors_header::find(std::string_view name) const noexcept {
  auto at = std::lower_bound(by_name.begin(), by_name.end(), name,
                             [&](std::uint32_t i, std::string_view n) { return tensors[i].name < n; });
  return at != by_name.end() && tensors[*at].name == name ? &tensors[*at] : nullptr;
}

} // namespace cairn::io

namespace cairn::io::detail {

CAIRN_DECL std::uint64_t read_le64(std::span<std::byte const> bytes) noexcept {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < 8; ++i) value |= static_cast<std::uint64_t>(bytes[i]) << (8 * i);
  return value;
}

CAIRN_DECL std::uint64_t header_number(boost::json::value const& v, std::filesystem::path const& source,
                                       std::string const& what) {
  if (v.is_uint64()) return v.get_uint64();
  if (v.is_int64() && v.get_int64() >= 0) return static_cast<std::uint64_t>(v.get_int64());
  throw io_error(source, what + " must be a non-negative integer");
}

CAIRN_DECL tensor_info parse_tensor_entry(std::string name, boost::json::value const& entry,
                                          std::filesystem::path const& source) {
  auto where = "tensor '" + name + "'";
  if (!entry.is_object()) throw io_error(source, where + ": entry must be an object");
  auto const& object = entry.get_object();
  for (auto const& field : object)
    if (field.key() != "dtype" && field.key() != "shape" && field.key() != "data_offsets")
      throw io_error(source, where + ": unexpected field '" + std::string(field.key()) + "'");
  tensor_info info;
  info.name = std::move(name);
  auto const* dtype_value = object.if_contains("dtype");
  if (!dtype_value || !dtype_value->is_string()) throw io_error(source, where + ": dtype must be a string");
  auto parsed = parse_dtype(dtype_value->get_string());
  if (!parsed)
    throw io_error(source, io_errc::unsupported,
                   where + ": unknown dtype '" + std::string(dtype_value->get_string()) + "'");
  info.dtype = *parsed;

  auto const* shape = object.if_contains("shape");
  if (!shape || !shape->is_array()) throw io_error(source, where + ": shape must be an array");
  std::uint64_t numel = 1;
  for (auto const& d : shape->get_array()) {
    info.shape.push_back(header_number(d, source, where + ": shape dimension"));
    // libtorch and every reader index with signed 64-bit sizes.
    if (info.shape.back() > std::uint64_t{INT64_MAX})
      throw io_error(source, where + ": shape dimension " + std::to_string(info.shape.back()) + " is 2^63 or more");
    auto product = checked_multiply(numel, info.shape.back());
    if (!product) throw io_error(source, where + ": shape has more elements than 64 bits can count");
    numel = *product;
  }

  auto const* offsets = object.if_contains("data_offsets");
  if (!offsets || !offsets->is_array() || offsets->get_array().size() != 2)
    throw io_error(source, where + ": data_offsets must be an array of two integers");
  info.begin = header_number(offsets->get_array()[0], source, where + ": data_offsets");
  info.end = header_number(offsets->get_array()[1], source, where + ": data_offsets");
  if (info.end < info.begin) throw io_error(source, where + ": data_offsets end before they begin");
  auto bytes = checked_multiply(numel, size_of(info.dtype));
  if (!bytes || *bytes != info.end - info.begin)
    throw io_error(source, where + ": holds " + std::to_string(info.end - info.begin) + " bytes, but " +
                               std::string(io::name(info.dtype)) + " of this shape needs " +
                               (bytes ? std::to_string(*bytes) : std::string("more than 2^64")));
  return info;
}

} // namespace cairn::io::detail

namespace cairn::io {

CAIRN_DECL safetensors_header parse_header(std::span<std::byte const> file, std::filesystem::path const& source) {
  return parse_header(file, file.size(), source);
}

CAIRN_DECL safetensors_header parse_header(std::span<std::byte const> file, std::uint64_t file_size,
                                           std::filesystem::path const& source) {
  if (file_size < 8 || file.size() < 8)
    throw io_error(source, "too short to be a safetensors file (" + std::to_string(file_size) + " bytes)");
  auto header_size = detail::read_le64(file);
  if (header_size > max_header_size)
    throw io_error(source, io_errc::too_large,
                   "header length " + std::to_string(header_size) + " exceeds the limit of " +
                       std::to_string(max_header_size) + " bytes");
  if (header_size > file_size - 8)
    throw io_error(source, "header length " + std::to_string(header_size) + " runs past the end of the file (" +
                               std::to_string(file_size) + " bytes)");
  if (header_size > file.size() - 8) throw io_error(source, io_errc::invalid_argument, "the header was not read whole");
  std::string_view text(reinterpret_cast<char const*>(file.data() + 8), static_cast<std::size_t>(header_size));
  boost::system::error_code ec;
  auto document = boost::json::parse(boost::json::string_view(text.data(), text.size()), ec);
  if (ec) throw io_error(source, "header is not valid JSON: " + ec.message());
  if (!document.is_object()) throw io_error(source, "header must be a JSON object");

  if (auto dup = cairn::detail::duplicate_key(text))
    throw io_error(source, "duplicate entry '" + *dup + "' in the header");

  safetensors_header header;
  header.data_offset = 8 + header_size;
  for (auto const& entry : document.get_object()) {
    if (entry.key() == "__metadata__") {
      if (!entry.value().is_object()) throw io_error(source, "__metadata__ must be an object of strings");
      for (auto const& item : entry.value().get_object()) {
        if (!item.value().is_string())
          throw io_error(source, "__metadata__ entry '" + std::string(item.key()) + "' must be a string");
        header.metadata.emplace(item.key(), item.value().get_string());
      }
      continue;
    }
    header.tensors.push_back(detail::parse_tensor_entry(std::string(entry.key()), entry.value(), source));
  }

  std::sort(header.tensors.begin(), header.tensors.end(), [](tensor_info const& a, tensor_info const& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  std::uint64_t data_size = file_size - header.data_offset;
  std::uint64_t covered = 0;
  for (auto const& t : header.tensors) {
    if (t.begin < covered) throw io_error(source, "tensor '" + t.name + "' overlaps the tensor before it");
    if (t.begin > covered)
      throw io_error(source, "bytes " + std::to_string(covered) + " to " + std::to_string(t.begin) +
                                 " of the data are not covered by any tensor (before '" + t.name + "')");
    if (t.end > data_size)
      throw io_error(source, "tensor '" + t.name + "' runs past the end of the file (data_offsets end at " +
                                 std::to_string(t.end) + ", the data section holds " + std::to_string(data_size) +
                                 " bytes)");
    covered = t.end;
  }
  if (covered != data_size)
    throw io_error(source, std::to_string(data_size - covered) + " bytes after the last tensor are not covered");
  header.by_name.resize(header.tensors.size());
  for (std::uint32_t i = 0; i < header.by_name.size(); ++i) header.by_name[i] = i;
  std::sort(header.by_name.begin(), header.by_name.end(),
            [&](std::uint32_t a, std::uint32_t b) { return header.tensors[a].name < header.tensors[b].name; });
  return header;
}

CAIRN_DECL tensor_info const& safetensors_file::at(std::string_view name) const {
  if (auto const* t = find(name)) return *t;
  throw io_error(path(), "no tensor named '" + std::string(name) + "'");
}

namespace detail {
/// The header of the safetensors object `where`: its first 8 bytes, then the length they give.
inline safetensors_header read_remote_header(storage_location const& where, std::uint64_t size,
                                             std::filesystem::path const& source) {
  if (size < 8) throw io_error(source, "too short to be a safetensors file (" + std::to_string(size) + " bytes)");
  std::vector<std::byte> prefix(8);
  where.backend->read(where.key, 0, prefix);
  auto length = read_le64(prefix);
  if (length <= max_header_size && length <= size - 8) {
    prefix.resize(static_cast<std::size_t>(8 + length));
    where.backend->read(where.key, 8, std::span(prefix).subspan(8));
  }
  return parse_header(prefix, size, source);
}

inline std::uint64_t object_size(storage_location const& where, std::filesystem::path const& source) {
  auto size = where.backend->size(where.key);
  if (!size)
    throw io_error(source, std::make_error_code(std::errc::no_such_file_or_directory), "cannot open: no such object");
  return *size;
}
} // namespace detail

CAIRN_DECL safetensors_file::safetensors_file(std::filesystem::path path) : path_(std::move(path)) {
  if (!is_object_store_path(path_.string())) {
    file_.emplace(path_);
    header_ = parse_header(file_->bytes(), path_);
    return;
  }
  remote_ = open_location(path_.string());
  size_ = detail::object_size(remote_, path_);
  header_ = detail::read_remote_header(remote_, size_, path_);
}

CAIRN_DECL std::span<std::byte const> safetensors_file::bytes(tensor_info const& t) const {
  if (file_)
    return file_->bytes().subspan(static_cast<std::size_t>(header_.data_offset + t.begin),
                                  static_cast<std::size_t>(t.byte_size()));
  // An object's tensor is read whole, once, with ranged GETs of exactly its bytes, and kept
  // while the file is open.
  {
    std::lock_guard lock(fetched_mutex_);
    if (auto found = fetched_.find({t.begin, t.end}); found != fetched_.end()) return *found->second;
  }
  auto bytes = std::make_unique<std::vector<std::byte>>(static_cast<std::size_t>(t.byte_size()));
  fetch(header_.data_offset + t.begin, *bytes);
  std::lock_guard lock(fetched_mutex_);
  auto& held = fetched_[{t.begin, t.end}];
  if (!held) held = std::move(bytes);
  return *held;
}

CAIRN_DECL void safetensors_file::release(tensor_info const& t) const noexcept {
  if (file_) return;
  std::lock_guard lock(fetched_mutex_);
  fetched_.erase({t.begin, t.end});
}

CAIRN_DECL void safetensors_file::fetch(std::uint64_t offset, std::span<std::byte> out) const {
  std::lock_guard lock(fetched_mutex_);
  if (read_ahead_ == 0 || out.size() >= read_ahead_) return remote_.backend->read(remote_.key, offset, out);
  if (offset < window_begin_ || offset + out.size() > window_begin_ + window_.size()) {
    window_begin_ = offset;
    window_.resize(static_cast<std::size_t>(std::min(read_ahead_, size_ - offset)));
    remote_.backend->read(remote_.key, offset, window_);
  }
  std::memcpy(out.data(), window_.data() + (offset - window_begin_), out.size());
}

CAIRN_DECL void safetensors_file::read_into(tensor_info const& t, std::uint64_t offset,
                                            std::span<std::byte> out) const {
  if (offset > t.byte_size() || out.size() > t.byte_size() - offset)
    throw io_error(path(), "tensor '" + t.name + "': read past its end");
  if (file_)
    file_->read_at(header_.data_offset + t.begin + offset, out);
  else
    fetch(header_.data_offset + t.begin + offset, out);
}

CAIRN_DECL bool safetensors_file::has_checksums() const {
  return std::all_of(tensors().begin(), tensors().end(),
                     [&](tensor_info const& t) { return metadata().contains(checksum_key(t.name)); });
}

CAIRN_DECL void safetensors_file::verify(tensor_info const& t) const {
  auto it = metadata().find(checksum_key(t.name));
  if (it == metadata().end()) throw io_error(path(), "tensor '" + t.name + "' has no recorded checksum");
  auto expected = from_hex(it->second);
  if (!expected) throw io_error(path(), "tensor '" + t.name + "' has a malformed checksum");
  if (checksum_of(bytes(t)) != *expected)
    throw io_error(path(), io_errc::checksum_mismatch,
                   "tensor '" + t.name + "' is corrupt: its checksum does not match");
}

CAIRN_DECL void safetensors_file::read_box(tensor_info const& t, box const& region, std::span<std::byte> target) const {
  try {
    copy_box(bytes(t), t.shape, size_of(t.dtype), region, target);
  } catch (io_error const&) {
    throw;
  } catch (error const& e) {
    throw io_error(path(), "tensor '" + t.name + "': " + e.what());
  }
}

} // namespace cairn::io
