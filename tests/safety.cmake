# Data safety (docs/safety.md): outputs never overwrite inputs or
# write through devices, appear whole or not at all, standard output is
# checked, undefined metrics are null / empty / n/a, results carry
# provenance.  One ctest per case of tests/cli/safety.sh.
set(SAFETY_SH ${CMAKE_CURRENT_SOURCE_DIR}/cli/safety.sh)
foreach(case output_is_input device_output dev_full atomic_events signal_cleanup figures_disk_full events_stdout events_disk_full undefined_metrics provenance provenance_v1 provenance_unverified)
  add_test(NAME safety.${case}
           COMMAND sh ${SAFETY_SH} $<TARGET_FILE:moesim> ${CMAKE_CURRENT_BINARY_DIR}/safety/${case} ${case}
                   ${PROJECT_SOURCE_DIR}/sim/profiles/platforms/rtx3090-pcie4.ini
                   ${CMAKE_CURRENT_SOURCE_DIR}/data/regress_synthetic.csv
                   ${MOESIM_SHARED_DIR}/traces/bigmoeonedge/qwen.route.csv
                   ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/trace_templates/zstd.h5
                   "${MOESIM_PYTHON}")
  set_tests_properties(safety.${case} PROPERTIES SKIP_RETURN_CODE 77)
endforeach()
