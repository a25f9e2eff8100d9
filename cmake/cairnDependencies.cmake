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
