# `moesim claims` (sim/apps/claims.h): the list, the machinery on small
# traces (tests/cli/claims_small.sh), and bad flags.  The full run is a
# benchmark (bench/claims.sh; its table is in docs/claims.md).
add_test(NAME claims.list COMMAND sh -c "[ $($<TARGET_FILE:moesim> claims --list | grep -c '^[a-z]') -ge 16 ] && $<TARGET_FILE:moesim> claims --list | grep -q '^fmoe-tpot  *fMoE  *§6.2 Fig. 9'")
add_test(NAME claims.small COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/claims_small.sh $<TARGET_FILE:moesim> ${CMAKE_CURRENT_BINARY_DIR}/claims_small)
# --jobs 3 (claims in worker processes) gives the bytes of --jobs 1
add_test(NAME claims.jobs COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/claims_jobs.sh $<TARGET_FILE:moesim> ${CMAKE_CURRENT_BINARY_DIR}/claims_jobs)
set_tests_properties(claims.jobs PROPERTIES TIMEOUT 600)
set(CLAIMS_FAIL ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_fail.sh)
add_test(NAME claims.bad_only COMMAND ${CLAIMS_FAIL} 1 "^moesim: claims: --only nosuch: no such claim or paper" $<TARGET_FILE:moesim> claims --only fmoe-tpot,nosuch --out ${CMAKE_CURRENT_BINARY_DIR}/claims_bad)
add_test(NAME claims.bad_requests COMMAND ${CLAIMS_FAIL} 2 "claims: --requests 2: expected a whole number in .4, 100000." $<TARGET_FILE:moesim> claims --requests 2)
add_test(NAME claims.bad_flag COMMAND ${CLAIMS_FAIL} 2 "claims: unknown option '--fast'" $<TARGET_FILE:moesim> claims --fast 1)
# the trace given with --trace is an input: an output of the same name is refused before any run
add_test(NAME claims.refuses_input COMMAND sh -c "d=${CMAKE_CURRENT_BINARY_DIR}/claims_in && rm -rf $d && mkdir -p $d && $<TARGET_FILE:moesim> trace gen --model mixtral-8x7b -o $d/claims.csv --requests 4 --set prompt_max=16 --set output_max=8 >/dev/null && cp $d/claims.csv $d/copy.h5 && ${CLAIMS_FAIL} 1 '^moesim: claims [^:]*claims.csv: is the input file' $<TARGET_FILE:moesim> claims --trace $d/claims.csv --out $d --only fmoe-entropy && cmp -s $d/claims.csv $d/copy.h5 && ! [ -e $d/claims_values.csv ]")
# fMoE's map store at 32K maps of Qwen1.5-MoE's shape, by hand: 32,768 x (24 x 60 + 64) x 4 B =
# 197,132,288 B (188,743,680 of them the maps): under the paper's 200 MB
add_test(NAME claims.store_size COMMAND sh -c "$<TARGET_FILE:moesim> claims --only fmoe-store-size --requests 4 --no-sensitivity --out ${CMAKE_CURRENT_BINARY_DIR}/claims_store > ${CMAKE_CURRENT_BINARY_DIR}/claims_store.txt 2>&1 && grep -q '^fmoe-store-size  *holds' ${CMAKE_CURRENT_BINARY_DIR}/claims_store.txt && grep -q 'moesim: 197.1 MB (188.7 of L x J = 24 x 60 maps, 8.4 of 64-dim embeddings)' ${CMAKE_CURRENT_BINARY_DIR}/claims_store.txt")
# the serverless claim computes from the same study `moesim serverless` runs (tests/cli/claims_serverless.sh)
add_test(NAME claims.serverless COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/claims_serverless.sh $<TARGET_FILE:moesim> ${CMAKE_CURRENT_BINARY_DIR}/claims_serverless)
# the batch-size and EAMC-capacity axes reach the runs, and their verdicts follow from the printed values
add_test(NAME claims.axes COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/claims_axes.sh $<TARGET_FILE:moesim> ${CMAKE_CURRENT_BINARY_DIR}/claims_axes)
# a host-time claim is not simulated: skipped, with the benchmark that measures it
add_test(NAME claims.host_time COMMAND sh -c "$<TARGET_FILE:moesim> claims --only moeinf-eamc-search --out ${CMAKE_CURRENT_BINARY_DIR}/claims_host | grep -A2 '^moeinf-eamc-search  *skipped' | grep -q 'note: a host-time figure, not simulated: bench/bench_eamc_search'")
# a claim that asks for twice --requests gets its own trace, not the model's shared one
add_test(NAME claims.trace_per_shape COMMAND sh -c "d=${CMAKE_CURRENT_BINARY_DIR}/claims_shape && rm -rf $d && $<TARGET_FILE:moesim> claims --only fmoe-entropy,fmoe-batch-tpot --requests 4 --no-sensitivity --out $d > /dev/null && $<TARGET_FILE:moesim> trace info $d/claims-mixtral-8x7b.h5 | grep -q '^requests: *4$' && $<TARGET_FILE:moesim> trace info $d/claims-mixtral-8x7b-r8.h5 | grep -q '^requests: *8$'")
add_test(NAME claims.bad_model_without_trace COMMAND ${CLAIMS_FAIL} 2 "claims: --model qwen3-30b-a3b needs --trace" $<TARGET_FILE:moesim> claims --model qwen3-30b-a3b)
add_test(NAME claims.bad_model COMMAND sh -c "d=${CMAKE_CURRENT_BINARY_DIR}/claims_badmodel && rm -rf $d && mkdir -p $d && $<TARGET_FILE:moesim> trace gen --model mixtral-8x7b -o $d/t.h5 --requests 4 --set prompt_max=16 --set output_max=8 >/dev/null && ${CLAIMS_FAIL} 1 'claims: --model: unknown model .nope.' $<TARGET_FILE:moesim> claims --trace $d/t.h5 --model nope --only fmoe-entropy --out $d/o")
# claims.png's y axis holds 0 whatever the values (issue 32.13: with every value above 20 it started at
# 20, and the paper's 24.8 % bar looked empty); needs gnuplot, as the claims' figure does
add_test(NAME claims.figure_axis_from_zero COMMAND sh -c "d=${CMAKE_CURRENT_BINARY_DIR}/claims_axis && rm -rf $d && mkdir -p $d && printf '# p\\nitem,paper,moesim,verdict\\nhybrimoe-prefill,24.8,83,direction only\\nfmoe-ttft,44,30,does not hold\\n' > $d/claims_values.csv && gnuplot -e \"dir='$d'; out='$d/c.png'; term='png'; plots='${CMAKE_SOURCE_DIR}/plots'\" ${CMAKE_SOURCE_DIR}/plots/fig_claims.gp -e 'print GPVAL_Y_MIN' 2>&1 | grep -qx '0.0'")
