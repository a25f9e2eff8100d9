// Definitions of <cairn/config/yaml.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/config/detail/pretty.hpp>
#include <cairn/config/yaml.hpp>

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

namespace cairn::detail {

inline bool all_digits(std::string_view d, auto accept) {
  return !d.empty() && std::all_of(d.begin(), d.end(), [&](char c) { return accept(c); });
}
inline bool decimal_digit(char c) { return c >= '0' && c <= '9'; }

/// The digits and base of a core-schema integer ([0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+) in `body` (the
/// scalar without its sign; `signed_` when it had one: 0o and 0x take none), or base 0.
inline std::pair<std::string_view, int> integer_digits(std::string_view body, bool signed_) {
  if (all_digits(body, decimal_digit)) return {body, 10};
  if (signed_ || body.size() <= 2 || body[0] != '0') return {{}, 0};
  auto rest = body.substr(2);
  if (body[1] == 'o' && all_digits(rest, [](char c) { return c >= '0' && c <= '7'; })) return {rest, 8};
  if (body[1] == 'x' && all_digits(rest, [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }))
    return {rest, 16};
  return {{}, 0};
}

/// The integer of `number` in `base`, negated with `negative`: an int64 where it fits, else a
/// uint64; false when out of both ranges.
inline bool resolve_integer(std::string_view number, int base, bool negative, boost::json::value& out) {
  std::uint64_t magnitude = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), magnitude, base);
  if (ec != std::errc{} || end != number.data() + number.size()) return false;
  constexpr auto largest = std::uint64_t(std::numeric_limits<std::int64_t>::max());
  if (!negative && magnitude <= largest)
    out = static_cast<std::int64_t>(magnitude);
  else if (!negative)
    out = magnitude;
  else if (magnitude <= largest + 1)
    out = static_cast<std::int64_t>(0 - magnitude);
  else
    return false;
  return true;
}

/// Whether `body` (without its sign) is a core-schema float: (\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
inline bool float_syntax(std::string_view body) {
  std::size_t at = 0, whole = 0, fraction = 0;
  while (at < body.size() && decimal_digit(body[at])) ++at, ++whole;
  if (at < body.size() && body[at] == '.') {
    ++at;
    while (at < body.size() && decimal_digit(body[at])) ++at, ++fraction;
  }
  if (whole == 0 && fraction == 0) return false;
  if (at < body.size() && (body[at] == 'e' || body[at] == 'E')) {
    std::size_t exponent = at + 1;
    if (exponent < body.size() && (body[exponent] == '-' || body[exponent] == '+')) ++exponent;
    return all_digits(body.substr(std::min(exponent, body.size())), decimal_digit);
  }
  return at == body.size();
}

/// Whether `body` (a float without its sign, out of a double's range) is out of range for being
/// too small (it reads as zero) rather than too large.
inline bool underflows(std::string_view body) {
  auto e = body.find_first_of("eE");
  auto mantissa = body.substr(0, e);
  auto dot = std::min(mantissa.find('.'), mantissa.size());
  // The decimal exponent of the first significant digit, before the written exponent.
  long long magnitude = 0;
  if (auto first = mantissa.substr(0, dot).find_first_not_of('0'); first != std::string_view::npos) {
    magnitude = static_cast<long long>(dot - first) - 1;
  } else {
    auto fraction = dot < mantissa.size() ? mantissa.substr(dot + 1) : std::string_view();
    auto nonzero = fraction.find_first_not_of('0');
    if (nonzero == std::string_view::npos) return true; // zero
    magnitude = -static_cast<long long>(nonzero) - 1;
  }
  if (e == std::string_view::npos) return magnitude < 0;
  auto exponent_text = body.substr(e + 1);
  bool negative = !exponent_text.empty() && exponent_text[0] == '-';
  if (!exponent_text.empty() && (exponent_text[0] == '-' || exponent_text[0] == '+')) exponent_text.remove_prefix(1);
  long long exponent = 0;
  auto [end, ec] = std::from_chars(exponent_text.data(), exponent_text.data() + exponent_text.size(), exponent);
  if (ec == std::errc::result_out_of_range) return negative; // an exponent of hundreds of digits decides alone
  return (negative ? -exponent : exponent) + magnitude < 0;
}

/// What a plain (unquoted, untagged) scalar means in the YAML 1.2 core schema. Returns false
/// for an integer out of range.
inline bool resolve_plain_scalar(std::string_view s, boost::json::value& out) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") {
    out = nullptr;
    return true;
  }
  if (s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" || s == "FALSE") {
    out = s[0] == 't' || s[0] == 'T';
    return true;
  }
  std::string_view body = s;
  bool negative = body[0] == '-', signed_ = negative || body[0] == '+';
  if (signed_) body.remove_prefix(1);
  if (auto [number, base] = integer_digits(body, signed_); base) return resolve_integer(number, base, negative, out);
  if (body == ".inf" || body == ".Inf" || body == ".INF") {
    out = negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  } else if (s == ".nan" || s == ".NaN" || s == ".NAN") {
    out = std::numeric_limits<double>::quiet_NaN();
  } else if (float_syntax(body)) {
    double value = 0;
    auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), value);
    if (ec == std::errc::result_out_of_range) // too small reads as zero, as JSON's parser reads it;
      value = underflows(body) ? 0.0 : std::numeric_limits<double>::infinity(); // too large, refused later
    else if (ec != std::errc{} || end != body.data() + body.size())
      return false;
    out = negative ? -value : value;
  } else {
    out = std::string(s);
  }
  return true;
}

/// The offset of the first byte that is not part of valid UTF-8, or, unless `controls`, is a
/// control character other than tab, line feed and carriage return (which YAML text may not
/// hold either), if any.
inline std::optional<std::size_t> invalid_utf8(std::string_view text, bool controls = false) {
  auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  for (std::size_t i = 0; i < text.size();) {
    auto c = byte(i);
    if (!controls && ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)) return i;
    std::size_t length = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (length == 0 || i + length > text.size()) return i;
    std::uint32_t point = length == 1 ? c : c & (0x7fu >> length);
    for (std::size_t k = 1; k < length; ++k) {
      if ((byte(i + k) >> 6) != 0x2) return i;
      point = (point << 6) | (byte(i + k) & 0x3fu);
    }
    bool overlong = (length == 2 && point < 0x80) || (length == 3 && point < 0x800) || (length == 4 && point < 0x10000);
    if (overlong || point > 0x10ffff || (point >= 0xd800 && point <= 0xdfff)) return i;
    i += length;
  }
  return std::nullopt;
}

/// The most values a YAML document may hold once its aliases are expanded: aliases can refer
/// to one another, so a few lines can stand for billions of values.
inline constexpr std::size_t max_yaml_values = 1'000'000;

/// The name of a core-schema tag (`tag:yaml.org,2002:str` is "str"); empty for any other tag.
inline std::string_view core_tag(std::string_view tag) {
  constexpr std::string_view prefix = "tag:yaml.org,2002:";
  return tag.starts_with(prefix) ? tag.substr(prefix.size()) : std::string_view();
}

/// Builds the JSON document from yaml-cpp's parse events (no node tree in between), checking
/// as it goes: core tags, scalar keys given once per mapping, merge keys, the expanded size.
class yaml_builder final : public YAML::EventHandler {
public:
  explicit yaml_builder(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(YAML::Mark const& mark, std::string const& what) const {
    throw config_error({{source_, what + " at line " + std::to_string(mark.line + 1) + ", column " +
                                      std::to_string(mark.column + 1)}});
  }

  /// The document, once parsed (null for an empty one).
  boost::json::value& result() { return result_; }

  void OnDocumentStart(YAML::Mark const&) override {}
  void OnDocumentEnd() override {}

  void OnNull(YAML::Mark const& mark, YAML::anchor_t anchor) override {
    if (expecting_key()) fail(mark, "a null key" + where());
    add(mark, nullptr, anchor, 1);
  }

  void OnAlias(YAML::Mark const& mark, YAML::anchor_t anchor) override {
    auto found = anchors_.find(anchor);
    if (found == anchors_.end()) fail(mark, "an alias of an anchor not defined before it");
    auto const& [value, values] = found->second;
    if (expecting_key()) {
      if (!value.is_string()) fail(mark, "a key that is not a scalar" + where());
      key(mark, std::string(value.get_string()), false);
      return;
    }
    add(mark, value, 0, values);
  }

  void OnScalar(YAML::Mark const& mark, std::string const& tag, YAML::anchor_t anchor,
                std::string const& text) override {
    check_tag(mark, tag);
    // Escapes may decode to control characters, which a string may hold; anything that is not
    // UTF-8 came out of yaml-cpp's decoding of text that was.
    if (invalid_utf8(text, /*controls=*/true))
      fail(mark, "a scalar that is not valid UTF-8 once its escapes are decoded");
    if (expecting_key()) {
      key(mark, text, tag == "?");
      if (anchor) anchors_[anchor] = {boost::json::string(text), 1};
      return;
    }
    add(mark, scalar(mark, tag, text), anchor, 1);
  }

  void OnSequenceStart(YAML::Mark const& mark, std::string const& tag, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, tag, anchor, boost::json::array());
  }
  void OnSequenceEnd() override { close(); }

  void OnMapStart(YAML::Mark const& mark, std::string const& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, tag, anchor, boost::json::object());
  }
  void OnMapEnd() override { close(); }

private:
  struct frame {
    boost::json::value value; // an object or an array
    YAML::Mark mark;          // where it starts
    std::string path;
    YAML::anchor_t anchor = 0;
    std::size_t values = 1;
    std::optional<std::string> key; // in a mapping: the key whose value comes next
    bool merge = false;             // ... which is the merge key `<<`
    std::vector<boost::json::object> merged;
  };

  [[nodiscard]] bool expecting_key() const {
    return !stack_.empty() && stack_.back().value.is_object() && !stack_.back().key;
  }

  [[nodiscard]] std::string where() const {
    return stack_.empty() || stack_.back().path.empty() ? std::string() : " in '" + stack_.back().path + "'";
  }

  [[nodiscard]] std::string child_path() const {
    if (stack_.empty()) return {};
    auto const& top = stack_.back();
    if (top.value.is_array())
      return top.path + "[" + std::to_string(top.value.get_array().size() + top.merged.size()) + "]";
    return top.path.empty() ? *top.key : top.path + "." + *top.key;
  }

  void check_tag(YAML::Mark const& mark, std::string const& tag) const {
    if (tag.empty() || tag == "?" || tag == "!") return;
    auto core = core_tag(tag);
    if (core == "str" || core == "int" || core == "float" || core == "bool" || core == "null" || core == "map" ||
        core == "seq")
      return;
    auto path = stack_.empty() || !stack_.back().key ? std::string() : child_path();
    fail(mark, "unsupported tag '" + tag + "'" + (path.empty() ? "" : " at '" + path + "'"));
  }

  boost::json::value scalar(YAML::Mark const& mark, std::string const& tag, std::string const& text) const {
    auto core = core_tag(tag);
    if (tag == "!" || core == "str") return boost::json::string(text);
    boost::json::value value;
    if (!resolve_plain_scalar(text, value)) fail(mark, "integer out of range: '" + text + "'");
    if (!core.empty()) {
      bool fits = (core == "int" && (value.is_int64() || value.is_uint64())) ||
                  (core == "float" && (value.is_double() || value.is_int64() || value.is_uint64())) ||
                  (core == "bool" && value.is_bool()) || (core == "null" && value.is_null());
      if (!fits) fail(mark, "'" + text + "' is not a valid !!" + std::string(core));
      if (core == "float" && !value.is_double()) value = value.to_number<double>();
    }
    return value;
  }

  void key(YAML::Mark const& mark, std::string text, bool plain) {
    auto& top = stack_.back();
    if (plain && text == "<<") {
      top.merge = true;
      top.key = "<<";
      return;
    }
    auto const& object = top.value.get_object();
    if (object.contains(text)) {
      top.key = std::move(text);
      fail(mark, "duplicate key '" + child_path() + "'");
    }
    top.key = std::move(text);
  }

  void count(YAML::Mark const& mark, std::size_t values) {
    values_ += values;
    if (values_ > max_yaml_values)
      fail(mark,
           "more than " + std::to_string(max_yaml_values) + " values once aliases are expanded; not a config file");
  }

  /// A complete value: into the container on top of the stack, or the document itself.
  void add(YAML::Mark const& mark, boost::json::value value, YAML::anchor_t anchor, std::size_t values) {
    count(mark, values);
    if (anchor) anchors_[anchor] = {value, values};
    if (stack_.empty()) {
      result_ = std::move(value);
      return;
    }
    auto& top = stack_.back();
    top.values += values;
    if (top.value.is_array()) {
      top.value.get_array().push_back(std::move(value));
      return;
    }
    if (top.merge) {
      top.merge = false;
      top.key.reset();
      if (value.is_object()) {
        top.merged.push_back(std::move(value.get_object()));
      } else if (value.is_array() && std::all_of(value.get_array().begin(), value.get_array().end(),
                                                 [](auto const& m) { return m.is_object(); })) {
        for (auto& m : value.get_array()) top.merged.push_back(std::move(m.get_object()));
      } else {
        fail(mark, "a merge key '<<' takes a mapping or a list of mappings");
      }
      return;
    }
    top.value.get_object()[*top.key] = std::move(value);
    top.key.reset();
  }

  void open(YAML::Mark const& mark, std::string const& tag, YAML::anchor_t anchor, boost::json::value empty) {
    check_tag(mark, tag);
    if (expecting_key()) fail(mark, "a key that is not a scalar" + where());
    // As deep as a JSON config may be (Boost.JSON's parser stops at 32): a config is not deeper.
    if (stack_.size() >= 32) fail(mark, "nested deeper than 32 levels, as no config is" + where());
    count(mark, 1);
    stack_.push_back({std::move(empty), mark, child_path(), anchor, 1, std::nullopt, false, {}});
  }

  void close() {
    auto top = std::move(stack_.back());
    stack_.pop_back();
    if (top.value.is_object()) {
      // Merged keys never replace the mapping's own; among merged mappings the first wins.
      auto& object = top.value.get_object();
      for (auto& merged : top.merged)
        for (auto& [k, v] : merged)
          if (!object.contains(k)) object[k] = std::move(v);
    }
    values_ -= top.values; // counted as they came; added again as one value below
    add(top.mark, std::move(top.value), top.anchor, top.values);
  }

  std::string source_;
  boost::json::value result_;
  std::vector<frame> stack_;
  std::map<YAML::anchor_t, std::pair<boost::json::value, std::size_t>> anchors_;
  std::size_t values_ = 0;
};

/// Takes the events of a document and forgets them.
struct yaml_ignore final : YAML::EventHandler {
  void OnDocumentStart(YAML::Mark const&) override {}
  void OnDocumentEnd() override {}
  void OnNull(YAML::Mark const&, YAML::anchor_t) override {}
  void OnAlias(YAML::Mark const&, YAML::anchor_t) override {}
  void OnScalar(YAML::Mark const&, std::string const&, YAML::anchor_t, std::string const&) override {}
  void OnSequenceStart(YAML::Mark const&, std::string const&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(YAML::Mark const&, std::string const&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

inline bool plain_is_safe(std::string_view s) {
  if (s.empty() || s.back() == ' ') return false;
  if (s.starts_with("...")) return false; // at the start of a line, "... " ends a document
  auto first = static_cast<unsigned char>(s[0]);
  if (!(std::isalnum(first) || s[0] == '_' || s[0] == '/' || s[0] == '.')) return false;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (!(std::isalnum(u) || c == '_' || c == '-' || c == '.' || c == '/' || c == '+' || c == '@' || c == ' ' ||
          c == '='))
      return false;
  }
  boost::json::value resolved;
  return resolve_plain_scalar(s, resolved) && resolved.is_string();
}

inline std::string yaml_scalar(boost::json::value const& v) {
  switch (v.kind()) {
  case boost::json::kind::null:
    return "null";
  case boost::json::kind::bool_:
    return v.get_bool() ? "true" : "false";
  case boost::json::kind::double_: {
    double d = v.get_double();
    if (std::isnan(d)) return ".nan";
    if (std::isinf(d)) return d > 0 ? ".inf" : "-.inf";
    auto text = compact(v);
    if (text.find_first_of(".eE") == std::string::npos) text += ".0";
    return text;
  }
  case boost::json::kind::string: {
    auto const& s = v.get_string();
    if (plain_is_safe(s)) return std::string(s);
    return boost::json::serialize(s);
  }
  case boost::json::kind::object:
    return "{}";
  case boost::json::kind::array:
    return "[]";
  default:
    return compact(v);
  }
}

inline bool yaml_block(boost::json::value const& v) {
  return (v.is_object() && !v.get_object().empty()) || (v.is_array() && !v.get_array().empty());
}

inline void write_yaml(boost::json::value const& v, std::size_t indent, std::string& out) {
  std::string pad(indent, ' ');
  if (v.is_object()) {
    for (auto const& [key, value] : v.get_object()) {
      // An implicit key is at most 1024 characters long; a longer one is written explicitly.
      auto text = yaml_scalar(boost::json::string(key));
      out += text.size() < 1000 ? pad + text + ":" : pad + "? " + text + "\n" + pad + ":";
      if (yaml_block(value)) {
        out += "\n";
        write_yaml(value, indent + 2, out);
      } else {
        out += " " + yaml_scalar(value) + "\n";
      }
    }
  } else if (v.is_array()) {
    for (auto const& element : v.get_array()) {
      if (yaml_block(element)) {
        std::string nested;
        write_yaml(element, indent + 2, nested);
        out += pad + "- " + nested.substr(indent + 2);
      } else {
        out += pad + "- " + yaml_scalar(element) + "\n";
      }
    }
  } else {
    out += pad + yaml_scalar(v) + "\n";
  }
}

} // namespace cairn::detail

namespace cairn {

CAIRN_DECL boost::json::value parse_yaml(std::string_view text, std::string_view source) {
  if (auto bad = detail::invalid_utf8(text))
    throw config_error(
        {{std::string(source), "not valid UTF-8, or a control character, at " + detail::line_and_column(text, *bad)}});
  std::istringstream in{std::string(text)};
  detail::yaml_builder builder{std::string(source)};
  try {
    YAML::Parser parser(in);
    if (!parser.HandleNextDocument(builder)) return boost::json::object{}; // nothing but comments
    detail::yaml_ignore rest;
    if (parser.HandleNextDocument(rest)) throw config_error({{std::string(source), "more than one YAML document"}});
  } catch (YAML::Exception const& e) {
    builder.fail(e.mark, "invalid YAML (" + e.msg + ")");
  }
  if (builder.result().is_null()) return boost::json::object{}; // an empty document: all defaults
  return std::move(builder.result());
}

CAIRN_DECL boost::json::value read_yaml_file(std::string const& file, std::size_t limit) {
  return parse_yaml(detail::read_config_text(file, limit), file);
}

CAIRN_DECL std::string to_yaml(boost::json::value const& document) {
  std::string out;
  if (detail::yaml_block(document))
    detail::write_yaml(document, 0, out);
  else
    out = detail::yaml_scalar(document) + "\n";
  return out;
}

} // namespace cairn
