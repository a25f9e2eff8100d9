#pragma once

#include <cstddef>
#include <utility>

namespace cairn::detail {

// A minimal heterogeneous list for field and check lists: far cheaper to instantiate than
// std::tuple, and all cairn needs of one is to visit its elements in order.

template <std::size_t I, class T> struct pack_element { T value; };

template <class Indices, class... Ts> struct pack_base;

template <std::size_t... I, class... Ts> struct pack_base<std::index_sequence<I...>, Ts...> : pack_element<I, Ts>... {
  constexpr explicit pack_base(Ts... values) : pack_element<I, Ts>{values}... {}

  /// Calls `f` on each element, in order.
  template <class F> constexpr void for_each(F&& f) const {
    (f(static_cast<pack_element<I, Ts> const&>(*this).value), ...);
  }
  /// Calls `f` once with every element.
  template <class F> constexpr decltype(auto) apply(F&& f) const {
    return f(static_cast<pack_element<I, Ts> const&>(*this).value...);
  }
  static constexpr std::size_t size = sizeof...(Ts);
};

template <class... Ts> struct pack : pack_base<std::index_sequence_for<Ts...>, Ts...> {
  constexpr explicit pack(Ts... values) : pack_base<std::index_sequence_for<Ts...>, Ts...>(values...) {}
};

} // namespace cairn::detail
