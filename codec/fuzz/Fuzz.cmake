# The snapshot decoder's fuzz target.
#  * Always: codec_fuzz_replay, the target with a replay driver, runs every seed
#    and its truncations with the build's own compiler (and sanitizers).
#  * TALLY_CODEC_FUZZ=ON (default) and a clang++ on the machine: the libFuzzer
#    binary, built with clang as an external project whatever the main compiler,
#    and a 20,000-run smoke in CTest.
option(TALLY_CODEC_FUZZ "Build the codec's libFuzzer target with clang and smoke-run it in CTest" ON)

add_executable(codec_fuzz_replay ${CMAKE_CURRENT_LIST_DIR}/snapshot_fuzzer.cpp ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp)
target_link_libraries(codec_fuzz_replay PRIVATE tally_codec tally_model tally_options)
target_compile_definitions(codec_fuzz_replay PRIVATE TALLY_FUZZ_REPORT)
set_target_properties(codec_fuzz_replay PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
add_test(NAME codec_fuzz_replay COMMAND codec_fuzz_replay ${CMAKE_CURRENT_LIST_DIR}/corpus)
set_tests_properties(codec_fuzz_replay PROPERTIES LABELS codec TIMEOUT 300)
# The ledger ConfigMap decoder's target (--ledger-configmap), replayed the same way.
add_executable(codec_ledger_fuzz_replay ${CMAKE_CURRENT_LIST_DIR}/ledger_configmap_fuzzer.cpp
               ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp)
target_link_libraries(codec_ledger_fuzz_replay PRIVATE tally_codec tally_model tally_options)
set_target_properties(codec_ledger_fuzz_replay PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
add_test(NAME codec_ledger_fuzz_replay COMMAND codec_ledger_fuzz_replay ${CMAKE_CURRENT_LIST_DIR}/ledger-corpus)
set_tests_properties(codec_ledger_fuzz_replay PROPERTIES LABELS codec TIMEOUT 300)

if(TALLY_CODEC_FUZZ AND NOT TALLY_SANITIZE AND NOT TALLY_COVERAGE)
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
                 # Line tables only: a sanitizer's report still names file and line.
                 "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG"
                 -DTALLY_SOURCE_DIR=${CMAKE_CURRENT_LIST_DIR}/../.. -DTALLY_FUZZ_REPORT=ON
                 # The main build's ccache (if any) for the clang build too.
                 -DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}
      BUILD_ALWAYS ON
      INSTALL_COMMAND ""
      USES_TERMINAL_BUILD ON)
    set(TALLY_FUZZ_SEEDS ${CMAKE_CURRENT_LIST_DIR}/corpus)
    set(TALLY_FUZZ_WORK ${CMAKE_BINARY_DIR}/codec-fuzz-corpus)
    add_test(NAME codec_snapshot_fuzz_smoke
      COMMAND sh -c "mkdir -p '${TALLY_FUZZ_WORK}' && exec '${TALLY_FUZZ_BINARY_DIR}/codec_snapshot_fuzzer' -runs=20000 -max_len=16384 -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 '${TALLY_FUZZ_WORK}' '${TALLY_FUZZ_SEEDS}'")
    set_tests_properties(codec_snapshot_fuzz_smoke PROPERTIES LABELS codec TIMEOUT 600)
    set(TALLY_LEDGER_FUZZ_WORK ${CMAKE_BINARY_DIR}/codec-ledger-fuzz-corpus)
    add_test(NAME codec_ledger_fuzz_smoke
      COMMAND sh -c "mkdir -p '${TALLY_LEDGER_FUZZ_WORK}' && exec '${TALLY_FUZZ_BINARY_DIR}/codec_ledger_configmap_fuzzer' -seed=1 -runs=20000 -max_total_time=120 -max_len=8192 -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 '${TALLY_LEDGER_FUZZ_WORK}' '${CMAKE_CURRENT_LIST_DIR}/ledger-corpus'")
    set_tests_properties(codec_ledger_fuzz_smoke PROPERTIES LABELS codec TIMEOUT 600)
    # The doors' other parsers (codec/fuzz/CMakeLists.txt): AdmissionReviews and
    # the objects the webhooks read in them, the extender's verbs, the usage
    # checkpoints, the informers' JSON and protobuf watches and LISTs, the
    # kubeconfig, Alertmanager's answer; the protobuf decoders on the shipped
    # wire reader against CodedInputStream. libFuzzer under ASan+UBSan, each
    # bounded here; `make fuzz` runs them longer.
    set(TALLY_DOOR_FUZZ_SECONDS 30 CACHE STRING "Seconds each door parser fuzzer runs in the test command")
    foreach(entry "runtime_admission_review_fuzzer|${CMAKE_CURRENT_LIST_DIR}/../../runtime/admission/fuzz/corpus|65536"
                  "extender_wire_fuzzer|${CMAKE_CURRENT_LIST_DIR}/../../extender/fuzz/corpus|65536"
                  "codec_usage_configmap_fuzzer|${CMAKE_CURRENT_LIST_DIR}/usage-corpus|16384"
                  "state_json_watch_fuzzer|${CMAKE_CURRENT_LIST_DIR}/watch-json-corpus|65536"
                  "state_protobuf_watch_fuzzer|${CMAKE_CURRENT_LIST_DIR}/watch-protobuf-corpus|65536"
                  "codec_admission_objects_fuzzer|${CMAKE_CURRENT_LIST_DIR}/admission-objects-corpus|65536"
                  "runtime_kubeconfig_fuzzer|${CMAKE_CURRENT_LIST_DIR}/../../runtime/fuzz/kubeconfig-corpus|16384"
                  "controller_alertmanager_fuzzer|${CMAKE_CURRENT_LIST_DIR}/alertmanager-corpus|65536"
                  "codec_protobuf_readers_fuzzer|${CMAKE_CURRENT_LIST_DIR}/watch-protobuf-corpus|65536")
      string(REPLACE "|" ";" parts "${entry}")
      list(GET parts 0 fuzzer)
      list(GET parts 1 seeds)
      list(GET parts 2 maxlen)
      set(work ${CMAKE_BINARY_DIR}/${fuzzer}-corpus)
      add_test(NAME ${fuzzer}_smoke
        COMMAND sh -c "mkdir -p '${work}' && exec '${TALLY_FUZZ_BINARY_DIR}/${fuzzer}' -seed=1 -max_total_time=${TALLY_DOOR_FUZZ_SECONDS} -max_len=${maxlen} -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 '${work}' '${seeds}'")
      set_tests_properties(${fuzzer}_smoke PROPERTIES LABELS codec TIMEOUT 600)
    endforeach()
  else()
    # Not a silent skip: the test command would pass without its fuzzers.
    message(FATAL_ERROR "codec fuzzers: no clang++ found (make deps installs clang; -DTALLY_CODEC_FUZZ=OFF builds "
                        "without them on purpose)")
  endif()
endif()
