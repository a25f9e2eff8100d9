#pragma once

// Matching errors by kind: the std::error_code a cairn::error carries, not its message.
//
//   CHECK_KIND(m.resume(state), cairn::training_errc::no_checkpoint);

#include <cairn/error.hpp>

#include <doctest/doctest.h>

#include <string>
#include <system_error>

template <> struct doctest::StringMaker<std::error_code> {
  static doctest::String convert(std::error_code const& code) {
    if (!code) return "(no cairn::error thrown, or one without a kind)";
    return (std::string(code.category().name()) + ":" + std::to_string(code.value()) + " (" + code.message() + ")")
        .c_str();
  }
};

namespace cairn_test {

/// The kind of the cairn::error that `f` throws; empty when it throws none (or one without a
/// kind). Any other exception propagates, failing the test.
template <class F> std::error_code kind_of(F&& f) {
  try {
    f();
  } catch (cairn::error const& e) {
    return e.kind();
  }
  return {};
}

} // namespace cairn_test

#define CHECK_KIND(expr, expected) CHECK(::cairn_test::kind_of([&] { (void)(expr); }) == (expected))
