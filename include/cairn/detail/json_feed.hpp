#pragma once

// Parsing JSON as it is read, piece by piece: a file that is not JSON is known bad at its first
// bad byte, so a reader stops there instead of reading (and holding) the rest of it.

#include <boost/json/stream_parser.hpp>
#include <boost/json/value.hpp>

#include <cstddef>
#include <string_view>

namespace cairn::detail {

/// A stream parser fed piece by piece, remembering where its value ended and its first error.
struct json_feed {
  boost::json::stream_parser parser;
  boost::system::error_code error;
  std::size_t consumed = 0; ///< bytes of the text the parser took: where the value or the error ends
  bool ended = false;       ///< the value ended before the text did: what follows must be white space

  /// Feeds the next piece; false once the text is known bad.
  bool feed(std::string_view piece) {
    if (ended || error) return !error;
    auto used = parser.write_some(piece.data(), piece.size(), error);
    consumed += used;
    if (!error && used < piece.size()) ended = true;
    return !error;
  }

  /// Ends the text: false (with `error`) when it does not hold one whole value.
  bool finish() {
    if (!error && !ended) parser.finish(error);
    return !error;
  }
};

} // namespace cairn::detail
