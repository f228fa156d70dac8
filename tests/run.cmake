# CLI tests of `moesim run`, `moesim list` and `moesim demo`.
set(FAIL ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_fail.sh)

add_test(NAME run.list COMMAND moesim list)
set_tests_properties(run.list PROPERTIES PASS_REGULAR_EXPRESSION "belady.*bypass.*mixtral-8x7b.*rtx3090-pcie4")

add_test(NAME run.gen_fixture COMMAND moesim trace gen --model mixtral-8x7b -o ${CMAKE_CURRENT_BINARY_DIR}/run_mix.h5 --seed 3 --requests 4)
set_tests_properties(run.gen_fixture PROPERTIES FIXTURES_SETUP run_trace)
set(T ${CMAKE_CURRENT_BINARY_DIR}/run_mix.h5)

function(run_test name)
  add_test(NAME run.${name} COMMAND ${ARGN})
  set_tests_properties(run.${name} PROPERTIES FIXTURES_REQUIRED run_trace)
endfunction()

run_test(json moesim run --trace ${T} --model mixtral-8x7b --prefetch oracle --cache belady --cache-experts 16 --json)
set_tests_properties(run.json PROPERTIES PASS_REGULAR_EXPRESSION "\"config\".*\"bypass\":[ \t]*\"1\".*\"metrics\".*\"hit_rate\".*\"tpot_ms_mean\"")
run_test(table moesim run --trace ${T} --cache lfu:reset=0 --cache-gb 8 --batch 2 --events ${CMAKE_CURRENT_BINARY_DIR}/run_events.csv)
set_tests_properties(run.table PROPERTIES PASS_REGULAR_EXPRESSION "decode.*total.*TPOT")

run_test(bad_missing_trace ${FAIL} 1 "no-such.h5" $<TARGET_FILE:moesim> run --trace no-such.h5 --cache-experts 4)
run_test(bad_unknown_prefetch ${FAIL} 1 "unknown prefetch policy 'orcale' \\(known: none, oracle" $<TARGET_FILE:moesim> run --trace ${T} --prefetch orcale --cache-experts 4)
run_test(bad_unknown_param ${FAIL} 1 "cache policy 'lfu': unknown parameter 'rest'" $<TARGET_FILE:moesim> run --trace ${T} --cache lfu:rest=1 --cache-experts 4)
run_test(bad_param_range ${FAIL} 1 "reset=2 is out of range" $<TARGET_FILE:moesim> run --trace ${T} --cache lfu:reset=2 --cache-experts 4)
run_test(bad_cache_too_small ${FAIL} 1 "smaller than one layer's 2 activated experts" $<TARGET_FILE:moesim> run --trace ${T} --cache-experts 1)
run_test(bad_cache_over_gpu ${FAIL} 1 "exceeds rtx3090-pcie4's GPU memory" $<TARGET_FILE:moesim> run --trace ${T} --cache-experts 200)
run_test(bad_unknown_model ${FAIL} 1 "unknown model 'mixtral' \\(known:" $<TARGET_FILE:moesim> run --trace ${T} --model mixtral --cache-experts 4)
run_test(bad_model_mismatch ${FAIL} 1 "model 'qwen3-30b-a3b' has L=48" $<TARGET_FILE:moesim> run --trace ${T} --model qwen3-30b-a3b --cache-experts 4)
run_test(bad_unknown_platform ${FAIL} 1 "unknown platform" $<TARGET_FILE:moesim> run --trace ${T} --platform tpu --cache-experts 4)
run_test(bad_no_cache_size ${FAIL} 2 "exactly one of --cache-experts" $<TARGET_FILE:moesim> run --trace ${T})
run_test(bad_two_cache_sizes ${FAIL} 2 "exactly one of --cache-experts" $<TARGET_FILE:moesim> run --trace ${T} --cache-experts 4 --cache-gb 3)
run_test(bad_cache_number ${FAIL} 2 "--cache-experts 4x" $<TARGET_FILE:moesim> run --trace ${T} --cache-experts 4x)
run_test(bad_cache_bytes ${FAIL} 2 "--cache-bytes 4 GB" $<TARGET_FILE:moesim> run --trace ${T} --cache-bytes "4 GB")
run_test(bad_unknown_flag ${FAIL} 2 "unknown option '--cahce'" $<TARGET_FILE:moesim> run --trace ${T} --cahce lru --cache-experts 4)
run_test(bad_flag_no_value ${FAIL} 2 "--distance needs a value" $<TARGET_FILE:moesim> run --trace ${T} --cache-experts 4 --distance)
run_test(bad_events_path ${FAIL} 1 "--events /no/such/dir/e.csv: folder /no/such/dir: No such file or directory" $<TARGET_FILE:moesim> run --trace ${T} --cache-experts 4 --events /no/such/dir/e.csv)
run_test(bad_oracle_distance ${FAIL} 1 "oracle needs --distance >= 1" $<TARGET_FILE:moesim> run --trace ${T} --prefetch oracle --distance 0 --cache-experts 4)
run_test(bad_train_range ${FAIL} 2 "--train 1.5: expected auto or a fraction in .0, 1." $<TARGET_FILE:moesim> run --trace ${T} --cache-experts 4 --train 1.5)
run_test(bad_train_text ${FAIL} 2 "--train most: expected auto" $<TARGET_FILE:moesim> run --trace ${T} --cache-experts 4 --train most)
run_test(bad_train_empty_replay ${FAIL} 1 "--train 0.9 of 4 requests leaves none to replay" $<TARGET_FILE:moesim> run --trace ${T} --cache-experts 4 --train 0.9)
run_test(bad_topk_fill ${FAIL} 2 "--topk-fill half: expected zero or even" $<TARGET_FILE:moesim> run --trace ${T} --cache-experts 4 --topk-fill half)
# the resolved split is part of the config: static learns, so auto = 0.7 (3 of 4 requests)
run_test(train_auto_in_config moesim run --trace ${T} --cache static --cache-experts 64 --json)
set_tests_properties(run.train_auto_in_config PROPERTIES PASS_REGULAR_EXPRESSION "\"topk_fill\":[ \t]*\"zero\".*\"train\":[ \t]*{[^}]*\"frac\":[ \t]*0.7,[^}]*\"by\":[ \t]*\"request\",[^}]*\"requests\":[ \t]*3")
# an online fMoE store learns nothing offline: --train auto stays 0 (the whole trace replays)
run_test(fmoe_online_no_split moesim run --trace ${T} --prefetch fmoe:store=online --cache lru --cache-experts 32 --json)
set_tests_properties(run.fmoe_online_no_split PROPERTIES PASS_REGULAR_EXPRESSION "\"train\":[ \t]*{[^}]*\"frac\":[ \t]*0,[^}]*\"by\":[ \t]*\"none\"")

# learnt state in the metrics: a full fMoE store of 10 maps x (64-dim embedding + 32 x 8 probs) x 4 B
run_test(fmoe_state_bytes moesim run --trace ${T} --prefetch fmoe:capacity=10 --cache lru --cache-experts 32 --train 0.5 --json)
set_tests_properties(run.fmoe_state_bytes PROPERTIES PASS_REGULAR_EXPRESSION "\"policy_state_bytes\":[ \t]*12800[,}]")
# lru-slots with slots=0 shares the budget evenly: 64 experts over L = 32 layers = 2 per layer
add_test(NAME run.lru_slots_auto COMMAND sh -c "m() { $<TARGET_FILE:moesim> run --trace ${T} --cache-experts 64 --json --cache $1 | tr -d '\\n' | sed 's/.*\"metrics\"//'; } && a=$(m lru-slots) && b=$(m lru-slots:slots=2) && c=$(m lru) && [ -n \"$a\" ] && [ \"$a\" = \"$b\" ] && [ \"$a\" != \"$c\" ]")
set_tests_properties(run.lru_slots_auto PROPERTIES FIXTURES_REQUIRED run_trace)

# identical inputs give identical JSON (also across batch and policy state)
add_test(NAME run.same_json COMMAND sh -c "a=$($<TARGET_FILE:moesim> run --trace ${T} --prefetch traced-topk --cache lfu --cache-experts 24 --batch 3 --json) && b=$($<TARGET_FILE:moesim> run --trace ${T} --prefetch traced-topk --cache lfu --cache-experts 24 --batch 3 --json) && [ \"$a\" = \"$b\" ] && [ -n \"$a\" ]")
set_tests_properties(run.same_json PROPERTIES FIXTURES_REQUIRED run_trace)

# the main job end to end, small: table, CSV and figure
add_test(NAME run.demo COMMAND sh -c "rm -rf demo-test && $<TARGET_FILE:moesim> demo --out demo-test --requests 4 > demo-test.txt && grep -q '^(demo.csv), not a hit.  none+lru: at batch 1 every token visits its L x K (layer, expert) pairs in$' demo-test.txt && grep -q 'oracle+belady can sit below none+belady' demo-test.txt && head -2 demo-test/demo.csv | grep -q ',ttft_service_ms,' && test -s demo-test/demo.csv && test -s demo-test/demo.png && [ $(wc -l < demo-test/demo.csv) -eq 50 ] && head -1 demo-test/demo.csv | grep -q '^# moesim '")
set_tests_properties(run.demo PROPERTIES WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})

# What a run is given but cannot use is a warning on stderr and in --json (issue 17.5):
# eam and hybrimoe have no prefetch distance; eam learns from the training split
run_test(warn_unused_distance sh -c "$<TARGET_FILE:moesim> run --trace ${T} --offline --prefetch hybrimoe --cache-experts 32 --distance 3 --json 2>warn_unused_distance.err | tr -d '\\n\\t ' | grep -q '\"warnings\":\\[\"--distance3isnotused:prefetchhybrimoehasnoprefetchdistance\"\\]' && grep -qx 'moesim: warning: --distance 3 is not used: prefetch hybrimoe has no prefetch distance' warn_unused_distance.err")
run_test(warn_train_zero sh -c "$<TARGET_FILE:moesim> run --trace ${T} --prefetch eam --cache eam --cache-experts 32 --train 0 2>&1 >/dev/null | grep -qx 'moesim: warning: --train 0 leaves prefetch eam nothing to learn from: it learns from the training split'")
# none warned when the distance is used, or the default; no warnings is an empty list
run_test(warn_none sh -c "$<TARGET_FILE:moesim> run --trace ${T} --offline --prefetch traced-topk --cache-experts 32 --distance 3 --json 2>warn_none.err | tr -d '\\n\\t ' | grep -q '\"warnings\":\\[\\]' && ! [ -s warn_none.err ] && $<TARGET_FILE:moesim> run --trace ${T} --offline --prefetch eam --cache-experts 32 2>&1 >/dev/null | wc -c | grep -qx 0")
# the fixture's arrivals (Poisson at 1/s; 4 requests give an empirical 0.617/s) overload this setup: a warning naming the queueing (issue 32.4)
run_test(warn_overloaded sh -c "$<TARGET_FILE:moesim> run --trace ${T} --cache-experts 32 2>&1 >/dev/null | grep -q '^moesim: warning: overloaded: requests arrive at [0-9.]*/s, the run served .*/s while busy (offered load [0-9.]*)'")
# next_use_exact only where a policy asks for the next-use pre-pass (Belady)
run_test(next_use_exact_only_ahead sh -c "$<TARGET_FILE:moesim> run --trace ${T} --cache lru --cache-experts 32 --json | grep -c next_use_exact | grep -qx 0 && $<TARGET_FILE:moesim> run --trace ${T} --cache belady --cache-experts 32 --json | grep -q '\"next_use_exact\":.*true'")
