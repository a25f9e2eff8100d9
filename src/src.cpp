// cairn's ordinary functions, compiled once: the CMake targets cairn::compiled (every layer the
// build has) and cairn::core_compiled (the layers without libtorch) are built from this file.
#include <cairn/src.hpp>
