#pragma once
// What a test run through tests/io/s3_server.sh has of the server: its variables, and the
// controls of the proxy in front of it (tests/io/s3_proxy.py).
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>
#include <utility>

namespace s3_test {

/// The variable `name`, which s3_server.sh sets.
inline std::string env(char const* name) {
  auto const* value = std::getenv(name);
  REQUIRE_MESSAGE(value, name << " is not set: run this test through tests/io/s3_server.sh");
  return value;
}

/// What a shell command prints, and its status.
inline std::pair<int, std::string> run(std::string const& command) {
  std::string out;
  auto* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe);
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

/// POSTs `json` to the proxy's control path `what`: "faults" (sets them, a JSON object, and
/// zeroes its counters), "release" (lets a held request go).
inline void proxy(std::string const& what, std::string const& json = "{}") {
  auto [status, out] =
      run("curl -sS -X POST --data-binary '" + json + "' " + env("CAIRN_TEST_S3_PROXY") + "/__proxy/" + what);
  REQUIRE_MESSAGE(status == 0, out);
}

/// The proxy's counters.
inline boost::json::object proxy_stats() {
  auto [status, out] = run("curl -sS " + env("CAIRN_TEST_S3_PROXY") + "/__proxy/stats");
  REQUIRE(status == 0);
  return boost::json::parse(out).as_object();
}

} // namespace s3_test
