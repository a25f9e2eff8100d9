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
# A function that expects `cairn ARGS` to fail with stderr matching PATTERN.
function(refused pattern)
  execute_process(COMMAND ${TOOL} ${ARGN} ERROR_VARIABLE err OUTPUT_VARIABLE out RESULT_VARIABLE result)
  if(result EQUAL 0 OR NOT err MATCHES "${pattern}")
    message(FATAL_ERROR "cairn ${ARGN} was not refused as expected (${result}, wanted '${pattern}'):\n${out}${err}")
  endif()
endfunction()

# convert never writes into or over its input.
refused("overlaps the input" convert input.path=${WORK_DIR}/d2 input.format=distributed output.path=${WORK_DIR}/d2
        output.format=state_dict)
refused("overlaps the input" convert input.path=${WORK_DIR}/d2 input.format=distributed
        output.path=${WORK_DIR}/d2/inside output.format=state_dict)
refused("overlaps the input" convert input.path=${WORK_DIR}/d2 input.format=distributed output.path=${WORK_DIR}
        output.format=state_dict)
run(${TOOL} verify ${WORK_DIR}/d2)

# Layouts that name a parameter twice (one of them renamed in metadata.json) are refused by
# verify and convert, not silently dropped.
file(COPY ${WORK_DIR}/d2/ DESTINATION ${WORK_DIR}/renamed)
file(READ ${WORK_DIR}/renamed/metadata.json metadata)
string(REGEX MATCHALL "\"name\": \"[^\"]+\"" names "${metadata}")
list(GET names 0 first)
list(GET names 1 second)
string(REPLACE "${second}" "${first}" metadata "${metadata}")
file(WRITE ${WORK_DIR}/renamed/metadata.json "${metadata}")
refused("'embedding': listed twice" verify ${WORK_DIR}/renamed)
refused("'embedding': listed twice" convert input.path=${WORK_DIR}/renamed input.format=distributed
        output.path=${WORK_DIR}/renamed_out output.format=state_dict)

# A directory that holds no checkpoint does not verify.
file(MAKE_DIRECTORY ${WORK_DIR}/empty ${WORK_DIR}/experiment/checkpoints)
refused("holds no checkpoint" verify ${WORK_DIR}/empty)
refused("an experiment directory" verify ${WORK_DIR}/experiment)
refused("holds no checkpoint" inspect ${WORK_DIR}/empty) # inspect and verify agree
# Nor do rank files that lost metadata.json.
file(COPY ${WORK_DIR}/d2/ DESTINATION ${WORK_DIR}/no_metadata)
file(REMOVE ${WORK_DIR}/no_metadata/metadata.json)
refused("holds no checkpoint" verify ${WORK_DIR}/no_metadata)

# Files of a 2-rank save in each other's place, or metadata.json with the ranks' layouts
# reversed: refused, naming the file.
file(COPY ${WORK_DIR}/d1/ DESTINATION ${WORK_DIR}/swapped)
file(RENAME ${WORK_DIR}/swapped/rank_0.safetensors ${WORK_DIR}/swapped/tmp.safetensors)
file(RENAME ${WORK_DIR}/swapped/rank_1.safetensors ${WORK_DIR}/swapped/rank_0.safetensors)
file(RENAME ${WORK_DIR}/swapped/tmp.safetensors ${WORK_DIR}/swapped/rank_1.safetensors)
refused("rank_0.safetensors: is rank 1's file, in rank 0's place" verify ${WORK_DIR}/swapped)
execute_process(COMMAND ${TOOL} launch -n 2 -- ${WORKER} load ${WORK_DIR}/swapped distributed dim RESULT_VARIABLE result
                OUTPUT_QUIET ERROR_QUIET)
if(result EQUAL 0)
  message(FATAL_ERROR "a 2-rank load accepted rank files in each other's place")
endif()
file(COPY ${WORK_DIR}/d1/ DESTINATION ${WORK_DIR}/reversed)
file(READ ${WORK_DIR}/reversed/metadata.json metadata)
string(JSON rank0 GET "${metadata}" ranks 0)
string(JSON rank1 GET "${metadata}" ranks 1)
string(JSON metadata SET "${metadata}" ranks 0 "${rank1}")
string(JSON metadata SET "${metadata}" ranks 1 "${rank0}")
file(WRITE ${WORK_DIR}/reversed/metadata.json "${metadata}")
refused("written for another layout than metadata.json gives rank 0" verify ${WORK_DIR}/reversed)

file(REMOVE ${WORK_DIR}/d1/rank_1.safetensors)
execute_process(COMMAND ${TOOL} verify ${WORK_DIR}/d1 ERROR_VARIABLE err RESULT_VARIABLE result)
if(result EQUAL 0 OR NOT err MATCHES "rank_1.safetensors: missing \\(rank 1 of 2\\)")
  message(FATAL_ERROR "verify accepted a checkpoint without rank 1's file (${result}):\n${err}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})

# A grid's save planned from its rules: `cairn plan` with the run's layouts as rules (what
# cairn-train layout prints), the saving layout and another grid; a rank file gone is named.
run(${TOOL} launch -n 4 -- ${WORKER} save ${WORK_DIR}/grid distributed tp2pp2dp1z1)
file(READ ${WORK_DIR}/grid/metadata.json metadata)
string(JSON rules GET "${metadata}" rules)
string(JSON names GET "${metadata}" shard_names)
file(WRITE ${WORK_DIR}/same.json "{\"shard_names\": ${names}, \"rules\": ${rules}}")
string(JSON other SET "${rules}" tensor 1)
string(JSON other SET "${other}" data 2)
file(WRITE ${WORK_DIR}/other.json "{\"shard_names\": ${names}, \"rules\": ${other}}")
execute_process(COMMAND ${TOOL} plan --checkpoint ${WORK_DIR}/grid --layout ${WORK_DIR}/same.json
                OUTPUT_VARIABLE out RESULT_VARIABLE result)
if(NOT result EQUAL 0 OR NOT out MATCHES "layout: the saving one" OR NOT out MATCHES "rank 3 reads")
  message(FATAL_ERROR "plan of a grid's save with its own rules (${result}):\n${out}")
endif()
execute_process(COMMAND ${TOOL} plan --checkpoint ${WORK_DIR}/grid --layout ${WORK_DIR}/other.json
                OUTPUT_VARIABLE out RESULT_VARIABLE result)
if(NOT result EQUAL 0 OR NOT out MATCHES "layout: resharded")
  message(FATAL_ERROR "plan of a grid's save into another grid (${result}):\n${out}")
endif()
file(REMOVE ${WORK_DIR}/grid/rank_3.safetensors)
refused("rank_3.safetensors: missing" plan --checkpoint ${WORK_DIR}/grid --layout ${WORK_DIR}/same.json)
refused("rank_3.safetensors: missing" verify ${WORK_DIR}/grid)
