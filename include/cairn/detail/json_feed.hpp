#pragma once

// Parsing untrusted JSON as it is read, piece by piece, within bounds: a file that is not JSON is
// known bad at its first bad byte (a reader stops there instead of reading the rest), a key or a
// string longer than `json_limits::string` is refused as soon as it is, and so is a document
// whose parse needs more memory than `json_limits::memory` (its value and the parser's work
// together). Keys given twice in one object are refused with their path (Boost.JSON keeps the
// last silently). The text itself is never held: a reader feeds it and lets each piece go.

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/memory_resource.hpp>
#include <boost/json/storage_ptr.hpp>
#include <boost/json/value.hpp>
#include <boost/json/value_stack.hpp>

#include <cstddef>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace cairn::detail {

/// What one JSON document may cost.
struct json_limits {
  std::size_t string = std::size_t{1} << 20;   ///< bytes of one key or string (a name, a path, a value)
  std::size_t memory = std::size_t{128} << 20; ///< bytes of the document as parsed, work included
};

/// The memory of one document's parse, counted: past its budget an allocation fails (and the
/// document is refused, not the process). Made inside the storage that owns it (the document
/// keeps it alive), it tells `self` where it is.
class json_budget final : public boost::json::memory_resource {
public:
  json_budget(std::size_t limit, json_budget** self) noexcept : limit_(limit) { *self = this; }

  /// Counts `bytes` the parse holds outside the document (its duplicate-key sets).
  void charge(std::size_t bytes) {
    if (bytes > limit_ - used_) {
      exceeded_ = true;
      throw std::bad_alloc();
    }
    used_ += bytes;
  }
  /// Gives back what `charge` counted.
  void refund(std::size_t bytes) noexcept { used_ -= bytes; }
  [[nodiscard]] bool exceeded() const noexcept { return exceeded_; }
  [[nodiscard]] std::size_t limit() const noexcept { return limit_; }

private:
  // The forms of new and delete the default resource uses: aligned only past the default.
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    charge(bytes);
    if (alignment > __STDCPP_DEFAULT_NEW_ALIGNMENT__) return ::operator new(bytes, std::align_val_t(alignment));
    return ::operator new(bytes);
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    used_ -= bytes;
    if (alignment > __STDCPP_DEFAULT_NEW_ALIGNMENT__)
      ::operator delete(p, std::align_val_t(alignment));
    else
      ::operator delete(p);
  }
  [[nodiscard]] bool do_is_equal(memory_resource const& other) const noexcept override { return this == &other; }

  std::size_t limit_;
  std::size_t used_ = 0;
  bool exceeded_ = false;
};

/// The handler of Boost.JSON's parser that builds the document (through a value_stack, in the
/// budget's memory) and checks what the parser alone does not: string sizes and duplicate keys.
class json_builder {
public:
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);

  json_builder(json_limits limits, json_budget& budget, boost::json::storage_ptr const& memory)
      : limits_(limits), budget_(&budget), stack_(memory) {
    stack_.reset(memory);
  }

  /// Why the document was refused beyond what the parser says (a key given twice, a string too
  /// long), with its path; empty otherwise.
  [[nodiscard]] std::string const& problem() const noexcept { return problem_; }
  [[nodiscard]] boost::json::value release() { return stack_.release(); }

  bool on_document_begin(boost::system::error_code&) { return true; }
  bool on_document_end(boost::system::error_code&) { return true; }
  bool on_object_begin(boost::system::error_code&) { return open(true); }
  bool on_object_end(std::size_t n, boost::system::error_code&) {
    stack_.push_object(n);
    return close();
  }
  bool on_array_begin(boost::system::error_code&) { return open(false); }
  bool on_array_end(std::size_t n, boost::system::error_code&) {
    stack_.push_array(n);
    return close();
  }
  bool on_key_part(std::string_view part, std::size_t n, boost::system::error_code& ec) {
    if (!fits(n, "a key", ec)) return false;
    stack_.push_chars(part);
    key_.append(part);
    return true;
  }
  bool on_key(std::string_view last, std::size_t n, boost::system::error_code& ec) {
    if (!fits(n, "a key", ec)) return false;
    stack_.push_key(last);
    key_.append(last);
    auto& object = levels_.back();
    auto cost = key_.size() + 64; // the set's copy of it
    budget().charge(cost);
    object.charged += cost;
    if (!object.keys.insert(key_).second) {
      problem_ = "duplicate key '" + path(&key_) + "'";
      ec = boost::json::error::syntax;
      return false;
    }
    object.key = std::move(key_);
    key_.clear();
    return true;
  }
  bool on_string_part(std::string_view part, std::size_t n, boost::system::error_code& ec) {
    if (!fits(n, "a string", ec)) return false;
    stack_.push_chars(part);
    return true;
  }
  bool on_string(std::string_view last, std::size_t n, boost::system::error_code& ec) {
    if (!fits(n, "a string", ec)) return false;
    stack_.push_string(last);
    return scalar();
  }
  bool on_number_part(std::string_view, boost::system::error_code&) { return true; }
  bool on_int64(std::int64_t i, std::string_view, boost::system::error_code&) {
    stack_.push_int64(i);
    return scalar();
  }
  bool on_uint64(std::uint64_t u, std::string_view, boost::system::error_code&) {
    stack_.push_uint64(u);
    return scalar();
  }
  bool on_double(double d, std::string_view, boost::system::error_code&) {
    stack_.push_double(d);
    return scalar();
  }
  bool on_bool(bool b, boost::system::error_code&) {
    stack_.push_bool(b);
    return scalar();
  }
  bool on_null(boost::system::error_code&) {
    stack_.push_null();
    return scalar();
  }
  bool on_comment_part(std::string_view, boost::system::error_code&) { return true; }
  bool on_comment(std::string_view, boost::system::error_code&) { return true; }

private:
  struct level {
    bool object = false;
    std::unordered_set<std::string> keys; // an object's, so far
    std::string key;                      // the key of the value being read
    std::size_t index = 0;                // an array's: the index of the value being read
    std::size_t charged = 0;              // what it cost the budget beyond the document
  };

  json_budget& budget() { return *budget_; }

  bool open(bool object) {
    budget().charge(sizeof(level));
    levels_.push_back({object, {}, {}, 0, sizeof(level)});
    return true;
  }
  bool close() {
    budget().refund(levels_.back().charged);
    levels_.pop_back();
    return scalar();
  }
  /// A value ended: the array holding it moves to its next index.
  bool scalar() {
    if (!levels_.empty() && !levels_.back().object) ++levels_.back().index;
    return true;
  }
  bool fits(std::size_t n, char const* what, boost::system::error_code& ec) {
    if (n <= limits_.string) return true;
    // A key's path is its object's; a string's, the key or index it is read for.
    std::string empty;
    auto where = path(std::string_view(what) == "a key" ? &empty : nullptr);
    problem_ = std::string(what) + " longer than " + std::to_string(limits_.string) + " bytes" +
               (where.empty() ? std::string() : " at '" + where + "'") + ": refused";
    ec = boost::json::error::string_too_large;
    return false;
  }
  /// `a.b[2].c`: where the value being read is; in the innermost object, `innermost` in place of
  /// its key when given (none when empty).
  [[nodiscard]] std::string path(std::string const* innermost) const {
    std::string out;
    for (std::size_t i = 0; i < levels_.size(); ++i) {
      auto const& f = levels_[i];
      if (!f.object) {
        out += "[" + std::to_string(f.index) + "]";
        continue;
      }
      auto const& key = i + 1 == levels_.size() && innermost ? *innermost : f.key;
      if (!key.empty()) out += (out.empty() ? "" : ".") + key;
    }
    return out;
  }

  json_limits limits_;
  json_budget* budget_;
  boost::json::value_stack stack_;
  std::vector<level> levels_;
  std::string key_;
  std::string problem_;
};

/// A JSON document parsed as it is fed, piece by piece, within `json_limits`, remembering where
/// its value ended, its first error and the line and column of each.
struct json_feed {
  explicit json_feed(json_limits limits = {})
      : memory(boost::json::make_shared_resource<json_budget>(limits.memory, &budget)),
        parser({}, limits, *budget, memory) {}

  json_budget* budget = nullptr;   ///< inside `memory`
  boost::json::storage_ptr memory; ///< the document's, and its parse's
  boost::json::basic_parser<json_builder> parser;
  boost::system::error_code error;
  std::string problem;              ///< why the document was refused, when not a syntax error alone
  std::size_t consumed = 0;         ///< bytes of the text the parser took: where the value or the error ends
  bool ended = false;               ///< the value ended before the text did: what follows must be white space
  std::optional<std::size_t> extra; ///< where text after the value begins
  std::size_t line = 1, column = 1; ///< of `consumed`

  /// Feeds the next piece; false once the text is known bad.
  bool feed(std::string_view piece) {
    if (error || !problem.empty() || extra) return false;
    if (ended) return after_value(piece);
    std::size_t used = 0;
    try {
      used = parser.write_some(true, piece.data(), piece.size(), error);
    } catch (std::bad_alloc const&) {
      return refuse_memory();
    }
    advance(piece.substr(0, used));
    if (!parser.handler().problem().empty()) problem = parser.handler().problem();
    if (error || !problem.empty()) return false;
    if (parser.done()) {
      ended = true;
      return after_value(piece.substr(used));
    }
    return true;
  }

  /// Ends the text: false (with `error` or `problem`) when it does not hold one whole value.
  bool finish() {
    if (error || !problem.empty()) return false;
    if (!ended) {
      try {
        parser.write_some(false, nullptr, 0, error);
      } catch (std::bad_alloc const&) {
        return refuse_memory();
      }
      if (!parser.handler().problem().empty()) problem = parser.handler().problem();
      if (error || !problem.empty()) return false;
    }
    if (extra) {
      problem =
          "unexpected text after the JSON value at line " + std::to_string(line) + ", column " + std::to_string(column);
      return false;
    }
    return true;
  }

  /// The document, once `finish` said true.
  boost::json::value release() { return parser.handler().release(); }

  /// "line L, column C" of where the text went wrong.
  [[nodiscard]] std::string where() const {
    return "line " + std::to_string(line) + ", column " + std::to_string(column);
  }

private:
  void advance(std::string_view text) {
    for (char c : text) {
      if (c == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    consumed += text.size();
  }
  bool after_value(std::string_view piece) {
    auto at = piece.find_first_not_of(" \t\r\n");
    if (at == std::string_view::npos) {
      advance(piece);
      return true;
    }
    advance(piece.substr(0, at));
    extra = consumed;
    return false;
  }
  bool refuse_memory() {
    if (!budget->exceeded()) throw std::bad_alloc(); // the process's memory, not the document's
    problem = "needs more than " + std::to_string(budget->limit() >> 20) + " MiB of memory to read: refused";
    return false;
  }
};

} // namespace cairn::detail
