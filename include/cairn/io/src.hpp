#pragma once

/// The definitions of the io layer's ordinary functions, for a program built with
/// CAIRN_SEPARATE_COMPILATION: included by <cairn/src.hpp>, which a program includes in exactly
/// one of its translation units (see <cairn/detail/decl.hpp>). In a header-only build it adds
/// nothing.

#include <cairn/io.hpp>
#include <cairn/io/impl/convert.ipp>
#include <cairn/io/impl/file.ipp>
#include <cairn/io/impl/index.ipp>
#include <cairn/io/impl/safetensors.ipp>
#include <cairn/io/impl/safetensors_writer.ipp>
#include <cairn/io/impl/slice.ipp>
#include <cairn/io/impl/storage.ipp>
