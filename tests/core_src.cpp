// cairn's ordinary functions, compiled once for the tests without libtorch (CAIRN_SEPARATE_COMPILATION).
#include <cairn/src.hpp>
