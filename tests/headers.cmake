# Every public header must compile on its own: one generated translation unit per header,
# including it twice (the second include checks the include guard).
file(GLOB_RECURSE cairn_public_headers RELATIVE ${PROJECT_SOURCE_DIR}/include CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/include/cairn/*.hpp)
set(cairn_header_sources)
set(cairn_header_sources_separate)
foreach(header IN LISTS cairn_public_headers)
  # Headers that need libtorch say so on a line of their own; they are checked only with it.
  file(STRINGS ${PROJECT_SOURCE_DIR}/include/${header} needs_torch REGEX "^// cairn: requires libtorch$")
  file(STRINGS ${PROJECT_SOURCE_DIR}/include/${header} needs_nccl REGEX "^// cairn: requires nccl$")
  if((needs_torch AND NOT CAIRN_WITH_TORCH) OR (needs_nccl AND NOT CAIRN_WITH_NCCL))
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
  list(APPEND cairn_header_sources_separate ${source})
  # The src.hpp headers hold definitions for CAIRN_SEPARATE_COMPILATION; in a header-only build
  # the headers themselves include them (checked here, header by header, and in cairn.hpp).
  if(NOT header MATCHES "(^|/)src\\.hpp$")
    list(APPEND cairn_header_sources ${source})
  endif()
endforeach()
add_library(cairn_header_check OBJECT ${cairn_header_sources})
target_link_libraries(cairn_header_check PRIVATE cairn::cairn cairn_warnings)

# Every header also compiles on its own with CAIRN_SEPARATE_COMPILATION, where it declares
# cairn's ordinary functions instead of defining them (and includes less).
add_library(cairn_header_check_separate OBJECT ${cairn_header_sources_separate})
target_link_libraries(cairn_header_check_separate PRIVATE cairn::cairn cairn_warnings)
target_compile_definitions(cairn_header_check_separate PRIVATE CAIRN_SEPARATE_COMPILATION)

# Checked, not compiled to code: a third less time, the same diagnostics.
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  set_target_properties(cairn_header_check cairn_header_check_separate
                        PROPERTIES CXX_COMPILER_LAUNCHER ${CMAKE_CURRENT_SOURCE_DIR}/syntax_only.sh)
endif()
