# The snapshot decoder's libFuzzer target, built with clang (libFuzzer needs it)
# as an external project, and a short smoke run registered with CTest.
option(TALLY_FUZZ "Build the codec fuzzers with clang and smoke-run them in CTest" ON)

if(TALLY_FUZZ AND NOT TALLY_SANITIZE AND NOT TALLY_COVERAGE)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    set(TALLY_FUZZ_CXX ${CMAKE_CXX_COMPILER})
  else()
    find_program(TALLY_FUZZ_CXX NAMES clang++-14 clang++)
  endif()
  if(TALLY_FUZZ_CXX)
    include(ExternalProject)
    set(TALLY_FUZZ_BINARY_DIR ${CMAKE_BINARY_DIR}/codec-fuzz)
    ExternalProject_Add(codec_fuzzers
      SOURCE_DIR ${CMAKE_CURRENT_LIST_DIR}
      BINARY_DIR ${TALLY_FUZZ_BINARY_DIR}
      CMAKE_ARGS -DCMAKE_CXX_COMPILER=${TALLY_FUZZ_CXX} -DCMAKE_BUILD_TYPE=RelWithDebInfo
                 -DTALLY_SOURCE_DIR=${CMAKE_CURRENT_LIST_DIR}/../.. -DTALLY_FUZZ_REPORT=ON
      BUILD_ALWAYS ON
      INSTALL_COMMAND ""
      USES_TERMINAL_BUILD ON)
    set(TALLY_FUZZ_SEEDS ${CMAKE_CURRENT_LIST_DIR}/corpus)
    set(TALLY_FUZZ_WORK ${CMAKE_BINARY_DIR}/codec-fuzz-corpus)
    add_test(NAME codec_snapshot_fuzz_smoke
      COMMAND sh -c "mkdir -p '${TALLY_FUZZ_WORK}' && exec '${TALLY_FUZZ_BINARY_DIR}/codec_snapshot_fuzzer' -runs=20000 -max_len=16384 -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 '${TALLY_FUZZ_WORK}' '${TALLY_FUZZ_SEEDS}'")
    set_tests_properties(codec_snapshot_fuzz_smoke PROPERTIES LABELS model TIMEOUT 600)
  else()
    message(STATUS "codec fuzzers: no clang++ found, not built")
  endif()
endif()
