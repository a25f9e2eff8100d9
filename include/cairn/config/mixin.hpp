#pragma once

#include <cairn/config/reflect.hpp>

#include <type_traits>

namespace cairn {

/// Copies every described base subobject of `from` that `To` also derives from. This turns a
/// path-less variant of a config into the full one without copying key by key:
///
///     checkpoint_save_config save = cairn::assign_shared_bases(checkpoint_save_config{}, export_cfg);
///     save.path = dir;
template <described_config To, described_config From> To assign_shared_bases(To to, From const& from) {
  boost::mp11::mp_for_each<detail::bases_of<From>>([&](auto base) {
    using base_type = typename decltype(base)::type;
    if constexpr (std::is_base_of_v<base_type, To>) static_cast<base_type&>(to) = static_cast<base_type const&>(from);
  });
  return to;
}

} // namespace cairn
