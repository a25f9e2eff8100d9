# `cairn convert` without the model's code: distributed (2 ranks) -> state_dict -> loaded on 4
# ranks -> distributed -> loaded on 2 ranks in another layout, every element checked each time.
#   cmake -DTOOL=… -DWORKER=… -DWORK_DIR=… -P convert.cmake
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "failed (${result}): ${ARGN}\n${out}${err}")
  endif()
  message(STATUS "${out}")
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
run(${TOOL} launch -n 2 -- ${WORKER} save ${WORK_DIR}/d1 distributed dim)
run(${TOOL} convert input.path=${WORK_DIR}/d1 input.format=distributed output.path=${WORK_DIR}/s1
    output.format=state_dict)
run(${TOOL} verify ${WORK_DIR}/s1)
run(${TOOL} launch -n 4 -- ${WORKER} load ${WORK_DIR}/s1 state_dict flat)
run(${TOOL} convert input.path=${WORK_DIR}/s1 input.format=state_dict output.path=${WORK_DIR}/d2
    output.format=distributed)
run(${TOOL} verify ${WORK_DIR}/d2)
run(${TOOL} launch -n 2 -- ${WORKER} load ${WORK_DIR}/d2 distributed mixed)

# inspect names the format; verify fails, naming the file, when a rank's file is gone.
execute_process(COMMAND ${TOOL} inspect ${WORK_DIR}/d1 OUTPUT_VARIABLE out RESULT_VARIABLE result)
if(NOT result EQUAL 0 OR NOT out MATCHES "format: distributed" OR NOT out MATCHES "saved by 2 ranks")
  message(FATAL_ERROR "inspect of a distributed checkpoint:\n${out}")
endif()
file(REMOVE ${WORK_DIR}/d1/rank_1.safetensors)
execute_process(COMMAND ${TOOL} verify ${WORK_DIR}/d1 ERROR_VARIABLE err RESULT_VARIABLE result)
if(result EQUAL 0 OR NOT err MATCHES "rank_1.safetensors: missing \\(rank 1 of 2\\)")
  message(FATAL_ERROR "verify accepted a checkpoint without rank 1's file (${result}):\n${err}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
