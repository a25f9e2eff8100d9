// Definitions of <cairn/io/safetensors_writer.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/io/backend.hpp>
#include <cairn/io/checksum.hpp>
#include <cairn/io/detail/background_hash.hpp>
#include <cairn/io/detail/checked.hpp>
#include <cairn/io/dtype.hpp>
#include <cairn/io/error.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/float_convert.hpp>
#include <cairn/io/safetensors.hpp>
#include <cairn/io/safetensors_writer.hpp>
#include <cairn/progress.hpp>

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unistd.h>
#include <vector>

namespace cairn::io {

CAIRN_DECL void safetensors_writer::add(std::string name, dtype source_type, std::vector<std::uint64_t> shape,
                                        std::span<std::byte const> bytes, std::optional<dtype> stored_type) {
  declare(std::move(name), source_type, std::move(shape), stored_type);
  check_size(entries_.back(), bytes);
  entries_.back().bytes = bytes;
}

CAIRN_DECL void safetensors_writer::declare(std::string name, dtype source_type, std::vector<std::uint64_t> shape,
                                            std::optional<dtype> stored_type) {
  if (file_ || joined_ || stream_)
    throw io_error(path_, io_errc::invalid_argument, "tensor '" + name + "' declared after the file was opened");
  if (name == "__metadata__") throw io_error(path_, io_errc::invalid_argument, "'__metadata__' cannot name a tensor");
  if (index_.contains(name)) throw io_error(path_, io_errc::invalid_argument, "tensor '" + name + "' added twice");
  std::uint64_t numel = 1;
  for (auto d : shape) {
    auto product = detail::checked_multiply(numel, d);
    if (!product || d > std::uint64_t{INT64_MAX})
      throw io_error(path_, io_errc::too_large, "tensor '" + name + "': shape too large");
    numel = *product;
  }
  auto stored = stored_type.value_or(source_type);
  if (!detail::checked_multiply(numel, size_of(stored)))
    throw io_error(path_, io_errc::too_large, "tensor '" + name + "': shape too large");
  if (!convertible(source_type, stored))
    throw io_error(path_, io_errc::invalid_argument,
                   "tensor '" + name + "': cannot convert " + std::string(io::name(source_type)) + " to " +
                       std::string(io::name(stored)));
  index_.emplace(name, entries_.size());
  entries_.push_back({std::move(name), source_type, stored, std::move(shape), {}, numel, numel * size_of(stored), 0});
}

CAIRN_DECL void safetensors_writer::declare_shared(std::string name, dtype source_type,
                                                   std::vector<std::uint64_t> shape, std::optional<dtype> stored_type) {
  declare(std::move(name), source_type, std::move(shape), stored_type);
  entries_.back().shared = true;
}

CAIRN_DECL void safetensors_writer::write() {
  open();
  for (auto& e : entries_) put(e.name, e.bytes);
  commit();
}

CAIRN_DECL void safetensors_writer::open() {
  auto placeholder = lay_out();
  auto location = open_location(path_.string());
  stream_ = location.backend->open_writer(location.key, data_start_);
  write_prefix(placeholder);
}

namespace detail {
/// The temporary name of a file several writers share: one they all derive from the token.
inline std::filesystem::path shared_temporary(std::filesystem::path const& final_path, std::string const& token) {
  bool plain = !token.empty() && std::all_of(token.begin(), token.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_';
  });
  if (!plain)
    throw io_error(final_path, io_errc::invalid_argument, "the token of a shared file must be plain: '" + token + "'");
  std::string name = ".";
  name += final_path.filename().string();
  name += ".shared-";
  name += token;
  return final_path.parent_path() / name;
}

/// Several writers of one file write at offsets of their own: an object store has no such file.
inline void refuse_shared_object(std::filesystem::path const& path) {
  if (is_object_store_path(path.string()))
    throw io_error(path, io_errc::unsupported, "a file several ranks write together needs a POSIX directory");
}
} // namespace detail

CAIRN_DECL void safetensors_writer::open_shared(std::string const& token) {
  detail::refuse_shared_object(path_);
  start(std::make_unique<atomic_file>(path_, detail::shared_temporary(path_, token)));
  detail::fault_point("write", path_);
  if (::ftruncate(file_->fd(), static_cast<off_t>(file_size())) != 0) throw system_error(path_, "ftruncate");
}

CAIRN_DECL void safetensors_writer::join_shared(std::string const& token) {
  if (file_ || joined_) throw io_error(path_, io_errc::invalid_argument, "joined after the file was opened");
  detail::refuse_shared_object(path_);
  start(nullptr);
  joined_ = open_file(detail::shared_temporary(path_, token), O_WRONLY);
}

CAIRN_DECL std::string safetensors_writer::lay_out() {
  std::uint64_t offset = 0;
  for (auto& e : entries_) {
    e.begin = offset;
    offset += e.stored_size;
  }
  auto placeholder = header_text(); // checksums are not known yet: same length, patched in commit
  if (placeholder.size() > max_header_size)
    throw io_error(path_, io_errc::too_large,
                   "a header of " + std::to_string(placeholder.size()) + " bytes (" + std::to_string(entries_.size()) +
                       " tensors) exceeds the " + std::to_string(max_header_size) +
                       " bytes safetensors readers accept: spread the tensors over more files");
  data_start_ = 8 + placeholder.size();
  next_ = 0;
  return placeholder;
}

CAIRN_DECL void safetensors_writer::write_prefix(std::string const& placeholder) {
  auto length = static_cast<std::uint64_t>(placeholder.size());
  std::byte prefix[8];
  for (std::size_t i = 0; i < 8; ++i) prefix[i] = static_cast<std::byte>((length >> (8 * i)) & 0xffu);
  write_at(prefix, 0);
  write_at(std::as_bytes(std::span(placeholder)), 8);
}

CAIRN_DECL void safetensors_writer::start(std::unique_ptr<atomic_file> file) {
  auto placeholder = lay_out();
  if (!file) return;
  file_ = std::move(file);
  write_prefix(placeholder);
}

CAIRN_DECL void safetensors_writer::put(std::string const& name, std::span<std::byte const> bytes) {
  if (!file_ && !stream_)
    throw io_error(path_, io_errc::invalid_argument, "tensor '" + name + "' written before the file was opened");
  while (next_ < entries_.size() && entries_[next_].shared) ++next_;
  if (next_ >= entries_.size() || entries_[next_].name != name)
    throw io_error(path_, io_errc::invalid_argument, "tensor '" + name + "' written out of the declared order");
  auto& e = entries_[next_];
  check_size(e, bytes);
  write_tensor(e, bytes);
  ++next_;
}

CAIRN_DECL safetensors_writer::entry& safetensors_writer::shared_entry(std::string const& name) {
  auto found = index_.find(name);
  if (found == index_.end() || !entries_[found->second].shared)
    throw io_error(path_, io_errc::invalid_argument, "tensor '" + name + "' is not declared shared");
  return entries_[found->second];
}

CAIRN_DECL void safetensors_writer::put_part(std::string const& name, std::uint64_t first,
                                             std::span<std::byte const> bytes) {
  if (!file_ && !joined_)
    throw io_error(path_, io_errc::invalid_argument, "tensor '" + name + "' written before the file was opened");
  auto const& e = shared_entry(name);
  auto in = size_of(e.source_type);
  auto count = bytes.size() / in;
  if (bytes.size() % in != 0 || first > e.numel || count > e.numel - first)
    throw io_error(path_, io_errc::invalid_argument,
                   "tensor '" + name + "': " + std::to_string(bytes.size()) + " bytes from element " +
                       std::to_string(first) + " do not fit its " + std::to_string(e.numel) + " elements");
  write_converted(e, bytes, data_start_ + e.begin + first * size_of(e.stored_type), nullptr);
}

CAIRN_DECL void safetensors_writer::release() {
  if (!joined_) throw io_error(path_, io_errc::invalid_argument, "released without being joined");
  fsync_file(joined_.get(), path_);
  joined_ = unique_fd();
}

CAIRN_DECL void safetensors_writer::commit() {
  if (!file_ && !stream_) throw io_error(path_, io_errc::invalid_argument, "committed before it was opened");
  while (next_ < entries_.size() && entries_[next_].shared) ++next_;
  if (next_ != entries_.size())
    throw io_error(path_, io_errc::invalid_argument,
                   "tensor '" + entries_[next_].name + "' was declared but never written");
  if (policy_ == checksums::record) {
    hash_shared();
    auto final_header = header_text();
    write_at(std::as_bytes(std::span(final_header)), 8);
  }
  if (stream_) {
    stream_->commit();
    stream_.reset();
    return;
  }
  file_->commit();
  file_.reset();
}

CAIRN_DECL void safetensors_writer::hash_shared() {
  if (std::none_of(entries_.begin(), entries_.end(), [](entry const& e) { return e.shared; })) return;
  // The other writers have released their parts (the caller agreed on it): read back from the
  // file, opened anew so that a network file system shows what they wrote.
  mapped_file mapped(file_->temporary_path());
  if (mapped.bytes().size() != file_size())
    throw io_error(path_, io_errc::malformed,
                   "the shared file has " + std::to_string(mapped.bytes().size()) + " bytes, not " +
                       std::to_string(file_size()));
  // Read in pieces into one buffer: what the hashing holds stays small, whatever the file.
  constexpr std::uint64_t piece = std::uint64_t{8} << 20;
  std::vector<std::byte> buffer(static_cast<std::size_t>(piece));
  for (auto& e : entries_) {
    if (!e.shared) continue;
    checksum hash;
    for (std::uint64_t at = 0; at < e.stored_size; at += piece) {
      auto part = std::span(buffer).first(static_cast<std::size_t>(std::min(piece, e.stored_size - at)));
      mapped.read_at(data_start_ + e.begin + at, part);
      hash.update(part);
    }
    e.checksum = hash.value();
  }
}

CAIRN_DECL std::uint64_t safetensors_writer::data_size() const {
  std::uint64_t total = 0;
  for (auto const& e : entries_) total += e.stored_size;
  return total;
}

CAIRN_DECL std::string safetensors_writer::header_text() const {
  boost::json::object header;
  boost::json::object metadata;
  for (auto const& [key, value] : metadata_) metadata[key] = value;
  if (policy_ == checksums::record)
    for (auto const& e : entries_) metadata[checksum_key(e.name)] = to_hex(e.checksum.value_or(0));
  if (!metadata.empty()) header["__metadata__"] = std::move(metadata);
  for (auto const& e : entries_) {
    boost::json::array shape;
    for (auto d : e.shape) shape.emplace_back(d);
    header[e.name] = boost::json::object{{"dtype", name(e.stored_type)},
                                         {"shape", std::move(shape)},
                                         {"data_offsets", boost::json::array{e.begin, e.begin + e.stored_size}}};
  }
  auto text = boost::json::serialize(header);
  text.append((data_alignment - (8 + text.size()) % data_alignment) % data_alignment, ' ');
  return text;
}

CAIRN_DECL void safetensors_writer::check_size(entry const& e, std::span<std::byte const> bytes) const {
  if (bytes.size() != e.numel * size_of(e.source_type))
    throw io_error(path_, io_errc::invalid_argument,
                   "tensor '" + e.name + "': " + std::to_string(bytes.size()) + " bytes given for " +
                       std::to_string(e.numel) + " elements of " + std::string(io::name(e.source_type)));
}

CAIRN_DECL void safetensors_writer::write_converted(entry const& e, std::span<std::byte const> bytes,
                                                    std::uint64_t offset, checksum* hash) {
  constexpr std::size_t elements = std::size_t{4} << 20;
  auto in = size_of(e.source_type), out = size_of(e.stored_type);
  auto count = bytes.size() / in;
  if (e.source_type == e.stored_type) { // as they are, in pieces the progress counts
    constexpr std::size_t chunk = std::size_t{64} << 20;
    for (std::size_t at = 0; at < bytes.size(); at += chunk) {
      auto piece = bytes.subspan(at, std::min(chunk, bytes.size() - at));
      write_at(piece, offset + at);
      progress_scope::count(piece.size());
    }
    return;
  }
  buffer_.resize(std::min(elements, count) * out);
  for (std::size_t at = 0; at < count; at += elements) {
    auto n = std::min(elements, count - at);
    auto target = std::span(buffer_).first(n * out);
    convert(bytes.subspan(at * in, n * in), e.source_type, target, e.stored_type);
    if (hash) hash->update(target);
    write_at(target, offset + at * out);
    progress_scope::count(n * in); // the bytes of the state, whatever the stored type
  }
}

CAIRN_DECL void safetensors_writer::write_tensor(entry& e, std::span<std::byte const> bytes) {
  auto offset = data_start_ + e.begin;
  if (e.source_type == e.stored_type) {
    // The bytes are all there: a large tensor is hashed on another thread while it is written.
    std::optional<detail::background_hash> hasher;
    if (policy_ == checksums::record) hasher.emplace(bytes, true);
    write_converted(e, bytes, offset, nullptr);
    if (hasher) e.checksum = hasher->value();
  } else {
    checksum hash;
    write_converted(e, bytes, offset, policy_ == checksums::record ? &hash : nullptr);
    if (policy_ == checksums::record) e.checksum = hash.value();
  }
}

} // namespace cairn::io
