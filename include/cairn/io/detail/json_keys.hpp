#pragma once

#include <boost/json/parse.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace cairn::io::detail {

/// The keys of the top-level object of `text`, duplicates included, decoded. `text` must
/// already be known to be valid JSON: a parsed document keeps only the last of duplicate
/// keys, and an untrusted header with duplicates must be refused, not silently merged.
inline std::vector<std::string> top_level_keys(std::string_view text) {
  std::vector<std::string> keys;
  int depth = 0;
  bool expect_key = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      auto start = i;
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
      if (depth == 1 && expect_key) {
        boost::system::error_code ec;
        auto key = boost::json::parse(text.substr(start, i - start + 1), ec);
        if (!ec && key.is_string()) keys.emplace_back(key.get_string());
        expect_key = false;
      }
    } else if (c == '{' || c == '[') {
      ++depth;
      expect_key = c == '{' && depth == 1;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == ',' && depth == 1) {
      expect_key = true;
    }
  }
  return keys;
}

} // namespace cairn::io::detail
