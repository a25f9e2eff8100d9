#pragma once

#include <cairn/io/checksum.hpp>
#include <cairn/io/convert.hpp>
#include <cairn/io/detail/checked.hpp>
#include <cairn/io/dtype.hpp>
#include <cairn/io/error.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/safetensors.hpp>
#include <cairn/progress.hpp>

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace cairn::io {

/// Whether a writer records a checksum of every tensor in `__metadata__`.
enum class checksums { record, skip };

/// Writes one safetensors file. Tensors are added first (their sizes fix the header), then
/// `write()` streams the header and their bytes, in the order they were added, to a temporary
/// file that is fsynced and renamed into place: a crash never leaves a partial file under the
/// final name. The header is padded with spaces so that the data starts 8-byte aligned. To hold
/// one tensor at a time instead, `declare` them all, `open`, `put` each in turn, `commit`.
///
///     io::safetensors_writer writer("model.safetensors");
///     writer.add("w", io::dtype::F32, {4, 4}, std::as_bytes(std::span(data)));
///     writer.write();
class safetensors_writer {
public:
  explicit safetensors_writer(std::filesystem::path path, checksums policy = checksums::record)
      : path_(std::move(path)), policy_(policy) {}

  /// Adds a tensor whose `bytes` (of `source_type`) stay valid until `write()`; it is stored as
  /// `stored_type` (converted on the way out) or as it is.
  void add(std::string name, dtype source_type, std::vector<std::uint64_t> shape, std::span<std::byte const> bytes,
           std::optional<dtype> stored_type = std::nullopt) {
    declare(std::move(name), source_type, std::move(shape), stored_type);
    check_size(entries_.back(), bytes);
    entries_.back().bytes = bytes;
  }

  /// Declares a tensor whose bytes come later, through `put` after `open` (streaming: one
  /// tensor in memory at a time). Its name, type and shape fix the header.
  void declare(std::string name, dtype source_type, std::vector<std::uint64_t> shape,
               std::optional<dtype> stored_type = std::nullopt) {
    if (file_) throw io_error(path_, "tensor '" + name + "' declared after the file was opened");
    if (name == "__metadata__") throw io_error(path_, "'__metadata__' cannot name a tensor");
    if (std::any_of(entries_.begin(), entries_.end(), [&](entry const& e) { return e.name == name; }))
      throw io_error(path_, "tensor '" + name + "' added twice");
    std::uint64_t numel = 1;
    for (auto d : shape) {
      auto product = detail::checked_multiply(numel, d);
      if (!product) throw io_error(path_, "tensor '" + name + "': shape too large");
      numel = *product;
    }
    auto stored = stored_type.value_or(source_type);
    if (!convertible(source_type, stored))
      throw io_error(path_, "tensor '" + name + "': cannot convert " + std::string(io::name(source_type)) + " to " +
                                std::string(io::name(stored)));
    entries_.push_back({std::move(name), source_type, stored, std::move(shape), {}, numel, numel * size_of(stored), 0});
  }

  /// A string in `__metadata__`.
  void set_metadata(std::string key, std::string value) { metadata_[std::move(key)] = std::move(value); }

  /// Bytes the file will take.
  [[nodiscard]] std::uint64_t file_size() const { return 8 + header_text().size() + data_size(); }

  /// Writes and commits the file of the tensors added. Throws io_error naming the file on any
  /// failure, leaving nothing under the final name.
  void write() {
    open();
    for (auto& e : entries_) put(e.name, e.bytes);
    commit();
  }

  /// Starts the file (a temporary one until `commit`) with its header; after it, `put` each
  /// declared tensor in the order declared.
  void open() {
    std::uint64_t offset = 0;
    for (auto& e : entries_) {
      e.begin = offset;
      offset += e.stored_size;
    }
    auto placeholder = header_text(); // checksums are not known yet: same length, patched in commit
    file_ = std::make_unique<atomic_file>(path_);
    auto length = static_cast<std::uint64_t>(placeholder.size());
    std::byte prefix[8];
    for (std::size_t i = 0; i < 8; ++i) prefix[i] = static_cast<std::byte>((length >> (8 * i)) & 0xffu);
    file_->write(prefix);
    file_->write(std::as_bytes(std::span(placeholder)));
    next_ = 0;
  }

  /// Writes the bytes (of its source type) of declared tensor `name`, the next one in order.
  void put(std::string const& name, std::span<std::byte const> bytes) {
    if (!file_) throw io_error(path_, "tensor '" + name + "' written before the file was opened");
    if (next_ >= entries_.size() || entries_[next_].name != name)
      throw io_error(path_, "tensor '" + name + "' written out of the declared order");
    auto& e = entries_[next_];
    check_size(e, bytes);
    write_tensor(*file_, e, bytes, buffer_);
    ++next_;
  }

  /// Completes the file: every declared tensor must have been written.
  void commit() {
    if (!file_) throw io_error(path_, "committed before it was opened");
    if (next_ != entries_.size())
      throw io_error(path_, "tensor '" + entries_[next_].name + "' was declared but never written");
    if (policy_ == checksums::record) {
      auto final_header = header_text();
      file_->write_at(std::as_bytes(std::span(final_header)), 8);
    }
    file_->commit();
    file_.reset();
  }

private:
  struct entry {
    std::string name;
    dtype source_type;
    dtype stored_type;
    std::vector<std::uint64_t> shape;
    std::span<std::byte const> bytes; ///< given to add(); empty when declared
    std::uint64_t numel;
    std::uint64_t stored_size;
    std::uint64_t begin;
    std::optional<std::uint64_t> checksum{};
  };

  [[nodiscard]] std::uint64_t data_size() const {
    std::uint64_t total = 0;
    for (auto const& e : entries_) total += e.stored_size;
    return total;
  }

  [[nodiscard]] std::string header_text() const {
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
    text.append((8 - (8 + text.size()) % 8) % 8, ' ');
    return text;
  }

  void check_size(entry const& e, std::span<std::byte const> bytes) const {
    if (bytes.size() != e.numel * size_of(e.source_type))
      throw io_error(path_, "tensor '" + e.name + "': " + std::to_string(bytes.size()) + " bytes given for " +
                                std::to_string(e.numel) + " elements of " + std::string(io::name(e.source_type)));
  }

  void write_tensor(atomic_file& file, entry& e, std::span<std::byte const> bytes, std::vector<std::byte>& buffer) {
    checksum hash;
    if (e.source_type == e.stored_type) {
      constexpr std::size_t chunk = std::size_t{64} << 20;
      for (std::size_t at = 0; at < bytes.size(); at += chunk) {
        auto piece = bytes.subspan(at, std::min(chunk, bytes.size() - at));
        if (policy_ == checksums::record) hash.update(piece);
        file.write(piece);
        progress_scope::count(piece.size());
      }
    } else {
      constexpr std::size_t elements = std::size_t{4} << 20;
      auto in = size_of(e.source_type), out = size_of(e.stored_type);
      auto count = bytes.size() / in;
      buffer.resize(std::min(elements, count) * out);
      for (std::size_t at = 0; at < count; at += elements) {
        auto n = std::min(elements, count - at);
        auto target = std::span(buffer).first(n * out);
        convert(bytes.subspan(at * in, n * in), e.source_type, target, e.stored_type);
        if (policy_ == checksums::record) hash.update(target);
        file.write(target);
        progress_scope::count(n * in); // the bytes of the state, whatever the stored type
      }
    }
    if (policy_ == checksums::record) e.checksum = hash.value();
  }

  std::filesystem::path path_;
  checksums policy_;
  std::vector<entry> entries_;
  std::map<std::string, std::string> metadata_;
  std::unique_ptr<atomic_file> file_; // a pointer: the writer stays movable
  std::size_t next_ = 0;
  std::vector<std::byte> buffer_;
};

} // namespace cairn::io
