# The request-parser fuzz target. With clang and -DTALLY_FUZZ=ON it is a
# libFuzzer binary (extender_request_fuzz) with a short smoke run in CTest;
# with any compiler the corpus is replayed (every input and its truncations)
# as the test extender_fuzz_replay. extender/fuzz/run.sh does the clang build.
option(TALLY_FUZZ "Build libFuzzer targets (needs clang)" OFF)
set(TALLY_EXTENDER_FUZZ_DIR ${CMAKE_CURRENT_LIST_DIR})

add_executable(extender_fuzz_replay ${TALLY_EXTENDER_FUZZ_DIR}/request_fuzz.cpp ${TALLY_EXTENDER_FUZZ_DIR}/replay_main.cpp)
target_link_libraries(extender_fuzz_replay PRIVATE tally_extender_testing tally_options)
set_target_properties(extender_fuzz_replay PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
add_test(NAME extender_fuzz_replay COMMAND extender_fuzz_replay ${TALLY_EXTENDER_FUZZ_DIR}/corpus)
set_tests_properties(extender_fuzz_replay PROPERTIES LABELS extender TIMEOUT 120)

if(TALLY_FUZZ AND CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  add_executable(extender_request_fuzz ${TALLY_EXTENDER_FUZZ_DIR}/request_fuzz.cpp)
  target_compile_options(extender_request_fuzz PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(extender_request_fuzz PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(extender_request_fuzz PRIVATE tally_extender_testing)
  add_test(NAME extender_request_fuzz_smoke
           COMMAND extender_request_fuzz -runs=20000 -max_len=65536 ${TALLY_EXTENDER_FUZZ_DIR}/corpus)
  set_tests_properties(extender_request_fuzz_smoke PROPERTIES LABELS extender TIMEOUT 300)
endif()
