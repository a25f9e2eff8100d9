# The trainer of docs/own-trainer.md (examples/own), built against cairn installed in a temporary
# prefix as a user's program is, and run as its page says: on 2 ranks, stopped by a signal and
# resumed bitwise; checkpointed on 2 ranks and resumed on 1 with its data cursor; its cursor
# shown by the installed `cairn inspect`. Arguments: SOURCE_DIR, BUILD_DIR, WORK_DIR, GENERATOR,
# CXX.
cmake_policy(VERSION 3.22)
include(${CMAKE_CURRENT_LIST_DIR}/run_command.cmake)

# The page shows the example verbatim.
file(READ ${SOURCE_DIR}/docs/own-trainer.md page)
file(READ ${SOURCE_DIR}/examples/own/own_trainer.hpp header)
string(FIND "${page}" "\n```cpp\n" start)
math(EXPR start "${start} + 8")
string(SUBSTRING "${page}" ${start} -1 page)
string(FIND "${page}" "\n```" end)
math(EXPR end "${end} + 1")
string(SUBSTRING "${page}" 0 ${end} block)
string(FIND "${header}" "${block}" shown)
if(shown EQUAL -1)
  message(FATAL_ERROR "docs/own-trainer.md does not show examples/own/own_trainer.hpp as it is")
endif()

file(REMOVE_RECURSE ${WORK_DIR})
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/own -B ${WORK_DIR}/build -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX}
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
set(tool ${WORK_DIR}/prefix/bin/cairn)
set(trainer ${WORK_DIR}/build/own-trainer)

# The losses a run printed, "iteration N loss X" each.
function(losses_of text out)
  string(REGEX MATCHALL "iteration [0-9]+ loss [-+0-9.e]+" found "${text}")
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

# Uninterrupted, on 2 ranks.
run(${tool} launch -n 2 -- ${trainer} run.experiment_dir=${WORK_DIR}/reference training.train_iters=12
    training.checkpoint.interval=4)
losses_of("${output}" reference)
list(LENGTH reference count)
if(NOT count EQUAL 12)
  message(FATAL_ERROR "the reference run did not print 12 losses:\n${output}")
endif()

# SIGTERM on rank 0 after iteration 6 (off the schedule): both ranks stop after its checkpoint,
# exit status 75, the signal named; resumed, iterations 7 to 12 give the reference's losses bit
# for bit (printed with 17 digits).
execute_process(COMMAND ${CMAKE_COMMAND} -E env CAIRN_TEST_SIGNAL=TERM@6:0 ${tool} launch -n 2 -- ${trainer}
                        run.experiment_dir=${WORK_DIR}/signalled training.train_iters=12 training.checkpoint.interval=4
                RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
string(FIND "${output}" "stopped by SIGTERM after iteration 6, its checkpoint saved" named)
if(NOT result EQUAL 75 OR named EQUAL -1 OR NOT EXISTS ${WORK_DIR}/signalled/checkpoints/6/complete.json)
  message(FATAL_ERROR "a SIGTERM after iteration 6: status ${result} (want 75), the signal named, checkpoint 6:\n"
                      "${output}")
endif()
run(${tool} launch -n 2 -- ${trainer} run.experiment_dir=${WORK_DIR}/signalled training.train_iters=12
    training.checkpoint.interval=4)
losses_of("${output}" resumed)
list(SUBLIST reference 6 6 expected)
if(NOT resumed STREQUAL expected)
  message(FATAL_ERROR "resumed after the signal, the losses differ from the uninterrupted run's:\n"
                      "resumed:   ${resumed}\nreference: ${expected}")
endif()

# Checkpointed on 2 ranks at 8, resumed on 1: the cursor (64 samples read) comes from the saved
# ranks' items, and iteration 9 reads the samples the 2-rank run read (its loss the same to
# rounding; a cursor of 0 would read others).
run(${tool} launch -n 2 -- ${trainer} run.experiment_dir=${WORK_DIR}/shrunk training.train_iters=8
    training.checkpoint.interval=4)
run(${tool} inspect ${WORK_DIR}/shrunk/checkpoints/8)
string(FIND "${output}" "item cursor = 64" shown)
if(shown EQUAL -1)
  message(FATAL_ERROR "cairn inspect does not show the cursor item as 64:\n${output}")
endif()
run(${trainer} run.experiment_dir=${WORK_DIR}/shrunk training.train_iters=12 training.checkpoint.interval=4)
string(FIND "${output}" "cursor from rank 0 of the checkpoint\ncursor 64\n" restored)
losses_of("${output}" one_rank)
list(GET one_rank 0 first)
list(GET reference 8 expected)
string(SUBSTRING "${first}" 0 24 first)
string(SUBSTRING "${expected}" 0 24 expected)
if(restored EQUAL -1 OR NOT first STREQUAL expected)
  message(FATAL_ERROR "resumed on 1 rank: the cursor not restored, or iteration 9 not the 2-rank run's "
                      "('${first}' against '${expected}'):\n${output}")
endif()
