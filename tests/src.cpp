// cairn compiled once for the tests and benchmarks of the libtorch layers (CAIRN_SEPARATE_COMPILATION).
#include <cairn/src.hpp>
