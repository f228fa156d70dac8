# Several GPUs and frameworks from the command line (docs/engine.md "Several GPUs",
# docs/profiles.md "Frameworks"): bad input gives one line and a non-zero exit.
set(MG_DIR ${CMAKE_CURRENT_BINARY_DIR}/multigpu)
set(MG_T ${MG_DIR}/t.h5)
set(MG_FAIL ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_fail.sh)
set(MG_TWO --set platform.gpus=2 --set platform.peer_bw=56GB/s --set platform.peer_latency_s=5e-6)
string(REPLACE ";" " " MG_TWO_SH "${MG_TWO}")
add_test(NAME multigpu.fixture COMMAND sh -c "mkdir -p ${MG_DIR} && cd ${MG_DIR} && $<TARGET_FILE:moesim> trace gen --model mixtral-8x7b -o t.h5 --seed 9 --requests 3 --set prompt_max=16 --set output_max=8 >/dev/null && (echo layer,expert,gpu; l=0; while [ $l -lt 32 ]; do e=0; while [ $e -lt 8 ]; do echo $l,$e,$((e % 2)); e=$((e + 1)); done; l=$((l + 1)); done) > ok.csv && sed 's/^5,3,1$/5,3,7/' ok.csv > bad_gpu.csv && grep -v '^7,2,' ok.csv > missing.csv")
set_tests_properties(multigpu.fixture PROPERTIES FIXTURES_SETUP mg_trace)

function(mg_fail name code regex)
  add_test(NAME multigpu.${name} COMMAND ${MG_FAIL} ${code} "${regex}" $<TARGET_FILE:moesim> ${ARGN})
  set_tests_properties(multigpu.${name} PROPERTIES FIXTURES_REQUIRED mg_trace)
endfunction()
mg_fail(zero_gpus 2 "^moesim: run: --gpus 0: expected a whole number in \\[1, 64\\]$"
        run --trace ${MG_T} --model mixtral-8x7b --cache-experts 16 --gpus 0)
mg_fail(zero_gpus_profile 1 "^moesim: --set platform.gpus=0: \\[gpu\\] gpus = '0': must be in \\[1, 64\\] \\(the plausible range, docs/profile-files.md\\)$"
        run --trace ${MG_T} --model mixtral-8x7b --cache-experts 16 --set platform.gpus=0)
mg_fail(placement_bad_gpu 1 "bad_gpu.csv:45: 5,3,7: GPU outside 0\\.\\.1 \\(the run has 2 GPUs\\)$"
        run --trace ${MG_T} --model mixtral-8x7b --cache-experts 16 ${MG_TWO} --placement ${MG_DIR}/bad_gpu.csv)
mg_fail(placement_missing 1 "missing.csv: no GPU for expert \\(7, 2\\)"
        run --trace ${MG_T} --model mixtral-8x7b --cache-experts 16 ${MG_TWO} --placement ${MG_DIR}/missing.csv)
mg_fail(placement_unreadable 1 "nowhere.csv: cannot open placement file"
        run --trace ${MG_T} --model mixtral-8x7b --cache-experts 16 ${MG_TWO} --placement ${MG_DIR}/nowhere.csv)
mg_fail(small_gpu_cache 1 "^moesim: GPU 1's expert cache \\(1 experts of a total 3\\) is smaller than the 2 experts layer 0 places"
        run --trace ${MG_T} --model mixtral-8x7b --cache-experts 3 ${MG_TWO})
mg_fail(no_interconnect 1 "^moesim: 2 GPUs need an \\[interconnect\\] peer_bw for token dispatch; platform rtx3090-pcie4 has none$"
        run --trace ${MG_T} --model mixtral-8x7b --cache-experts 16 --gpus 2 --train 0)
mg_fail(unknown_framework 1 "^moesim: --framework: unknown framework 'nope' \\(known: "
        run --trace ${MG_T} --model mixtral-8x7b --cache-experts 16 --framework nope)
mg_fail(bad_cache_per_gpu 2 "^moesim: run: --cache-per-gpu 2: expected 0 or 1$"
        run --trace ${MG_T} --model mixtral-8x7b --cache-experts 16 --cache-per-gpu 2)
# a run on two GPUs reports each GPU; one GPU reports none (and no gpu column in --events)
add_test(NAME multigpu.json COMMAND sh -c "cd ${MG_DIR} && $<TARGET_FILE:moesim> run --trace t.h5 --model mixtral-8x7b --cache-experts 16 ${MG_TWO_SH} --placement ok.csv --prefetch oracle --events ev2.csv --json > two.json && grep -q '\"link_busy_s\"' two.json && sed -n 2p ev2.csv | grep -qx 'kind,start_s,end_s,iteration,layer,expert,phase,bytes,unused_prefetch,gpu' && $<TARGET_FILE:moesim> run --trace t.h5 --model mixtral-8x7b --cache-experts 16 --events ev1.csv --json > one.json && ! grep -q '\"link_busy_s\"' one.json && sed -n 2p ev1.csv | grep -qx 'kind,start_s,end_s,iteration,layer,expert,phase,bytes,unused_prefetch'")
set_tests_properties(multigpu.json PROPERTIES FIXTURES_REQUIRED mg_trace)
# gpus, placement, cache_per_gpu and framework are sweep keys too: the sweep's row for a point
# gives the CLI's counts; unknown values are one line
add_test(NAME multigpu.sweep COMMAND sh -c "cd ${MG_DIR} && printf '[sweep]\\noutput = s.csv\\ntrace = t.h5\\nmodel = mixtral-8x7b\\nplatform = fmoe-6x3090\\ncache_experts = 16\\ngpus = 1, 6\\nplacement = round-robin, layer\\nframework = none, vllm\\ntrain = 0\\n' > s.ini && rm -f s.csv && $<TARGET_FILE:moesim> sweep s.ini >/dev/null && col() { head -1 s.csv | tr ',' '\\n' | grep -nx \"$1\" | cut -d: -f1; } && [ $(grep -c . s.csv) = 9 ] && row=$(grep ',6,layer,0,vllm,' s.csv) && h=$(echo \"$row\" | cut -d, -f$(col hits)) && t=$(echo \"$row\" | cut -d, -f$(col tpot_ms_mean)) && j=$($<TARGET_FILE:moesim> run --trace t.h5 --model mixtral-8x7b --platform fmoe-6x3090 --cache-experts 16 --placement layer --framework vllm --train 0 --json | tr -d ' \\t\\n') && echo \"$j\" | grep -q \"\\\"metrics\\\":{\\\"hit_rate\\\":[^,]*,\\\"hits\\\":$h,\" && [ $(grep -c ',1,round-robin,0,none,' s.csv) = 1 ]")
set_tests_properties(multigpu.sweep PROPERTIES FIXTURES_REQUIRED mg_trace)
add_test(NAME multigpu.sweep_bad_placement COMMAND sh -c "cd ${MG_DIR} && printf '[sweep]\\noutput = s2.csv\\ntrace = t.h5\\ncache_experts = 16\\nplacement = nowhere.csv\\n' > s2.ini && sh ${MG_FAIL} 1 '^moesim: s2.ini:5: placement = nowhere.csv: not round-robin, layer, balanced or a readable file$' $<TARGET_FILE:moesim> sweep s2.ini")
set_tests_properties(multigpu.sweep_bad_placement PROPERTIES FIXTURES_REQUIRED mg_trace)
