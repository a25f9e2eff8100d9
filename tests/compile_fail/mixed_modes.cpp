// A translation unit must not mix the two ways cairn's functions are compiled: headers included
// header-only, then CAIRN_SEPARATE_COMPILATION defined for more of them, would leave some of its
// calls to inline copies and others to the compiled library.
#include <cairn/config/json.hpp>

#ifdef CAIRN_EXPECT_FAILURE
#define CAIRN_SEPARATE_COMPILATION
#endif
#include <cairn/io/file.hpp> // not included by the header above

int main() { return cairn::parse_json("{}").is_object() ? 0 : 1; }
