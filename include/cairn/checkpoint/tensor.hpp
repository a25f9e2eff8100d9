#pragma once
// cairn: requires libtorch

// libtorch tensors as bytes for the file layer, and element types between the two.

#include <cairn/detail/decl.hpp>
#include <cairn/error.hpp>
#include <cairn/io/dtype.hpp>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstddef>
#include <span>
#include <string>

namespace cairn {

/// The file dtype of a libtorch element type; an error for types files cannot hold.
CAIRN_DECL io::dtype to_dtype(c10::ScalarType type);

} // namespace cairn

namespace cairn::detail {

/// The libtorch element type of a file dtype.
CAIRN_DECL c10::ScalarType to_scalar_type(io::dtype type);

/// The bytes of a contiguous CPU tensor.
inline std::span<std::byte const> tensor_bytes(at::Tensor const& tensor) {
  return {static_cast<std::byte const*>(tensor.data_ptr()), tensor.nbytes()};
}
inline std::span<std::byte> tensor_bytes(at::Tensor& tensor) {
  return {static_cast<std::byte*>(tensor.data_ptr()), tensor.nbytes()};
}

} // namespace cairn::detail

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/checkpoint/impl/tensor.ipp>
#endif
