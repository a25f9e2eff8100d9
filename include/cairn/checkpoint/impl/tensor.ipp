// Definitions of <cairn/checkpoint/tensor.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/tensor.hpp>
#include <cairn/error.hpp>
#include <cairn/io/dtype.hpp>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstddef>
#include <span>
#include <string>

namespace cairn {

CAIRN_DECL io::dtype to_dtype(c10::ScalarType type) {
  switch (type) {
  case c10::ScalarType::Double:
    return io::dtype::F64;
  case c10::ScalarType::Float:
    return io::dtype::F32;
  case c10::ScalarType::Half:
    return io::dtype::F16;
  case c10::ScalarType::BFloat16:
    return io::dtype::BF16;
  case c10::ScalarType::Long:
    return io::dtype::I64;
  case c10::ScalarType::Int:
    return io::dtype::I32;
  case c10::ScalarType::Short:
    return io::dtype::I16;
  case c10::ScalarType::Char:
    return io::dtype::I8;
  case c10::ScalarType::Byte:
    return io::dtype::U8;
  case c10::ScalarType::Bool:
    return io::dtype::BOOL;
  default:
    throw checkpoint_error(checkpoint_errc::invalid_state,
                           std::string("tensors of type ") + c10::toString(type) + " cannot be checkpointed");
  }
}

} // namespace cairn

namespace cairn::detail {

CAIRN_DECL c10::ScalarType to_scalar_type(io::dtype type) {
  switch (type) {
  case io::dtype::F64:
    return c10::ScalarType::Double;
  case io::dtype::F32:
    return c10::ScalarType::Float;
  case io::dtype::F16:
    return c10::ScalarType::Half;
  case io::dtype::BF16:
    return c10::ScalarType::BFloat16;
  case io::dtype::I64:
    return c10::ScalarType::Long;
  case io::dtype::I32:
    return c10::ScalarType::Int;
  case io::dtype::I16:
    return c10::ScalarType::Short;
  case io::dtype::I8:
    return c10::ScalarType::Char;
  case io::dtype::U8:
    return c10::ScalarType::Byte;
  case io::dtype::BOOL:
    return c10::ScalarType::Bool;
  default:
    throw checkpoint_error(checkpoint_errc::invalid_state,
                           "dtype " + std::string(io::name(type)) + " has no libtorch element type here");
  }
}

} // namespace cairn::detail
