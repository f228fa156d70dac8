# CLI tests of `moesim trace gen` (the generator's statistics are checked in
# unit/test_gen.c).  Bad flags: one line on stderr, exit 2 (usage) or 1.
set(GEN_FAIL ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_fail.sh)
set(GEN_DIR ${CMAKE_CURRENT_BINARY_DIR})
set(GEN_EXE $<TARGET_FILE:moesim>)
# small and quick: 4 requests of ~16 prompt and ~8 output tokens
set(GEN_SMALL --model mixtral-8x7b --requests 4 --set prompt_median=16 --set output_median=8)

function(gen_fail name code regex)
  add_test(NAME gen.cli.${name} COMMAND ${GEN_FAIL} ${code} "${regex}" ${GEN_EXE} trace gen ${ARGN})
endfunction()

add_test(NAME gen.cli.help COMMAND moesim trace gen --help)
set_tests_properties(gen.cli.help PROPERTIES PASS_REGULAR_EXPRESSION
  "usage: moesim trace gen --model NAME -o OUT.h5.*gate_alpha +default 1 .*token_affinity +default 0.8 ")

gen_fail(unknown_flag 2 "^moesim: trace gen: unknown option '--bogus'" --model mixtral-8x7b -o x.h5 --bogus)
gen_fail(stray_argument 2 "unknown argument 'extra'" --model mixtral-8x7b -o x.h5 extra)
gen_fail(missing_value 2 "trace gen: --seed needs a value" --model mixtral-8x7b -o x.h5 --seed)
gen_fail(missing_model 2 "trace gen: missing --model NAME" -o x.h5)
gen_fail(missing_output 2 "trace gen: missing -o OUT.h5" --model mixtral-8x7b)
gen_fail(seed_not_number 2 "knob seed='abc' is not a non-negative integer" --model mixtral-8x7b -o x.h5 --seed abc)
gen_fail(seed_negative 2 "knob seed='-1' is not a non-negative integer" --model mixtral-8x7b -o x.h5 --seed -1)
gen_fail(requests_out_of_range 2 "knob requests=2000000000 is out of range" --model mixtral-8x7b -o x.h5 --requests 2000000000)
gen_fail(layer_steps_not_number 2 "knob layer_steps='1e6' is not a non-negative integer" --model mixtral-8x7b -o x.h5 --layer-steps 1e6)
gen_fail(knob_out_of_range 2 "knob gate_alpha=0 is out of range \\[0.01, 1000\\]" --model mixtral-8x7b -o x.h5 --set gate_alpha=0)
gen_fail(drift_out_of_range 2 "knob pref_drift=2 is out of range \\[0, 1\\]" --model mixtral-8x7b -o x.h5 --set pref_drift=2)
gen_fail(knob_not_number 2 "knob layer_corr='high' is not a number" --model mixtral-8x7b -o x.h5 --set layer_corr=high)
gen_fail(unknown_knob 2 "unknown knob 'gate_alfa'" --model mixtral-8x7b -o x.h5 --set gate_alfa=1)
gen_fail(set_without_value 2 "--set 'gate_alpha' is not KNOB=VALUE" --model mixtral-8x7b -o x.h5 --set gate_alpha)
gen_fail(knob_twice 2 "knob seed given twice \\(second time by --set\\)" --model mixtral-8x7b -o x.h5 --seed 1 --set seed=2)
gen_fail(bad_probs 2 "knob probs='dense' is not one of auto, full, topk_renorm, topk_raw" --model mixtral-8x7b -o x.h5 --set probs=dense)
gen_fail(unknown_model 1 "no-such-model" --model no-such-model -o ${GEN_DIR}/gen_never.h5)
gen_fail(knobs_inconsistent 1 "prompt_min = 300 exceeds prompt_max = 200" --model mixtral-8x7b -o ${GEN_DIR}/gen_never.h5 --set prompt_min=300 --set prompt_max=200)
gen_fail(spec_too_deep 1 "spec_depth = 32 must be below the model's 32 MoE layers" --model mixtral-8x7b -o ${GEN_DIR}/gen_never.h5 --set spec_depth=32)
gen_fail(unwritable 1 "no-such-dir/t.h5" ${GEN_SMALL} -o ${GEN_DIR}/no-such-dir/t.h5)

# Success: the summary line, then the same flags and seed give the same bytes,
# another seed different bytes; a layer-step budget alone lifts the request cap.
set(GEN_CHECK ${CMAKE_CURRENT_BINARY_DIR}/gen_check.cmake)
file(WRITE ${GEN_CHECK} [=[
separate_arguments(small UNIX_COMMAND "${SMALL}")
function(gen out seed)
  execute_process(COMMAND ${EXE} trace gen ${small} --seed ${seed} -o ${out} ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "trace gen failed (${rc}): ${stderr}")
  endif()
  set(stdout "${stdout}" PARENT_SCOPE)
endfunction()
file(REMOVE ${DIR}/gen_a.h5 ${DIR}/gen_b.h5 ${DIR}/gen_c.h5 ${DIR}/gen_d.h5)
gen(${DIR}/gen_a.h5 7)
if(NOT stdout MATCHES "^wrote [^\n]*gen_a.h5: 4 requests, [0-9]+ iterations, [0-9]+ rows, [0-9]+ layer-steps, [0-9.]+ MiB \\(mixtral-8x7b, seed 7\\)\n$")
  message(FATAL_ERROR "unexpected summary: ${stdout}")
endif()
gen(${DIR}/gen_b.h5 7)
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${DIR}/gen_a.h5 ${DIR}/gen_b.h5 RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  message(FATAL_ERROR "same flags and seed gave different files")
endif()
gen(${DIR}/gen_c.h5 8)
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${DIR}/gen_a.h5 ${DIR}/gen_c.h5 RESULT_VARIABLE same)
if(same EQUAL 0)
  message(FATAL_ERROR "seeds 7 and 8 gave the same file")
endif()
# --layer-steps without --requests: as many requests as the budget takes
execute_process(COMMAND ${EXE} trace gen --model mixtral-8x7b --set prompt_median=8 --set output_median=4
                        --set output_max=8 --layer-steps 20000 -o ${DIR}/gen_d.h5
                RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
if(NOT rc EQUAL 0 OR NOT stdout MATCHES ": ([0-9]+) requests, ([0-9]+) iterations, [0-9]+ rows, ([0-9]+) layer-steps")
  message(FATAL_ERROR "layer-step run failed (${rc}): ${stdout}${stderr}")
endif()
set(n_req ${CMAKE_MATCH_1})
set(iters ${CMAKE_MATCH_2})
set(steps ${CMAKE_MATCH_3})
math(EXPR want "${iters} * 32")
# at most 8 output tokens: the last request adds at most 9 x 32 = 288 layer-steps
if(NOT steps EQUAL want OR steps LESS 20000 OR steps GREATER 20288 OR n_req LESS_EQUAL 64)
  message(FATAL_ERROR "layer-step budget 20000: got ${n_req} requests, ${iters} iterations, ${steps} layer-steps")
endif()
file(REMOVE ${DIR}/gen_a.h5 ${DIR}/gen_b.h5 ${DIR}/gen_c.h5 ${DIR}/gen_d.h5)
]=])
string(REPLACE ";" " " GEN_SMALL_TEXT "${GEN_SMALL}")
add_test(NAME gen.cli.deterministic_files
         COMMAND ${CMAKE_COMMAND} -DEXE=${GEN_EXE} -DDIR=${GEN_DIR} "-DSMALL=${GEN_SMALL_TEXT}" -P ${GEN_CHECK})

# A model profile's [routing] section: knobs act as defaults, --set overrides,
# bad sections are one line naming file, line and knob.
add_test(NAME cli.gen.routing_profile COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/routing_profile.sh
         $<TARGET_FILE:moesim> ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/routing_profile)
