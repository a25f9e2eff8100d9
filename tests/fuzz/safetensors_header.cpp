// libFuzzer target: the safetensors header parser on arbitrary bytes. It must either accept the
// input or throw io_error; anything else (a crash, a sanitizer report, another exception) is a bug.
#include <cairn/io/safetensors.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  try {
    auto header = cairn::io::parse_header(std::as_bytes(std::span(data, size)), "fuzz-input");
    // An accepted header must describe tensors inside the input.
    for (auto const& t : header.tensors)
      if (header.data_offset + t.end > size) __builtin_trap();
  } catch (cairn::io::io_error const&) {
  }
  return 0;
}
