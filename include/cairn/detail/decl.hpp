// How cairn's ordinary (non-template) functions are compiled. No include guard: the check of the
// mode below runs at every include, so that a translation unit cannot mix the two.
//
// By default cairn is header-only: those functions are defined inline in the headers, and
// every translation unit that uses one compiles it (the CMake target cairn::cairn). A program
// with many translation units can compile them once instead: link cairn::compiled
// (cairn::core_compiled without libtorch), which defines CAIRN_SEPARATE_COMPILATION for every
// translation unit that uses it and holds the definitions (<cairn/src.hpp>, compiled once).
// The headers then only declare those functions, and include less. Without CMake: define
// CAIRN_SEPARATE_COMPILATION for every translation unit, and compile <cairn/src.hpp> in one.

#ifdef CAIRN_SEPARATE_COMPILATION
#ifdef CAIRN_DETAIL_HEADER_ONLY_SEEN
// An error here: cairn's headers were included header-only earlier in this translation unit,
// and CAIRN_SEPARATE_COMPILATION is defined now. Define it for whole programs (link
// cairn::compiled), never for some headers only.
#error "cairn: CAIRN_SEPARATE_COMPILATION defined after cairn's headers were included without it"
#endif
#define CAIRN_DETAIL_SEPARATE_SEEN
#else
#ifdef CAIRN_DETAIL_SEPARATE_SEEN
// An error here: cairn's headers were included with CAIRN_SEPARATE_COMPILATION earlier in this
// translation unit, and it is not defined now.
#error "cairn: CAIRN_SEPARATE_COMPILATION undefined after cairn's headers were included with it"
#endif
#define CAIRN_DETAIL_HEADER_ONLY_SEEN
#endif

#ifndef CAIRN_DETAIL_DECL_HPP
#define CAIRN_DETAIL_DECL_HPP

#ifdef CAIRN_SEPARATE_COMPILATION
#define CAIRN_DECL

namespace cairn::detail {
/// Defined by <cairn/src.hpp>; every translation unit built with CAIRN_SEPARATE_COMPILATION
/// refers to it, so that a program without cairn's compiled definitions fails to link naming it.
extern int separate_compilation_definitions_are_linked;
// NOLINTNEXTLINE(cert-err58-cpp): a constant address
[[gnu::used]] static int const* const separate_compilation_link_check = &separate_compilation_definitions_are_linked;
} // namespace cairn::detail
#else
#define CAIRN_DECL inline
#endif

#endif
