# Every public header must compile on its own: one generated translation unit per header,
# including it twice (the second include checks the include guard).
file(GLOB_RECURSE cairn_public_headers RELATIVE ${PROJECT_SOURCE_DIR}/include CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/include/cairn/*.hpp)
# A header whose include closure (cairn's files it includes, directly or not, under any condition)
# never mentions CAIRN_SEPARATE_COMPILATION or CAIRN_DECL reads the same in both modes: its check
# with CAIRN_SEPARATE_COMPILATION would compile the same tokens again, so it has none.
file(GLOB_RECURSE cairn_header_files RELATIVE ${PROJECT_SOURCE_DIR}/include CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/include/cairn/*.hpp ${PROJECT_SOURCE_DIR}/include/cairn/*.ipp)
foreach(file IN LISTS cairn_header_files)
  string(MAKE_C_IDENTIFIER ${file} id)
  file(STRINGS ${PROJECT_SOURCE_DIR}/include/${file} lines
       REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]cairn/|CAIRN_SEPARATE_COMPILATION|CAIRN_DECL")
  set(cairn_includes_${id})
  set(cairn_mode_dependent_${id} FALSE)
  foreach(line IN LISTS lines)
    if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*[<\"](cairn/[^>\"]+)[>\"]")
      list(APPEND cairn_includes_${id} ${CMAKE_MATCH_1})
    endif()
    if(line MATCHES "CAIRN_SEPARATE_COMPILATION|CAIRN_DECL")
      set(cairn_mode_dependent_${id} TRUE)
    endif()
  endforeach()
endforeach()
function(cairn_reads_the_same_in_both_modes header out)
  set(seen)
  set(pending ${header})
  while(pending)
    list(POP_FRONT pending file)
    if(file IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${file})
    string(MAKE_C_IDENTIFIER ${file} id)
    if(NOT DEFINED cairn_mode_dependent_${id} OR cairn_mode_dependent_${id})
      set(${out} FALSE PARENT_SCOPE)
      return()
    endif()
    list(APPEND pending ${cairn_includes_${id}})
  endwhile()
  set(${out} TRUE PARENT_SCOPE)
endfunction()

# Lists per mode (header-only, and separate), for headers without and with libtorch.
set(cairn_header_sources)
set(cairn_header_sources_torch)
set(cairn_header_sources_separate)
set(cairn_header_sources_separate_torch)
foreach(header IN LISTS cairn_public_headers)
  # Headers that need libtorch say so on a line of their own; they are checked only with it.
  file(STRINGS ${PROJECT_SOURCE_DIR}/include/${header} needs_torch REGEX "^// cairn: requires libtorch$")
  file(STRINGS ${PROJECT_SOURCE_DIR}/include/${header} needs_nccl REGEX "^// cairn: requires nccl$")
  file(STRINGS ${PROJECT_SOURCE_DIR}/include/${header} needs_yaml REGEX "^// cairn: requires yaml-cpp$")
  file(STRINGS ${PROJECT_SOURCE_DIR}/include/${header} needs_s3 REGEX "^// cairn: requires s3$")
  if((needs_torch AND NOT CAIRN_WITH_TORCH) OR (needs_nccl AND NOT CAIRN_WITH_NCCL) OR (needs_yaml AND NOT CAIRN_WITH_YAML)
     OR (needs_s3 AND NOT CAIRN_WITH_S3))
    continue()
  endif()
  string(MAKE_C_IDENTIFIER ${header} stem)
  set(source ${CMAKE_CURRENT_BINARY_DIR}/headers/${stem}.cpp)
  set(content "#include <${header}>\n#include <${header}>\n")
  if(EXISTS ${source})
    file(READ ${source} existing)
  endif()
  if(NOT existing STREQUAL content)
    file(WRITE ${source} "${content}")
  endif()
  # Headers with libtorch parts where the build has libtorch are checked with those that need it.
  file(STRINGS ${PROJECT_SOURCE_DIR}/include/${header} torch_parts REGEX "^// cairn: libtorch parts with CAIRN_WITH_TORCH$")
  set(kind "")
  if(needs_torch OR (torch_parts AND CAIRN_WITH_TORCH))
    set(kind "_torch")
  endif()
  # cairn/src.hpp is compiled, alone, by cairn::compiled and cairn::core_compiled already.
  cairn_reads_the_same_in_both_modes(${header} same)
  if(NOT header STREQUAL "cairn/src.hpp" AND NOT same)
    list(APPEND cairn_header_sources_separate${kind} ${source})
  endif()
  # The src.hpp headers hold definitions for CAIRN_SEPARATE_COMPILATION; in a header-only build
  # the headers themselves include them (checked here, header by header, and in cairn.hpp).
  if(NOT header MATCHES "(^|/)src\\.hpp$")
    list(APPEND cairn_header_sources${kind} ${source})
  endif()
endforeach()

# Every header compiles on its own as a user includes it: header-only, and with
# CAIRN_SEPARATE_COMPILATION, where it declares cairn's ordinary functions instead of defining them
# (and includes less).
set(cairn_header_checks)
foreach(kind IN ITEMS "" _torch)
  foreach(mode IN ITEMS "" _separate)
    if(cairn_header_sources${mode}${kind})
      add_library(cairn_header_check${mode}${kind} OBJECT ${cairn_header_sources${mode}${kind}})
      target_link_libraries(cairn_header_check${mode}${kind} PRIVATE cairn::cairn cairn_warnings)
      if(mode STREQUAL "_separate")
        target_compile_definitions(cairn_header_check${mode}${kind} PRIVATE CAIRN_SEPARATE_COMPILATION)
      endif()
      list(APPEND cairn_header_checks cairn_header_check${mode}${kind})
    endif()
  endforeach()
endforeach()

# The libtorch headers' checks start from <ATen/core/Tensor.h> precompiled (a second a header,
# twice per header). Sound: every one of them includes it, in both modes (a layer's src.hpp
# through its libtorch parts), so the precompiled header gives none of them anything it would not
# include itself; the headers without libtorch get no precompiled header at all.
if(CAIRN_TEST_PCH AND TARGET cairn_header_check_torch)
  add_library(cairn_header_check_pch OBJECT pch.cpp)
  target_link_libraries(cairn_header_check_pch PRIVATE cairn::cairn cairn_warnings)
  target_precompile_headers(cairn_header_check_pch PRIVATE <ATen/core/Tensor.h>)
  foreach(target IN ITEMS cairn_header_check_torch cairn_header_check_separate_torch)
    target_precompile_headers(${target} REUSE_FROM cairn_header_check_pch)
    # A precompiled header the compiler refuses would cost its time again, silently.
    target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU,Clang>:-Winvalid-pch>)
  endforeach()
endif()

# Checked, not compiled to code: a third less time, the same diagnostics.
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  set_target_properties(${cairn_header_checks} PROPERTIES CXX_COMPILER_LAUNCHER
                                                          ${CMAKE_CURRENT_SOURCE_DIR}/syntax_only.sh)
endif()
