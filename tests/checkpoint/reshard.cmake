# Saves with one world size and layout, loads with another, for one format:
#   cmake -DTOOL=… -DWORKER=… -DFORMAT=distributed|state_dict -DWORK_DIR=… -P reshard.cmake
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "failed (${result}): ${ARGN}\n${out}${err}")
  endif()
endfunction()

# saved ranks, saved scheme, loaded ranks, loaded scheme
set(cases "1 dim 2 flat" "2 dim 2 dim" "2 flat 4 dim" "4 mixed 1 dim" "4 dim 2 mixed" "2 mixed 4 flat" "4 flat 4 flat")
foreach(case IN LISTS cases)
  string(REPLACE " " ";" case ${case})
  list(GET case 0 save_ranks)
  list(GET case 1 save_scheme)
  list(GET case 2 load_ranks)
  list(GET case 3 load_scheme)
  set(dir ${WORK_DIR}/${FORMAT}_${save_ranks}${save_scheme}_${load_ranks}${load_scheme})
  file(REMOVE_RECURSE ${dir})
  run(${TOOL} launch -n ${save_ranks} -- ${WORKER} save ${dir} ${FORMAT} ${save_scheme})
  run(${TOOL} launch -n ${load_ranks} -- ${WORKER} load ${dir} ${FORMAT} ${load_scheme})
  message(STATUS "${FORMAT}: ${save_ranks} ranks (${save_scheme}) -> ${load_ranks} ranks (${load_scheme}): ok")
  file(REMOVE_RECURSE ${dir})
endforeach()
