// cairn compiled once for the tests of the libtorch layers (CAIRN_SEPARATE_COMPILATION).
#include <cairn/src.hpp>
