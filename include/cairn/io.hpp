#pragma once

/// cairn's file layer: safetensors reading (mapped, zero-copy, untrusted input checked) and
/// writing (streamed, aligned, checksummed, atomic), index files, durable file operations.
/// Boost.JSON and xxHash only; no libtorch.

#include <cairn/io/backend.hpp>
#include <cairn/io/checksum.hpp>
#include <cairn/io/dtype.hpp>
#include <cairn/io/error.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/float_convert.hpp>
#include <cairn/io/index.hpp>
#include <cairn/io/safetensors.hpp>
#include <cairn/io/safetensors_writer.hpp>
#include <cairn/io/slice.hpp>
#include <cairn/io/storage.hpp>
#ifdef CAIRN_WITH_S3
#include <cairn/io/s3.hpp>
#endif
