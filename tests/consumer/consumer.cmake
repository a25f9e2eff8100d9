# Outside projects that use cairn the two ways users do: find_package against an install in a
# temporary prefix, and add_subdirectory of the source tree.
set(cairn_consumer_dir ${CMAKE_CURRENT_LIST_DIR})
foreach(mode IN ITEMS find_package add_subdirectory)
  add_test(NAME consumer_${mode}
           COMMAND ${CMAKE_COMMAND} -DMODE=${mode} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DBUILD_DIR=${CMAKE_BINARY_DIR}
                   -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer_${mode} -DGENERATOR=${CMAKE_GENERATOR}
                   -DCXX=${CMAKE_CXX_COMPILER} -P ${cairn_consumer_dir}/run.cmake)
  set_tests_properties(consumer_${mode} PROPERTIES LABELS consumer)
endforeach()

# The README's C++ blocks, compiled against the installed package; its trainer run and resumed.
if(CAIRN_WITH_TORCH)
  add_test(NAME consumer_readme
           COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DBUILD_DIR=${CMAKE_BINARY_DIR}
                   -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer_readme -DGENERATOR=${CMAKE_GENERATOR}
                   -DCXX=${CMAKE_CXX_COMPILER} -P ${cairn_consumer_dir}/readme.cmake)
  # COST: the longest tests start first, so that ctest -j packs the rest around them.
  set_tests_properties(consumer_readme PROPERTIES LABELS consumer TIMEOUT 900 COST 60)
  # The trainer of docs/own-trainer.md, a program of one's own, against the installed package.
  add_test(NAME consumer_own_trainer
           COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DBUILD_DIR=${CMAKE_BINARY_DIR}
                   -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer_own_trainer -DGENERATOR=${CMAKE_GENERATOR}
                   -DCXX=${CMAKE_CXX_COMPILER} -P ${cairn_consumer_dir}/own_trainer.cmake)
  set_tests_properties(consumer_own_trainer PROPERTIES LABELS consumer TIMEOUT 900 COST 55)
endif()
