#pragma once

/// The definitions of cairn's ordinary functions, for a program built with
/// CAIRN_SEPARATE_COMPILATION: include this header in exactly one of its translation units
/// (see <cairn/detail/decl.hpp>). In a header-only build it adds nothing.

#include <cairn/config.hpp>
#include <cairn/config/impl/check.ipp>
#include <cairn/config/impl/command_line.ipp>
#include <cairn/config/impl/compare.ipp>
#include <cairn/config/impl/docs.ipp>
#include <cairn/config/impl/json.ipp>
#include <cairn/config/impl/legacy.ipp>
#include <cairn/config/impl/override.ipp>
#include <cairn/config/impl/pretty.ipp>
#include <cairn/config/impl/reflect.ipp>
#include <cairn/config/impl/schema.ipp>
#include <cairn/config/impl/show.ipp>
#include <cairn/config/impl/validate.ipp>
#include <cairn/config/impl/value.ipp>
#ifdef CAIRN_WITH_YAML
#include <cairn/config/impl/yaml.ipp>
#endif
#include <cairn/impl/diagnostics.ipp>
#include <cairn/impl/progress.ipp>
