# CLI tests of `moesim figures`: two cheap figures end to end on a tiny trace
# (CSV, PNG and PDF written and non-empty, CSV contents checked), and the
# one-line error for an unknown figure name.
set(FIG_FAIL ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_fail.sh)
set(FIG_DIR ${CMAKE_CURRENT_BINARY_DIR}/figures-test)
add_test(NAME figures.gen_fixture COMMAND sh -c "rm -rf ${FIG_DIR} && mkdir -p ${FIG_DIR} && $<TARGET_FILE:moesim> trace gen --model mixtral-8x7b -o ${FIG_DIR}/tiny.h5 --seed 5 --requests 4")
set_tests_properties(figures.gen_fixture PROPERTIES FIXTURES_SETUP fig_trace)

# entropy-layer: one row per MoE layer (32) plus the header; ablation-cache: 3 caches x 3 sizes
add_test(NAME figures.two_cheap COMMAND sh -c "$<TARGET_FILE:moesim> figures --trace ${FIG_DIR}/tiny.h5 --model mixtral-8x7b --out ${FIG_DIR} --only entropy-layer,ablation-cache && for f in entropy-layer ablation-cache; do test -s ${FIG_DIR}/$f.png && test -s ${FIG_DIR}/$f.pdf || exit 1; done && [ $(wc -l < ${FIG_DIR}/entropy_layer.csv) -eq 34 ] && [ $(wc -l < ${FIG_DIR}/ablation_cache.csv) -eq 5 ] && head -1 ${FIG_DIR}/entropy_layer.csv | grep -q '^# moesim .*; trace .*tiny.h5 sha256 [0-9a-f]\\{64\\}; platform ' && sed -n 2p ${FIG_DIR}/entropy_layer.csv | grep -qx 'layer,iteration,request,trace,h_max' && grep -q '^LFU,0\\.[0-9]*,0\\.[0-9]*,0\\.[0-9]*$' ${FIG_DIR}/ablation_cache.csv")
set_tests_properties(figures.two_cheap PROPERTIES FIXTURES_REQUIRED fig_trace)

add_test(NAME figures.bad_name COMMAND ${FIG_FAIL} 2 "figures: unknown figure 'nosuchfigure' \\(known: hit-distance, tpot-cache, .*hybrimoe-timeline\\)" $<TARGET_FILE:moesim> figures --only nosuchfigure)
add_test(NAME figures.list COMMAND moesim figures --list)
set_tests_properties(figures.list PROPERTIES PASS_REGULAR_EXPRESSION "hit-distance +fMoE Fig. 4.*moeinf-hit-cache +MoE-Infinity Fig. 11.*hybrimoe-timeline")
