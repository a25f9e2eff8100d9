#pragma once

#include <string_view>

namespace cairn::detail {

template <class T> constexpr std::string_view signature_of() {
#if defined(__clang__) || defined(__GNUC__)
  return __PRETTY_FUNCTION__;
#else
  return {};
#endif
}

/// The type's name within a signature of `signature_of<T>`.
constexpr std::string_view name_in_signature(std::string_view name) {
#if defined(__clang__) || defined(__GNUC__)
  // "... signature_of() [with T = ns::foo; ...]" (GCC) or "... signature_of() [T = ns::foo]" (Clang)
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

/// The unqualified name of a class, as the compiler spells it (`training_config`). Computed while
/// compiling, so that each named type adds no code.
template <class T> inline constexpr std::string_view type_name_v = name_in_signature(signature_of<T>());

template <class T> constexpr std::string_view type_name() { return type_name_v<T>; }

} // namespace cairn::detail
