#pragma once

#include <string_view>

namespace cairn::detail {

/// The unqualified name of a class, as the compiler spells it (`training_config`).
template <class T> constexpr std::string_view type_name() {
#if defined(__clang__) || defined(__GNUC__)
  std::string_view name = __PRETTY_FUNCTION__;
  // "... type_name() [with T = ns::foo; ...]" (GCC) or "... type_name() [T = ns::foo]" (Clang)
  auto start = name.find("T = ") + 4;
  auto end = name.find_first_of(";]", start);
  name = name.substr(start, end - start);
  auto template_start = name.find('<');
  auto scope = name.substr(0, template_start).rfind("::");
  return scope == std::string_view::npos ? name : name.substr(scope + 2);
#else
  return "config";
#endif
}

} // namespace cairn::detail
