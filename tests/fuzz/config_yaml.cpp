// libFuzzer target: YAML config text, on arbitrary bytes. parse_yaml must either give a JSON
// document or throw cairn::config_error; and what it gives, printed by to_yaml, must read back
// to the same document. Anything else (a crash, a sanitizer report, another exception, a
// document that changes on the way round) is a bug.
#include <cairn/config/yaml.hpp>

#include <boost/json.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace {

bool has_nan(boost::json::value const& v) {
  if (v.is_double()) return std::isnan(v.get_double());
  if (v.is_array())
    for (auto const& e : v.get_array())
      if (has_nan(e)) return true;
  if (v.is_object())
    for (auto const& [k, e] : v.get_object())
      if (has_nan(e)) return true;
  return false;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  std::string_view text(reinterpret_cast<char const*>(data), size);
  boost::json::value document;
  try {
    document = cairn::parse_yaml(text, "fuzz-input");
  } catch (cairn::config_error const&) {
    return 0;
  }
  if (has_nan(document)) return 0; // NaN is not equal to itself
  auto printed = cairn::to_yaml(document);
  boost::json::value again;
  try {
    again = cairn::parse_yaml(printed, "printed");
  } catch (cairn::config_error const&) {
    std::abort(); // to_yaml printed what parse_yaml refuses
  }
  if (again != document) std::abort();
  return 0;
}
