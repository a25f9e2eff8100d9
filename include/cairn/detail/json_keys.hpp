#pragma once

// Keys given twice in one JSON object. Boost.JSON keeps the last of them silently; cairn reads
// configs, metadata, indexes and safetensors headers from untrusted text, where a second
// "dtype" or "weights" must be refused, not merged. One linear pass over text already known to
// be valid JSON.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace cairn::detail {

/// Decodes the JSON string literal starting at `text[at]` (a quote) into `out`; the offset past
/// it. The text is valid JSON already: no check is repeated here.
inline std::size_t read_json_string(std::string_view text, std::size_t at, std::string& out) {
  out.clear();
  auto hex = [&](std::size_t i) {
    unsigned value = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      char c = text[i + k];
      value = value * 16 + static_cast<unsigned>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return value;
  };
  auto append_utf8 = [&](unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  };
  for (++at; text[at] != '"'; ++at) {
    if (text[at] != '\\') {
      out += text[at];
      continue;
    }
    char e = text[++at];
    if (e == 'u') {
      auto cp = hex(at + 1);
      at += 4;
      if (cp >= 0xd800 && cp < 0xdc00 && text.substr(at + 1, 2) == "\\u") { // a surrogate pair
        cp = 0x10000 + ((cp - 0xd800) << 10) + (hex(at + 3) - 0xdc00);
        at += 6;
      }
      append_utf8(cp);
    } else {
      out += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'b' ? '\b' : e == 'f' ? '\f' : e;
    }
  }
  return at + 1;
}

/// The path (`a.b[2].c`) of the first key given twice in one object of the valid JSON `text`,
/// compared after unescaping, or nothing. Linear in the text: each object keeps a hash set of
/// its keys.
inline std::optional<std::string> duplicate_key(std::string_view text) {
  struct level {
    bool object;
    std::unordered_set<std::string> keys;
    std::string child; // the key of the value being read, or its index in an array
    std::size_t index = 0;
  };
  std::vector<level> levels;
  auto path = [&] {
    std::string out;
    for (std::size_t i = 0; i + 1 < levels.size(); ++i)
      out += levels[i].object ? (out.empty() ? "" : ".") + levels[i].child : "[" + levels[i].child + "]";
    return out;
  };
  std::string string;
  for (std::size_t at = 0; at < text.size();) {
    char c = text[at];
    if (c == '{' || c == '[') {
      if (!levels.empty() && !levels.back().object) levels.back().child = std::to_string(levels.back().index);
      levels.push_back({c == '{', {}, {}, 0});
      ++at;
    } else if (c == '}' || c == ']') {
      levels.pop_back();
      ++at;
    } else if (c == ',') {
      if (!levels.back().object) ++levels.back().index;
      ++at;
    } else if (c == '"') {
      at = read_json_string(text, at, string);
      auto next = text.find_first_not_of(" \t\r\n", at);
      if (!levels.empty() && levels.back().object && next != std::string_view::npos && text[next] == ':') {
        if (!levels.back().keys.insert(string).second) {
          auto where = path();
          return where + (where.empty() ? "" : ".") + string;
        }
        levels.back().child = string;
      }
    } else {
      ++at;
    }
  }
  return std::nullopt;
}

} // namespace cairn::detail
