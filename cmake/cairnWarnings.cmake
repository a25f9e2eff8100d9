# Strict warnings for cairn's own targets (tests, examples, benchmarks), never for users. They
# are errors only where CAIRN_WARNINGS_AS_ERRORS is on (the project's test command turns it on):
# a user's plain build never stops on a warning a newer compiler adds.
add_library(cairn_warnings INTERFACE)
target_compile_options(cairn_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                                                -Wnon-virtual-dtor -Wold-style-cast)
if(CAIRN_WARNINGS_AS_ERRORS)
  target_compile_options(cairn_warnings INTERFACE -Werror)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    # GCC 12 at -O3 reports -Wrestrict inside libstdc++'s `"literal" + std::string&&` (GCC bug
    # 105329, fixed in 13): a false positive, kept a warning rather than an error.
    target_compile_options(cairn_warnings INTERFACE -Wno-error=restrict)
  endif()
endif()
if(CAIRN_SANITIZE)
  target_compile_options(cairn_warnings INTERFACE -fsanitize=address,undefined -fno-sanitize-recover=all
                                                  -fno-omit-frame-pointer)
  target_link_options(cairn_warnings INTERFACE -fsanitize=address,undefined)
endif()
