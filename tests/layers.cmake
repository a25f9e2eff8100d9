# Fails when a header includes a layer above its own, or when the tool or the examples reach
# into cairn's internals (`detail::`): they use the public API, as users do. Layers, lowest first (see
# docs/api.md): the base (cairn/error.hpp, cairn/diagnostics.hpp, cairn/progress.hpp, cairn/detail/,
# cairn/impl/),
# config/, then io/ and comm/ (side by side: neither includes the other), checkpoint/, training/.
# cairn/src.hpp (the definitions of every layer) is, like cairn/cairn.hpp, above everything.
# An umbrella header (cairn/config.hpp, …) belongs to its folder's layer; cairn/cairn.hpp is
# above everything.
#
#     cmake -DSOURCE_DIR=<cairn> -P tests/layers.cmake
cmake_policy(VERSION 3.22)
function(cairn_layer path out_layer out_folder)
  string(REGEX REPLACE "^cairn/" "" rest "${path}")
  string(REGEX MATCH "^[a-z_]+" first "${rest}")
  if(rest MATCHES "^[a-z_]+\\.hpp$")
    string(REGEX REPLACE "\\.hpp$" "" first "${rest}")
  endif()
  set(layers "detail=0;impl=0;error=0;diagnostics=0;progress=0;config=1;io=2;comm=2;checkpoint=3;training=4;cairn=5;src=5")
  foreach(entry IN LISTS layers)
    string(REPLACE "=" ";" pair "${entry}")
    list(GET pair 0 name)
    list(GET pair 1 rank)
    if(first STREQUAL name)
      set(${out_layer} ${rank} PARENT_SCOPE)
      if(rank EQUAL 0)
        set(${out_folder} base PARENT_SCOPE)
      else()
        set(${out_folder} ${name} PARENT_SCOPE)
      endif()
      return()
    endif()
  endforeach()
  message(FATAL_ERROR "${path}: not in any layer; add its folder to tests/layers.cmake")
endfunction()

file(GLOB_RECURSE headers RELATIVE ${SOURCE_DIR}/include ${SOURCE_DIR}/include/cairn/*.hpp
     ${SOURCE_DIR}/include/cairn/*.ipp)
set(problems "")
set(checked 0)
foreach(header IN LISTS headers)
  cairn_layer(${header} layer folder)
  file(STRINGS ${SOURCE_DIR}/include/${header} lines REGEX "^#include <cairn/")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^#include <([^>]+)>.*" "\\1" included "${line}")
    cairn_layer(${included} target_layer target_folder)
    math(EXPR checked "${checked} + 1")
    if(NOT target_folder STREQUAL folder AND NOT target_layer LESS layer)
      string(APPEND problems "\n  ${header} (${folder}) includes ${included} (${target_folder})")
    endif()
  endforeach()
endforeach()
if(problems)
  message(FATAL_ERROR "includes running upward or sideways between layers:${problems}")
endif()
message(STATUS "layers: ${checked} includes checked, none runs upward")

file(GLOB_RECURSE programs ${SOURCE_DIR}/tools/*.cpp ${SOURCE_DIR}/tools/*.hpp ${SOURCE_DIR}/examples/*.cpp
     ${SOURCE_DIR}/examples/*.hpp)
foreach(program IN LISTS programs)
  file(STRINGS ${program} internal REGEX "detail::")
  foreach(line IN LISTS internal)
    string(APPEND problems "\n  ${program}: ${line}")
  endforeach()
endforeach()
if(problems)
  message(FATAL_ERROR "the tool and the examples use cairn's internals:${problems}")
endif()

# Each layer's umbrella header (cairn/config.hpp, cairn/io.hpp, cairn/comm.hpp,
# cairn/checkpoint.hpp, cairn/training.hpp) reaches every public header of its folder, directly or
# not, so that one include gives a user the whole layer. A header left out on purpose says why
# on a line of its own: `// cairn: not in the umbrella: <reason>` (the c10d backends, whose
# headers cost seconds a translation unit, and options that need a library of their own).
set(umbrella_problems "")
foreach(layer IN ITEMS config io comm checkpoint training)
  set(seen)
  set(pending cairn/${layer}.hpp)
  while(pending)
    list(POP_FRONT pending file)
    if(file IN_LIST seen OR NOT EXISTS ${SOURCE_DIR}/include/${file})
      continue()
    endif()
    list(APPEND seen ${file})
    file(STRINGS ${SOURCE_DIR}/include/${file} lines REGEX "^#include <cairn/")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^#include <([^>]+)>.*" "\\1" included "${line}")
      list(APPEND pending ${included})
    endforeach()
  endwhile()
  file(GLOB_RECURSE members RELATIVE ${SOURCE_DIR}/include ${SOURCE_DIR}/include/cairn/${layer}/*.hpp)
  foreach(member IN LISTS members)
    if(member MATCHES "/(detail|impl)/" OR member IN_LIST seen)
      continue()
    endif()
    file(STRINGS ${SOURCE_DIR}/include/${member} excused REGEX "^// cairn: not in the umbrella: .+")
    if(NOT excused)
      string(APPEND umbrella_problems "\n  cairn/${layer}.hpp does not reach ${member}")
    endif()
  endforeach()
endforeach()
if(umbrella_problems)
  message(FATAL_ERROR "umbrella headers that miss part of their layer:${umbrella_problems}")
endif()
message(STATUS "layers: every umbrella header reaches its whole layer")
