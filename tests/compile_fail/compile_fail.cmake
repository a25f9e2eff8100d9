# Misuse that must not compile. Each source compiles cleanly without CAIRN_EXPECT_FAILURE
# (so the test fails for the right reason only), and must fail with it, printing the
# expected diagnostic.
function(cairn_compile_fail_test name source expected)
  add_executable(${name}_ok ${source})
  target_link_libraries(${name}_ok PRIVATE cairn::core cairn_warnings)
  add_executable(${name} EXCLUDE_FROM_ALL ${source})
  target_link_libraries(${name} PRIVATE cairn::core cairn_warnings)
  target_compile_definitions(${name} PRIVATE CAIRN_EXPECT_FAILURE)
  add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target ${name})
  set_tests_properties(${name} PROPERTIES LABELS compile-fail PASS_REGULAR_EXPRESSION "${expected}")
endfunction()

cairn_compile_fail_test(compile_fail_update_missing_field ${CMAKE_CURRENT_LIST_DIR}/update_missing_field.cpp
                        "is not a member of|no member named")
cairn_compile_fail_test(compile_fail_check_wrong_type ${CMAKE_CURRENT_LIST_DIR}/check_wrong_type.cpp
                        "This check does not apply to the field's type")
cairn_compile_fail_test(compile_fail_mixed_modes ${CMAKE_CURRENT_LIST_DIR}/mixed_modes.cpp
                        "CAIRN_SEPARATE_COMPILATION defined after cairn's headers were included without it")
cairn_compile_fail_test(compile_fail_validate_wrong_signature ${CMAKE_CURRENT_LIST_DIR}/validate_wrong_signature.cpp
                        "a config's validate must be void validate")
add_test(NAME compile_fail_validate_wrong_signature_ok COMMAND compile_fail_validate_wrong_signature_ok)
set_tests_properties(compile_fail_validate_wrong_signature_ok PROPERTIES LABELS unit)
