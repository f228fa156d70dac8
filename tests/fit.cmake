# CLI tests of `moesim trace fit` and `moesim trace gen --params` (the fit's
# statistics are checked in unit/test_fit.c).  Bad params files: one line
# "FILE:LINE: ..." on stderr naming section, key and value; exit 2.
set(FIT_FAIL ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_fail.sh)
set(FIT_DATA ${CMAKE_CURRENT_SOURCE_DIR}/data/fit)
set(FIT_OUT ${CMAKE_CURRENT_BINARY_DIR}/fit_never.h5)

function(params_fail name code regex)
  add_test(NAME fit.cli.${name} COMMAND ${FIT_FAIL} ${code} "${regex}" $<TARGET_FILE:moesim> ${ARGN})
endfunction()

params_fail(unknown_knob 2 "bad_unknown_knob.ini:2: \\[gen\\] unknown knob 'gate_alfa'"
  trace gen --model mixtral-8x7b --params ${FIT_DATA}/bad_unknown_knob.ini -o ${FIT_OUT})
params_fail(out_of_range 2 "bad_range.ini:3: \\[gen\\] knob gate_alpha=0 is out of range \\[0.01, 1000\\]"
  trace gen --model mixtral-8x7b --params ${FIT_DATA}/bad_range.ini -o ${FIT_OUT})
params_fail(key_twice 2 "bad_twice.ini:3: \\[gen\\] seed given twice"
  trace gen --model mixtral-8x7b --params ${FIT_DATA}/bad_twice.ini -o ${FIT_OUT})
params_fail(unknown_section 2 "bad_section.ini:3: unknown section \\[genn\\]"
  trace gen --model mixtral-8x7b --params ${FIT_DATA}/bad_section.ini -o ${FIT_OUT})
params_fail(missing_model_key 2 "bad_missing_key.ini: missing required key 'dense_bytes' in \\[model\\]"
  trace gen --params ${FIT_DATA}/bad_missing_key.ini -o ${FIT_OUT})
params_fail(bytes_length 2 "bad_bytes_len.ini:5: \\[model\\] expert_bytes: 3 values, expected 1 or moe_layers = 2"
  trace gen --params ${FIT_DATA}/bad_bytes_len.ini -o ${FIT_OUT})
params_fail(popularity_length 2 "bad_pop_len.ini:9: \\[popularity\\] layer1: 3 values, expected experts = 4"
  trace gen --params ${FIT_DATA}/bad_pop_len.ini -o ${FIT_OUT})
params_fail(popularity_value 2 "bad_pop_value.ini:8: \\[popularity\\] layer0: 'x' is not a non-negative number"
  trace gen --params ${FIT_DATA}/bad_pop_value.ini -o ${FIT_OUT})
params_fail(popularity_missing_layer 2 "bad_pop_missing_layer.ini: \\[popularity\\] layer1 is missing"
  trace gen --params ${FIT_DATA}/bad_pop_missing_layer.ini -o ${FIT_OUT})
params_fail(popularity_shape_mismatch 2 "bad_pop_missing_layer.ini:8: \\[popularity\\] layer0: 4 values, expected experts = 8"
  trace gen --model mixtral-8x7b --params ${FIT_DATA}/bad_pop_missing_layer.ini -o ${FIT_OUT})
params_fail(no_model 2 "no_model.ini has no \\[model\\] section: pass --model NAME"
  trace gen --params ${FIT_DATA}/no_model.ini -o ${FIT_OUT})
params_fail(missing_file 2 "nope.ini: cannot open params file"
  trace gen --params ${FIT_DATA}/nope.ini -o ${FIT_OUT})
params_fail(fit_missing_output 2 "trace fit: missing -o PARAMS.ini" trace fit x.h5)
params_fail(fit_bad_passes 2 "trace fit: --passes '0' is not an integer in \\[1, 8\\]" trace fit x.h5 -o p.ini --passes 0)
params_fail(fit_not_a_trace 1 "good_tiny.ini: not an HDF5 file" trace fit ${FIT_DATA}/good_tiny.ini -o ${CMAKE_CURRENT_BINARY_DIR}/fit_never.ini)

# A params file alone (shape, per-layer bytes, popularity with a continued
# line) gives a trace; the per-layer bytes reach it.
add_test(NAME fit.cli.gen_params_only COMMAND ${CMAKE_COMMAND} -E env
  sh -c "$<TARGET_FILE:moesim> trace gen --params ${FIT_DATA}/good_tiny.ini -o fit_tiny.h5 && $<TARGET_FILE:moesim> trace info fit_tiny.h5")
set_tests_properties(fit.cli.gen_params_only PROPERTIES WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}
  PASS_REGULAR_EXPRESSION "model: +tiny.*layers \\(L\\): +2.*experts \\(J\\): +4.*requests: +3.*expert bytes: +min 100, max 200")

# Acceptance of the fitted twin (issue 17.6, docs/traces.md "Fitted generator"):
# hit rates within 0.05 of the source's and the same policy ranking for
# none+lru, none+lfu, eam+eam and fmoe+fmoe at 1/8, 1/4 and 1/2 of the
# experts; the known gaps passed as the last argument (SIZE:POLICY:BOUND,
# SIZE:rank) are the documented exceptions, each with its mechanism in
# docs/traces.md.
set(FIT_TWIN ${CMAKE_CURRENT_SOURCE_DIR}/fit/twin_ranking.sh)
set(FIT_TWIN_DIR ${CMAKE_CURRENT_BINARY_DIR}/fit_twin)
file(MAKE_DIRECTORY ${FIT_TWIN_DIR})
foreach(t qwen gptoss)
  if(t STREQUAL "qwen")
    set(exc "8:eam+eam:0.08 4:eam+eam:0.09")
  else()
    set(exc "")
  endif()
  add_test(NAME fit.twin.${t} COMMAND sh -c
    "$<TARGET_FILE:moesim> trace import --format route-csv ${MOESIM_SHARED_DIR}/traces/bigmoeonedge/${t}.route.csv src_${t}.h5 > /dev/null && sh ${FIT_TWIN} $<TARGET_FILE:moesim> ${t} src_${t}.h5 '${exc}'")
  set_tests_properties(fit.twin.${t} PROPERTIES WORKING_DIRECTORY ${FIT_TWIN_DIR} TIMEOUT 300)
endforeach()
# qwen with three decode phases (docs/traces.md "Decode phases"): every cell
# within 0.05, the EAM/fMoE order at 1/8 the known gap (fMoE loses its
# training maps' phase; the twin lacks qwen's layer coupling).
add_test(NAME fit.twin.qwen_phases3 COMMAND sh -c
  "$<TARGET_FILE:moesim> trace import --format route-csv ${MOESIM_SHARED_DIR}/traces/bigmoeonedge/qwen.route.csv src_qwen3.h5 > /dev/null && FIT_FLAGS='--decode-phases 3' sh ${FIT_TWIN} $<TARGET_FILE:moesim> qwen3 src_qwen3.h5 '8:rank'")
set_tests_properties(fit.twin.qwen_phases3 PROPERTIES WORKING_DIRECTORY ${FIT_TWIN_DIR} TIMEOUT 300)
# The recorded trace: traces/record/record.py on a randomly initialised tiny
# Mixtral (16 experts, 4 layers; no trained MoE weights can be downloaded
# here), tests/data/record/README.md.  Its twin is small, so one seed is one
# draw whose hit rates spread by about the tolerance: the test compares the
# mean over 8 twin seeds (4 s in all).  The remaining gaps of that mean are
# LRU at 1/4 (+0.055), EAM (+0.105, +0.097), fMoE (-0.166, -0.089) and the
# ranking at both sizes, documented in docs/traces.md ("Near repeats").
add_test(NAME fit.twin.recorded COMMAND sh -c "TWIN_SEEDS='1 2 3 4 5 6 7 8' sh ${FIT_TWIN} $<TARGET_FILE:moesim> recorded ${CMAKE_CURRENT_SOURCE_DIR}/data/record/tiny-mixtral-j16.h5 '4:none+lru:0.07 4:eam+eam:0.12 4:fmoe+fmoe:0.19 2:eam+eam:0.11 2:fmoe+fmoe:0.11 4:rank 2:rank'")
set_tests_properties(fit.twin.recorded PROPERTIES WORKING_DIRECTORY ${FIT_TWIN_DIR} TIMEOUT 300)
# The recorded trace of a trained model: the same tiny Mixtral shape (hidden 64)
# trained 1500 steps on the seed papers' text, 24 prompts x 64 tokens sampled at
# T = 0.8 (record.py --train-steps, tests/data/record/README.md): the acceptance
# subject for a recording.  Mean of 8 twin seeds (6 s).  No known gap: every
# cell within 0.05 and the ranking at both sizes (1/8 is refused by source and
# twin alike), with the fit's popularity calibration (docs/traces.md "The
# trained recording"); without it LFU (-0.051) and EAM (-0.073) at 1/4 fail.
add_test(NAME fit.twin.trained COMMAND sh -c "TWIN_SEEDS='1 2 3 4 5 6 7 8' sh ${FIT_TWIN} $<TARGET_FILE:moesim> trained ${CMAKE_CURRENT_SOURCE_DIR}/data/record/tiny-mixtral-j16-trained.h5 ''")
set_tests_properties(fit.twin.trained PROPERTIES WORKING_DIRECTORY ${FIT_TWIN_DIR} TIMEOUT 300)

# [lengths] and [late_decode_popularity]: one-line errors (good_phases.ini,
# the valid form, is generated and checked in unit/test_fit.c).
params_fail(lengths_count 2 "bad_lengths_count.ini:10: \\[lengths\\] prompt has 2 values, output 1: expected the same number"
  trace gen --params ${FIT_DATA}/bad_lengths_count.ini -o ${FIT_OUT})
params_fail(lengths_value 2 "bad_lengths_value.ini:10: \\[lengths\\] prompt: value 0 \\(0\\) is not a whole number in \\[1, 65536\\]"
  trace gen --params ${FIT_DATA}/bad_lengths_value.ini -o ${FIT_OUT})
params_fail(late_without_decode 2 "bad_late_only.ini:10: \\[late_decode_popularity\\] needs \\[decode_popularity\\]"
  trace gen --params ${FIT_DATA}/bad_late_only.ini -o ${FIT_OUT})
# Decode phases ([decode_phase2] .. [decode_phase16]; three phases are
# generated and checked in unit/test_fit.c).
params_fail(phase_gap 2 "bad_phase_gap.ini:13: \\[decode_phase3\\] needs \\[decode_phase2\\]"
  trace gen --params ${FIT_DATA}/bad_phase_gap.ini -o ${FIT_OUT})
params_fail(phase_alias 2 "bad_phase_alias.ini:15: \\[late_decode_popularity\\] and \\[decode_phase2\\] are the same decode phase"
  trace gen --params ${FIT_DATA}/bad_phase_alias.ini -o ${FIT_OUT})
params_fail(phase_17 2 "bad_phase17.ini:9: unknown section \\[decode_phase17\\]"
  trace gen --params ${FIT_DATA}/bad_phase17.ini -o ${FIT_OUT})
params_fail(fit_bad_phases 2 "trace fit: --decode-phases '17' is not an integer in \\[1, 16\\]"
  trace fit x.h5 -o p.ini --decode-phases 17)
params_fail(fit_phases_many_requests 1 "trace fit: --decode-phases 3: .*tiny-mixtral-j16.h5 has 8 requests; decode phases are fitted on one-request traces only"
  trace fit ${CMAKE_CURRENT_SOURCE_DIR}/data/record/tiny-mixtral-j16.h5 -o ${CMAKE_CURRENT_BINARY_DIR}/fit_never.ini --decode-phases 3)
# --decode-phases on a one-request trace: three phases measured and written.
add_test(NAME fit.cli.decode_phases COMMAND sh -c
  "$<TARGET_FILE:moesim> trace gen --model olmoe-1b-7b --requests 1 --set output_median=30 --set output_sigma=0 -o fit_one.h5 > /dev/null && $<TARGET_FILE:moesim> trace fit fit_one.h5 -o fit_one.ini --passes 1 --trial-seeds 1 --decode-phases 3 && grep -c '^\\[decode_p' fit_one.ini && grep '^\\[decode_phase3\\]' fit_one.ini && $<TARGET_FILE:moesim> trace gen --params fit_one.ini -o fit_one_twin.h5")
set_tests_properties(fit.cli.decode_phases PROPERTIES WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}
  PASS_REGULAR_EXPRESSION "measured: 3 decode phases.*\n3\n\\[decode_phase3\\].*wrote fit_one_twin.h5: 1 requests")
# [periods] (repeated tokens, traces/synth/gen_repeat.c): one-line errors.
params_fail(periods_value 2 "bad_periods_value.ini:11: \\[periods\\] repeat: value 1 \\(1.5\\) is not a probability in \\[0, 1\\]"
  trace gen --params ${FIT_DATA}/bad_periods_value.ini -o ${FIT_OUT})
params_fail(periods_count 2 "bad_periods_count.ini:10: \\[periods\\] period has 2 values, repeat 1: expected the same number"
  trace gen --params ${FIT_DATA}/bad_periods_count.ini -o ${FIT_OUT})
params_fail(period_repeat_alone 1 "period_repeat = 0.5 needs decode_period >= 1"
  trace gen --model mixtral-8x7b --set period_repeat=0.5 -o ${FIT_OUT})

# moesim trace fit --against MODEL: a short fit, its section in a profile, bad flags
add_test(NAME fit.against COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/fit_against.sh
         $<TARGET_FILE:moesim> ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/fit_against)
