#pragma once

// How cairn's ordinary (non-template) functions are compiled.
//
// By default cairn is header-only: those functions are defined inline in the headers, and
// every translation unit that uses one compiles it. A program with many translation units
// can compile them once instead: define CAIRN_SEPARATE_COMPILATION for every translation
// unit of the program, and include <cairn/src.hpp> (every layer the build has; or
// <cairn/config/src.hpp> for a program of configs only) in exactly one of them. The headers
// then only declare those functions, and include less.

#ifdef CAIRN_SEPARATE_COMPILATION
#define CAIRN_DECL
#else
#define CAIRN_DECL inline
#endif
