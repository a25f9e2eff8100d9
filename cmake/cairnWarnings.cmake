# Strict warnings for cairn's own targets (tests, examples, benchmarks), never for users.
add_library(cairn_warnings INTERFACE)
target_compile_options(cairn_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                                                -Wnon-virtual-dtor -Wold-style-cast -Werror)
if(CAIRN_SANITIZE)
  target_compile_options(cairn_warnings INTERFACE -fsanitize=address,undefined -fno-sanitize-recover=all
                                                  -fno-omit-frame-pointer)
  target_link_options(cairn_warnings INTERFACE -fsanitize=address,undefined)
endif()
