# Finds what cairn needs and links it to an INTERFACE target. Shared by the build tree
# and the installed package config, so both agree on what each option brings in.
include(GNUInstallDirs)
include(CMakeFindDependencyMacro)

# find_dependency inside an installed package config, find_package(REQUIRED) in the build tree.
macro(_cairn_find)
  if(CMAKE_FIND_PACKAGE_NAME)
    find_dependency(${ARGN})
  else()
    find_package(${ARGN} REQUIRED)
  endif()
endmacro()

macro(cairn_find_dependencies)
  _cairn_find(Boost 1.81 CONFIG COMPONENTS json)
  if(CAIRN_WITH_YAML)
    _cairn_find(yaml-cpp)
  endif()
  # libcurl for S3's HTTP and its Signature V4; OpenSSL's libcrypto for Content-MD5.
  if(CAIRN_WITH_S3)
    _cairn_find(CURL 7.75)
    _cairn_find(OpenSSL COMPONENTS Crypto)
  endif()
  # xxHash's library, for its runtime dispatch of XXH3 to AVX2 or AVX-512 (checksums about twice
  # as fast on data in cache); without it cairn hashes with xxHash's inline, baseline code.
  # -DCAIRN_XXHASH_DISPATCH=OFF keeps the inline code.
  if(NOT DEFINED CAIRN_XXHASH_DISPATCH OR CAIRN_XXHASH_DISPATCH)
    find_library(CAIRN_XXHASH_LIBRARY xxhash)
  endif()
  if(NOT DEFINED CAIRN_XXHASH_DISPATCH)
    if(CAIRN_XXHASH_LIBRARY AND CMAKE_CXX_COMPILER_LOADED)
      include(CheckCXXSourceCompiles)
      set(CMAKE_REQUIRED_LIBRARIES ${CAIRN_XXHASH_LIBRARY})
      set(CMAKE_REQUIRED_QUIET ON)
      check_cxx_source_compiles(
        "#include <cstddef>
         extern \"C\" int XXH3_64bits_update_dispatch(void*, void const*, std::size_t);
         int main(int argc, char**) { return argc > 9 ? XXH3_64bits_update_dispatch(nullptr, nullptr, 0) : 0; }"
        CAIRN_XXHASH_DISPATCH)
      unset(CMAKE_REQUIRED_LIBRARIES)
      unset(CMAKE_REQUIRED_QUIET)
    endif()
  endif()
  if(CAIRN_WITH_TORCH)
    _cairn_find(Torch)
  endif()
  if(CAIRN_WITH_NCCL)
    _cairn_find(CUDAToolkit)
    find_library(CAIRN_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
    find_path(CAIRN_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
  endif()
endmacro()

# `core` gets what every part needs; `full` adds the optional parts on top.
function(cairn_link_dependencies core full)
  target_link_libraries(${core} INTERFACE Boost::headers Boost::json)
  if(CAIRN_WITH_YAML)
    # Debian's yaml-cpp 0.7 exports `yaml-cpp`; later releases `yaml-cpp::yaml-cpp`.
    if(TARGET yaml-cpp::yaml-cpp)
      target_link_libraries(${core} INTERFACE yaml-cpp::yaml-cpp)
    else()
      target_link_libraries(${core} INTERFACE yaml-cpp)
    endif()
    target_compile_definitions(${core} INTERFACE CAIRN_WITH_YAML=1)
  endif()
  if(CAIRN_WITH_S3)
    target_link_libraries(${core} INTERFACE CURL::libcurl OpenSSL::Crypto)
    target_compile_definitions(${core} INTERFACE CAIRN_WITH_S3=1)
  endif()
  if(CAIRN_XXHASH_DISPATCH)
    target_link_libraries(${core} INTERFACE ${CAIRN_XXHASH_LIBRARY})
    target_compile_definitions(${core} INTERFACE CAIRN_XXHASH_DISPATCH=1)
  endif()
  set(target ${full})
  if(CAIRN_WITH_TORCH)
    target_link_libraries(${target} INTERFACE ${TORCH_LIBRARIES})
    # libtorch declares its Gloo process group only under this definition.
    target_compile_definitions(${target} INTERFACE CAIRN_WITH_TORCH=1 USE_C10D_GLOO=1)
  endif()
  if(CAIRN_WITH_NCCL)
    target_link_libraries(${target} INTERFACE CUDA::cudart ${CAIRN_NCCL_LIBRARY})
    target_include_directories(${target} SYSTEM INTERFACE ${CAIRN_NCCL_INCLUDE_DIR})
    target_compile_definitions(${target} INTERFACE CAIRN_WITH_NCCL=1)
  endif()
endfunction()

cairn_find_dependencies()
