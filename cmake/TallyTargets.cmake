# Shared build settings: warnings as errors, sanitizers, coverage, and one way
# to register a GoogleTest binary with CTest under its library's label.
find_package(GTest REQUIRED)
find_package(Threads REQUIRED)

add_library(tally_options INTERFACE)
target_compile_options(tally_options INTERFACE
  -Wall -Wextra -Wpedantic -Werror -Wshadow -Wnon-virtual-dtor -Wno-missing-field-initializers)
if(TALLY_SANITIZE)
  target_compile_options(tally_options INTERFACE -fsanitize=${TALLY_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  if(TALLY_SANITIZE MATCHES "thread")
    # GCC warns that TSan does not instrument atomic_thread_fence (Boost.Asio
    # uses it); with -Werror that would stop every Asio user from building.
    target_compile_options(tally_options INTERFACE -Wno-tsan)
  endif()
  target_link_options(tally_options INTERFACE -fsanitize=${TALLY_SANITIZE})
endif()
if(TALLY_COVERAGE)
  target_compile_options(tally_options INTERFACE --coverage -O0)
  target_link_options(tally_options INTERFACE --coverage)
endif()

# tally_add_test(NAME LABEL <labels> SOURCES ... LIBS ... [TIMEOUT s])
# LABEL becomes the test's CTest labels as given (a ;-list, e.g.
# "runtime;concurrent"); TIMEOUT defaults to 300 s. The first label names the
# library or part: common, model, codec, runtime, observability, state,
# extender, controller, cli or differential. Add `concurrent` for the tests
# TSan runs (make test-sanitizers) and `e2e` for those that start a control
# plane. Tests registered with add_test directly also carry manifests, image,
# bench-smoke or ci.
function(tally_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "LABEL;SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} tally_options GTest::gtest GTest::gtest_main Threads::Threads)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME ${name} COMMAND ${name} --gtest_brief=1)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABEL}" TIMEOUT ${T_TIMEOUT})
endfunction()
