#pragma once

// The name of this host, for messages and records. No libtorch.

#include <string>
#include <unistd.h>

namespace cairn::detail {

/// This host's name, or "an unknown host" when it has none to give.
inline std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "an unknown host";
  return name;
}

} // namespace cairn::detail
