# Provenance and relocation (issue 13): `moesim --version`, the generator of
# its commit (cmake/build_info.cmake), the run-time data lookup of
# sim/core/paths.h (no path compiled in), $MOESIM_WORKLOAD_DIR, and an install that
# still works once the sources and the build it came from are gone.
set(INST_DIR ${CMAKE_CURRENT_BINARY_DIR}/paths-test)
set(INST_FAIL ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_fail.sh)

add_test(NAME version.cli COMMAND ${CMAKE_COMMAND} -DMOESIM=$<TARGET_FILE:moesim> -DVERSION=${PROJECT_VERSION}
         -DSRC=${PROJECT_SOURCE_DIR} -DGIT=${GIT_EXECUTABLE} -P ${CMAKE_CURRENT_SOURCE_DIR}/install/version_test.cmake)
if(GIT_EXECUTABLE)
  add_test(NAME version.build_info COMMAND ${CMAKE_COMMAND} -DGIT=${GIT_EXECUTABLE}
           -DSCRIPT=${PROJECT_SOURCE_DIR}/cmake/build_info.cmake -P ${CMAKE_CURRENT_SOURCE_DIR}/install/build_info_test.cmake)
endif()
add_test(NAME version.extra_arg COMMAND ${INST_FAIL} 2 "^moesim: version: unexpected argument 'x'$"
         $<TARGET_FILE:moesim> version x)

# A copy of the binary in a folder with no share/ beside or above it; data/
# holds profiles/ only.  No test here may see a MOESIM_* variable of the caller.
add_test(NAME paths.setup COMMAND sh -c "rm -rf ${INST_DIR} && mkdir -p ${INST_DIR}/bin ${INST_DIR}/data && cp $<TARGET_FILE:moesim> ${INST_DIR}/bin/ && ln -s ${PROJECT_SOURCE_DIR}/sim/profiles ${INST_DIR}/data/profiles && $<TARGET_FILE:moesim> trace gen --model mixtral-8x7b -o ${INST_DIR}/t.h5 --seed 2 --requests 2")
set_tests_properties(paths.setup PROPERTIES FIXTURES_SETUP paths_copy)
set(INST_RUN run --trace ${INST_DIR}/t.h5 --model mixtral-8x7b --platform rtx3090-pcie4 --prefetch none --cache lru
    --sched gpu --cache-experts 64 --json)
# paths_env(TEST [VAR=OP:VALUE ...]): the test's environment, MOESIM_DATA_DIR and
# MOESIM_PROFILE_DIR unset unless given
function(paths_env test)
  set(mods MOESIM_DATA_DIR=unset: MOESIM_PROFILE_DIR=unset: ${ARGN})
  set_tests_properties(${test} PROPERTIES FIXTURES_REQUIRED paths_copy ENVIRONMENT_MODIFICATION "${mods}")
endfunction()
add_test(NAME paths.not_found COMMAND ${INST_FAIL} 1
  "^moesim: cannot find moesim's data directory: MOESIM_DATA_DIR is not set, and neither .*/paths-test/bin/share/moesim \\(build tree\\) nor .*/paths-test/share/moesim \\(install\\) is a directory$"
  ${INST_DIR}/bin/moesim ${INST_RUN})
paths_env(paths.not_found)
add_test(NAME paths.data_dir_env COMMAND ${INST_DIR}/bin/moesim ${INST_RUN})
paths_env(paths.data_dir_env MOESIM_DATA_DIR=set:${PROJECT_BINARY_DIR}/share/moesim)
set_tests_properties(paths.data_dir_env PROPERTIES PASS_REGULAR_EXPRESSION "\"hits\":\t[1-9][0-9]*,")
add_test(NAME paths.data_dir_missing COMMAND ${INST_FAIL} 1
  "^moesim: MOESIM_DATA_DIR=.*/paths-test/nothing is not a directory \\(it must hold moesim's profiles/, plots/ and tools/\\)$"
  ${INST_DIR}/bin/moesim ${INST_RUN})
paths_env(paths.data_dir_missing MOESIM_DATA_DIR=set:${INST_DIR}/nothing)
# $MOESIM_PROFILE_DIR alone is enough for profiles (no data directory needed)
add_test(NAME paths.profile_dir_env COMMAND ${INST_DIR}/bin/moesim ${INST_RUN})
paths_env(paths.profile_dir_env MOESIM_PROFILE_DIR=set:${PROJECT_SOURCE_DIR}/sim/profiles)
set_tests_properties(paths.profile_dir_env PROPERTIES PASS_REGULAR_EXPRESSION "\"hits\":\t[1-9][0-9]*,")
add_test(NAME paths.no_plots COMMAND ${INST_FAIL} 1 "moesim's data directory .*/paths-test/data \\(MOESIM_DATA_DIR\\) has no plots/ folder$"
  ${INST_DIR}/bin/moesim figures --trace ${INST_DIR}/t.h5 --model mixtral-8x7b --out ${INST_DIR}/figs --only entropy-layer)
paths_env(paths.no_plots MOESIM_DATA_DIR=set:${INST_DIR}/data)

# `trace workload --azure code|conv` reads $MOESIM_WORKLOAD_DIR/azure-llm-2023/
add_test(NAME paths.workload_unset COMMAND ${INST_FAIL} 1
  "^moesim: --azure code names the shared Azure 2023 trace \\(or give the CSV's path\\): MOESIM_WORKLOAD_DIR is not set \\(the shared workloads folder, holding azure-llm-2023/\\)$"
  $<TARGET_FILE:moesim> trace workload ${INST_DIR}/t.h5 --azure code -o ${INST_DIR}/wl.h5)
set_tests_properties(paths.workload_unset PROPERTIES FIXTURES_REQUIRED paths_copy
  ENVIRONMENT_MODIFICATION "MOESIM_WORKLOAD_DIR=unset:")
if(EXISTS "${MOESIM_SHARED_DIR}/workloads/azure-llm-2023/AzureLLMInferenceTrace_conv.csv")
  add_test(NAME paths.workload_shared COMMAND $<TARGET_FILE:moesim> trace workload ${INST_DIR}/t.h5 --azure conv
           --start 3 -o ${INST_DIR}/wl.h5)
  set_tests_properties(paths.workload_shared PROPERTIES FIXTURES_REQUIRED paths_copy
    ENVIRONMENT "MOESIM_WORKLOAD_DIR=${MOESIM_SHARED_DIR}/workloads"
    PASS_REGULAR_EXPRESSION "^workload AzureLLMInferenceTrace_conv\\.csv rows 3\\.\\.4, time x1: 2 requests over [0-9.e-]+ s")
endif()

# The install, configured and built afresh from a copy of the sources (the
# moesim target only, ~20-40 s on 2 cores), both deleted before the installed
# binary runs (tests/install/install_test.sh).  Normal builds only: under
# MOESIM_SANITIZE it would build and test the same uninstrumented binary again.
if(NOT MOESIM_SANITIZE)
  add_test(NAME install.relocated COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/install/install_test.sh ${PROJECT_SOURCE_DIR}
           $<TARGET_FILE:moesim> ${PROJECT_VERSION} ${CMAKE_GENERATOR} ${CMAKE_C_COMPILER} "${CMAKE_BUILD_TYPE}")
  set_tests_properties(install.relocated PROPERTIES TIMEOUT 900 LABELS install
    ENVIRONMENT_MODIFICATION "MOESIM_DATA_DIR=unset:;MOESIM_PROFILE_DIR=unset:")
endif()
