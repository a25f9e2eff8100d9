#pragma once

#include <cairn/config/check.hpp>
#include <cairn/config/detail/pack.hpp>
#include <cairn/config/hint.hpp>

#include <optional>
#include <string_view>
#include <type_traits>

namespace cairn {

/// The description of one member of a config: `cairn::field(&foo::bar, "What bar is.", hint::core, check::positive)`.
/// The default value is the member's own initializer, never repeated here.
template <class C, class V, class... Checks> struct field_definition {
  using owner = C;
  using value_type = V;
  V C::*pointer;
  std::string_view description;
  cairn::hint hint;
  detail::pack<Checks...> checks;
};

/// A derived config's change to an inherited field: any of description, hint and checks.
/// Built with `cairn::update(&derived::member).description("…")`; what is not given is kept.
/// The default of an inherited field is changed by the derived struct's constructor, so that
/// `T{}` stays the only source of defaults (documentation reads them from `T{}`).
template <class C, class V, class Checks = detail::pack<>, bool ReplacesChecks = false> struct field_update {
  using owner = C;
  using value_type = V;
  V C::*pointer;
  std::optional<std::string_view> new_description{};
  std::optional<cairn::hint> new_hint{};
  Checks new_checks = Checks();
  static constexpr bool replaces_checks = ReplacesChecks;

  constexpr field_update description(std::string_view text) const {
    auto copy = *this;
    copy.new_description = text;
    return copy;
  }
  constexpr field_update hint(cairn::hint h) const {
    auto copy = *this;
    copy.new_hint = h;
    return copy;
  }
  /// Replaces the inherited checks with these.
  template <class... Cs> constexpr auto checks(Cs... cs) const {
    return field_update<C, V, detail::pack<Cs...>, true>{pointer, new_description, new_hint,
                                                         detail::pack<Cs...>(cs...)};
  }
};

template <class C, class V, class... Checks>
constexpr auto field(V C::*pointer, std::string_view description, hint h, Checks... checks) {
  return field_definition<C, V, Checks...>{pointer, description, h, detail::pack<Checks...>(checks...)};
}

/// `&derived::member` names an inherited member (its type is `V base::*`), so a misspelt
/// name is an ordinary compile error, and an update always matches an existing field.
template <class C, class V> constexpr auto update(V C::*pointer) { return field_update<C, V>{pointer}; }

/// The list returned by a config's `cairn_fields(T const*)`, found by argument-dependent lookup.
template <class... Entries> constexpr auto fields(Entries... entries) { return detail::pack<Entries...>(entries...); }

} // namespace cairn
