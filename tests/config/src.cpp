// cairn's ordinary functions, compiled once for the config tests (CAIRN_SEPARATE_COMPILATION).
#include <cairn/config/src.hpp>
