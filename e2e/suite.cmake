# Tally's e2e scenarios (a)-(i) of the scheduler extender (i: with the device binder) against a real
# kube-apiserver + kube-scheduler + kwok; included from e2e/CMakeLists.txt.
# One CTest entry per scenario; each starts its own local control plane under
# a unique name, starts tally-extender from this build tree and tears both
# down (see e2e/suite/README.md). Registered only when the tally-extender
# target exists. Exit code 77 (a scenario that cannot run against an external
# cluster given by TALLY_E2E_KUBECONFIG) is reported as skipped.
if(TARGET tally-extender AND TARGET tally-controller)
  foreach(scenario a_modes b_held c_launcher d_fake_launcher e_reservation f_gate g_overcapacity h_race i_binder)
    add_test(NAME e2e_suite_${scenario}
      COMMAND ${CMAKE_CURRENT_LIST_DIR}/suite/run.sh ${scenario})
    set_tests_properties(e2e_suite_${scenario} PROPERTIES
      LABELS e2e
      TIMEOUT 900
      FIXTURES_REQUIRED tally_cluster_binaries
      PROCESSORS 2
      SKIP_RETURN_CODE 77
      ENVIRONMENT "TALLY_EXTENDER_BIN=$<TARGET_FILE:tally-extender>;TALLY_CONTROLLER_BIN=$<TARGET_FILE:tally-controller>;TALLY_E2E_LOG_DIR=${CMAKE_BINARY_DIR}/e2e-logs")
  endforeach()
endif()
