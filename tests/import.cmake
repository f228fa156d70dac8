# CLI tests of `moesim trace import`: the two real BigMoeOnEdge traces are
# imported into the build dir and then validated; bad inputs must fail with
# exit code 1 (2 for usage errors), a one-line message, and no output file.

set(IMPORT_REAL_DIR "${MOESIM_SHARED_DIR}/traces/bigmoeonedge")
set(IMPORT_FIXTURES "${CMAKE_CURRENT_SOURCE_DIR}/data/routecsv")
set(IMPORT_OUT "${CMAKE_CURRENT_BINARY_DIR}/import")
file(MAKE_DIRECTORY "${IMPORT_OUT}")

# Runs EXE with ARGS ('|'-separated), checks the exit code, that the
# combined stdout+stderr contains EXPECT (when given) and, with ABSENT, that
# the file ABSENT does not exist afterwards (it is removed before the run).
set(IMPORT_EXPECT_SCRIPT "${CMAKE_CURRENT_BINARY_DIR}/import_expect.cmake")
file(WRITE "${IMPORT_EXPECT_SCRIPT}" [=[
string(REPLACE "|" ";" args "${ARGS}")
if(ABSENT)
  file(REMOVE "${ABSENT}")
endif()
execute_process(COMMAND "${EXE}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc STREQUAL "${RC}")
  message(FATAL_ERROR "exit code ${rc}, expected ${RC}")
endif()
if(DEFINED EXPECT)
  string(FIND "${out}${err}" "${EXPECT}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "output lacks: ${EXPECT}")
  endif()
endif()
if(ABSENT AND EXISTS "${ABSENT}")
  message(FATAL_ERROR "${ABSENT} exists after a failed import")
endif()
]=])

function(import_cli_test name rc expect args)
  set(extra "")
  if(ARGN)
    set(extra "-DABSENT=${ARGN}")
  endif()
  add_test(NAME cli.import.${name}
    COMMAND ${CMAKE_COMMAND} "-DEXE=$<TARGET_FILE:moesim>" "-DARGS=${args}" "-DRC=${rc}"
            "-DEXPECT=${expect}" ${extra} -P "${IMPORT_EXPECT_SCRIPT}")
endfunction()

# Real traces: missing-cell counts cross-checked with awk (see
# tests/unit/test_import_routecsv.c); the percentages are of prefill cells
# (qwen 162 / (28*48*6), gptoss 168 / (85*36*2)).
import_cli_test(qwen 0
  "162 missing cells (2.0 % of prefill cells), first: step 0 layer 47 slot 0"
  "trace|import|--format|route-csv|${IMPORT_REAL_DIR}/qwen.route.csv|${IMPORT_OUT}/qwen.h5")
import_cli_test(gptoss 0
  "168 missing cells (2.7 % of prefill cells), first: step 0 layer 35 slot 0"
  "trace|import|--format=route-csv|${IMPORT_REAL_DIR}/gptoss.route.csv|${IMPORT_OUT}/gptoss.h5")
import_cli_test(small 0
  "2 requests, 2 prefill iterations (4 token rows) + 3 decode iterations, 23 CSV rows; 5 missing cells"
  "trace|import|--format|route-csv|${IMPORT_FIXTURES}/small.csv|${IMPORT_OUT}/small.h5")
set_tests_properties(cli.import.qwen PROPERTIES FIXTURES_SETUP import_qwen)
set_tests_properties(cli.import.gptoss PROPERTIES FIXTURES_SETUP import_gptoss)
set_tests_properties(cli.import.small PROPERTIES FIXTURES_SETUP import_small)

foreach(t qwen gptoss small)
  add_test(NAME cli.import.validate_${t} COMMAND moesim trace validate "${IMPORT_OUT}/${t}.h5")
  set_tests_properties(cli.import.validate_${t} PROPERTIES FIXTURES_REQUIRED import_${t})
endforeach()

# Bad inputs: exit 1, the message names file, line and field, no output left.
import_cli_test(bad_layer 1 "bad_layer.csv:6: field layer: value 2 out of range [0, 1] (n_layer=2)"
  "trace|import|--format|route-csv|${IMPORT_FIXTURES}/bad_layer.csv|${IMPORT_OUT}/bad_layer.h5"
  "${IMPORT_OUT}/bad_layer.h5")
import_cli_test(truncated 1 "truncated.csv:8: expected 9 fields"
  "trace|import|--format|route-csv|${IMPORT_FIXTURES}/truncated.csv|${IMPORT_OUT}/truncated.h5"
  "${IMPORT_OUT}/truncated.h5")
import_cli_test(bad_magic 1 "bad_magic.csv:1: header: expected '# route_trace v1'"
  "trace|import|--format|route-csv|${IMPORT_FIXTURES}/bad_magic.csv|${IMPORT_OUT}/bad_magic.h5"
  "${IMPORT_OUT}/bad_magic.h5")
import_cli_test(dup_cell 1 "dup_cell.csv:7: field slot: duplicate cell step 0 layer 0 slot 0 (first on line 6)"
  "trace|import|--format|route-csv|${IMPORT_FIXTURES}/dup_cell.csv|${IMPORT_OUT}/dup_cell.h5"
  "${IMPORT_OUT}/dup_cell.h5")
import_cli_test(no_input 1 "no/such.csv: cannot open"
  "trace|import|--format|route-csv|no/such.csv|${IMPORT_OUT}/no_input.h5" "${IMPORT_OUT}/no_input.h5")
# Usage errors: exit 2.
import_cli_test(unknown_format 2 "unknown format 'json' (known formats: route-csv, jsonl, dense-csv, npy)"
  "trace|import|--format|json|${IMPORT_FIXTURES}/small.csv|${IMPORT_OUT}/x.h5")
import_cli_test(no_format 2 "--format is required (route-csv, jsonl, dense-csv, npy)"
  "trace|import|${IMPORT_FIXTURES}/small.csv|${IMPORT_OUT}/x.h5")
import_cli_test(missing_out 2 "missing OUT.h5"
  "trace|import|--format|route-csv|${IMPORT_FIXTURES}/small.csv")
import_cli_test(extra_arg 2 "unexpected argument 'extra'"
  "trace|import|--format|route-csv|${IMPORT_FIXTURES}/small.csv|${IMPORT_OUT}/x.h5|extra")
# control bytes of the input (ESC, CR) quoted in a message become '?': the
# error stays one printable line (sim/core/err.c)
add_test(NAME cli.import.control_bytes COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_fail.sh 1
  "control_bytes.csv:1: header: expected '# route_trace v1', got '\\?\\[31mroute\\?trace'"
  $<TARGET_FILE:moesim> trace import --format route-csv ${IMPORT_FIXTURES}/control_bytes.csv ${IMPORT_OUT}/control_bytes.h5)
