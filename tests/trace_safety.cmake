# Data safety of trace files (issue 13, "Never destroy data"): format v2's
# checksums under bit flips of a real imported trace, and the writers' output
# checks, temporaries, signal clean-up, full disks and size guards
# (tests/trace_safety/*.sh, one ctest per case; cases that need root for a
# tmpfs or a device node exit 77 = skipped otherwise).
set(TS_OUT "${CMAKE_CURRENT_BINARY_DIR}/trace_safety")
file(MAKE_DIRECTORY "${TS_OUT}")
set(TS_QWEN "${MOESIM_SHARED_DIR}/traces/bigmoeonedge/qwen.route.csv")

# ---- bit flips ----
# The real Qwen3 route-csv trace imported as v2 (233 KB), one bit flipped at
# each of 1000 seeded offsets: every flipped copy must fail `moesim run` with
# one line or give byte-identical metrics (tests/trace_safety/bitflip.c).
# About 45 s in a normal build, 90 to 140 s under the sanitizers (on 2 shared
# cores, with the rest of the suite); MOESIM_BITFLIPS changes the count.
# The sanitizer build runs the same harness on a quarter of the flips (the
# acceptance figure is the normal build's 1000; ASan makes each run ~3x slower).
if(MOESIM_SANITIZE)
  set(MOESIM_BITFLIPS_DEFAULT 250)
else()
  set(MOESIM_BITFLIPS_DEFAULT 1000)
endif()
set(MOESIM_BITFLIPS ${MOESIM_BITFLIPS_DEFAULT} CACHE STRING "bit flips of trace_safety.bitflip_qwen")
add_executable(trace_bitflip ${CMAKE_CURRENT_LIST_DIR}/trace_safety/bitflip.c)
target_link_libraries(trace_bitflip PRIVATE moesim_core)
add_test(NAME trace_safety.bitflip_qwen COMMAND sh -c
  "rm -rf '${TS_OUT}/bitflip' && mkdir -p '${TS_OUT}/bitflip' && \
   $<TARGET_FILE:moesim> trace import --format route-csv '${TS_QWEN}' '${TS_OUT}/bitflip/qwen.h5' > /dev/null && \
   $<TARGET_FILE:trace_bitflip> $<TARGET_FILE:moesim> '${TS_OUT}/bitflip/qwen.h5' '${TS_OUT}/bitflip' ${MOESIM_BITFLIPS} 13 30 \
     --cache-experts 320 --prefetch none --cache lru")
# Under the sanitizers, leaks allocated inside libhdf5 on its error paths
# for a damaged file are HDF5's (tests/fuzz/lsan.supp); moesim's own
# allocations stay checked.
set_tests_properties(trace_safety.bitflip_qwen PROPERTIES TIMEOUT 1200
  PASS_REGULAR_EXPRESSION "${MOESIM_BITFLIPS} flips of .*, 0 bad "
  ENVIRONMENT "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_LIST_DIR}/fuzz/lsan.supp:print_suppressions=0")

# ---- outputs of the trace commands (tests/trace_safety/cli.sh) ----
foreach(case out_is_input out_device out_folder sigterm disk_full estimate)
  add_test(NAME trace_safety.cli.${case} COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/trace_safety/cli.sh ${case}
    $<TARGET_FILE:moesim> "${TS_OUT}/${case}" "${TS_QWEN}" "${CMAKE_CURRENT_SOURCE_DIR}/data/routecsv/small.csv")
  set_tests_properties(trace_safety.cli.${case} PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77
    PASS_REGULAR_EXPRESSION "${case}: all checks passed")
endforeach()
