# Profile overrides without copying a profile: --set platform.KEY=VALUE and
# --set model.KEY=VALUE on run and validate (sim/core/profile.h ms_profile_set).
set(OV_DIR ${CMAKE_CURRENT_BINARY_DIR}/overrides)
set(OV_T ${OV_DIR}/t.h5)
set(OV_FAIL ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_fail.sh)
add_test(NAME overrides.fixture COMMAND sh -c "mkdir -p ${OV_DIR} && $<TARGET_FILE:moesim> trace gen --model mixtral-8x7b -o ${OV_T} --seed 9 --requests 2 --set prompt_max=16 --set output_max=8")
set_tests_properties(overrides.fixture PROPERTIES FIXTURES_SETUP ov_trace)

# half of Mixtral's experts (128 x 352 MB = 45 GB) does not fit rtx3090-pcie4's 24 GiB;
# with the GPU memory overridden it runs, and the config says so
add_test(NAME overrides.gpu_mem COMMAND sh -c "$<TARGET_FILE:moesim> run --trace ${OV_T} --model mixtral-8x7b --cache-experts 128 --set platform.gpu_mem_bytes=80GiB --json | tr -d ' \\t\\n' | grep -q '\"platform\":\"rtx3090-pcie4\",\"overrides\":{\"platform.gpu_mem_bytes\":\"80GiB\"}'")
# an override gives exactly the metrics of a copied profile with that one value changed
add_test(NAME overrides.same_as_copy COMMAND sh -c "sed '0,/^h2d_bw *=.*/s//h2d_bw = 64GB\\/s/' ${PROJECT_SOURCE_DIR}/sim/profiles/platforms/rtx3090-pcie4.ini > ${OV_DIR}/fast.ini && grep -q '^h2d_bw = 64GB/s' ${OV_DIR}/fast.ini && m() { $<TARGET_FILE:moesim> run --trace ${OV_T} --model mixtral-8x7b --cache-experts 32 --prefetch oracle --json \"$@\" | tr -d '\\n' | sed 's/.*\"metrics\"//'; } && a=$(m --set platform.h2d_bw=64GB/s) && b=$(m --platform ${OV_DIR}/fast.ini) && c=$(m) && [ -n \"$a\" ] && [ \"$a\" = \"$b\" ] && [ \"$a\" != \"$c\" ]")
set_tests_properties(overrides.gpu_mem overrides.same_as_copy PROPERTIES FIXTURES_REQUIRED ov_trace)

function(ov_fail name code regex)
  add_test(NAME overrides.${name} COMMAND ${OV_FAIL} ${code} "${regex}" $<TARGET_FILE:moesim> ${ARGN})
  set_tests_properties(overrides.${name} PROPERTIES FIXTURES_REQUIRED ov_trace)
endfunction()
ov_fail(bad_value 1 "^moesim: --set platform.gpu_mem_bytes=lots: \\[gpu\\] gpu_mem_bytes = 'lots': not a byte size such as 24GiB$"
        run --trace ${OV_T} --cache-experts 16 --set platform.gpu_mem_bytes=lots)
ov_fail(out_of_range 1 "^moesim: --set platform.h2d_bw=0: \\[link\\] h2d_bw = '0': must be in \\[0.1, 10000\\] GB/s \\(the plausible range, docs/profile-files.md\\)$"
        run --trace ${OV_T} --cache-experts 16 --set platform.h2d_bw=0)
ov_fail(unknown_key 1 "^moesim: --set platform.gpu_mem=1: unknown platform key 'gpu_mem' \\(known: description, gpu_mem_bytes,"
        run --trace ${OV_T} --cache-experts 16 --set platform.gpu_mem=1)
ov_fail(name_key 1 "unknown platform key 'name'" run --trace ${OV_T} --cache-experts 16 --set platform.name=x)
ov_fail(bad_spec 2 "^moesim: run: --set gpu.x=1: expected platform.KEY=VALUE or model.KEY=VALUE$"
        run --trace ${OV_T} --cache-experts 16 --set gpu.x=1)
ov_fail(no_value 2 "expected platform.KEY=VALUE" run --trace ${OV_T} --cache-experts 16 --set platform.h2d_bw)
ov_fail(twice 2 "platform.h2d_bw is set twice" run --trace ${OV_T} --cache-experts 16 --set platform.h2d_bw=1GB/s --set platform.h2d_bw=2GB/s)
ov_fail(model_without_model 1 "^moesim: --set model.top_k: needs --model$" run --trace ${OV_T} --cache-experts 16 --set model.top_k=3)
ov_fail(model_cross_check 1 "mixtral-8x7b.ini with --set model.expert_params=5: \\[model\\] expert_params = 5: expected expert_matrices\\*hidden\\*expert_ffn"
        run --trace ${OV_T} --model mixtral-8x7b --cache-experts 16 --set model.expert_params=5)
# issue 32: a model key the trace decides, or one a run never reads, is refused (it was
# accepted, echoed in config.overrides and changed nothing); the keys that act change the run
ov_fail(model_trace_decides 1 "^moesim: --set model.top_k=4: the trace decides top-k \\(a run replays its routing; .*\\), so the override would change nothing \\(keys a run reads: expert_params, dense_params, hidden, dtype, expert_ffn, expert_matrices, encoder_moe_layers\\)$"
        run --trace ${OV_T} --model mixtral-8x7b --cache-experts 16 --set model.top_k=4)
ov_fail(model_trace_decides_bytes 1 "^moesim: --set model.expert_bytes=1GB: the trace decides the expert bytes of every layer"
        run --trace ${OV_T} --model mixtral-8x7b --cache-experts 16 --set model.expert_bytes=1GB)
ov_fail(model_not_read 1 "^moesim: --set model.vocab=5: a run does not read the vocabulary size, so the override would change nothing"
        run --trace ${OV_T} --model mixtral-8x7b --cache-experts 16 --set model.vocab=5)
ov_fail(figures_model_trace_decides 1 "^moesim: --set model.experts=4: the trace decides the experts per layer"
        figures --only tpot-cache --trace ${OV_T} --model mixtral-8x7b --out ${OV_DIR}/fx --set model.experts=4)
# (dense_params: the FLOPs of dense compute, visible when compute-bound: gpu_flops lowered)
add_test(NAME overrides.model_acts COMMAND sh -c "m() { $<TARGET_FILE:moesim> run --trace ${OV_T} --model mixtral-8x7b --cache-experts 32 --offline --set platform.gpu_flops=1e11 --json \"$@\" | tr -d '\\n' | sed 's/.*\"metrics\"//'; } && a=$(m --set model.dense_params=60000000) && b=$(m) && [ -n \"$a\" ] && [ -n \"$b\" ] && [ \"$a\" != \"$b\" ]")
set_tests_properties(overrides.model_acts PROPERTIES FIXTURES_REQUIRED ov_trace)
ov_fail(validate_bad 1 "^moesim: --set platform.hbm_bw=x: \\[gpu\\] hbm_bw = 'x'"
        validate --backend host --trace ${OV_T} --model mixtral-8x7b --platform rtx3090-pcie4 --cache-experts 16 --set platform.hbm_bw=x)

# the same overrides as sweep keys (model.KEY / platform.KEY in [sweep]): a sweep
# point with platform.h2d_bw = 64GB/s gives exactly run --set's counts
add_test(NAME overrides.sweep_same_as_run COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/overrides_sweep.sh $<TARGET_FILE:moesim> ${OV_DIR})
function(ov_sweep_fail name regex body)
  add_test(NAME overrides.${name} COMMAND sh -c "cd ${OV_DIR} && printf '[sweep]\\noutput = swf.csv\\ntrace = t.h5\\ncache_experts = 32\\n${body}' > ${name}.ini && ${OV_FAIL} 1 '${regex}' $<TARGET_FILE:moesim> sweep ${name}.ini")
  set_tests_properties(overrides.${name} PROPERTIES FIXTURES_REQUIRED ov_trace)
endfunction()
ov_sweep_fail(sweep_bad_value "^moesim: sweep_bad_value.ini:5: platform.h2d_bw = -3: \\[link\\] h2d_bw = .-3.: not a bandwidth" "platform.h2d_bw = -3\\n")
ov_sweep_fail(sweep_unknown_key "^moesim: sweep_unknown_key.ini:5: platform.h2d_bww = 3GB/s: unknown platform key .h2d_bww." "platform.h2d_bww = 3GB/s\\n")
ov_sweep_fail(sweep_in_point "^moesim: sweep_in_point.ini:6: platform.h2d_bw: profile overrides go in \\[sweep\\]" "[point]\\nplatform.h2d_bw = 3GB/s\\n")
ov_sweep_fail(sweep_model_trace_decides "^moesim: sweep_model_trace_decides.ini:6: model.top_k = 4: the trace decides top-k" "model = mixtral-8x7b\\nmodel.top_k = 4\\n")
ov_sweep_fail(sweep_twice "^moesim: sweep_twice.ini:6: key .platform.h2d_bw. given twice" "platform.h2d_bw = 3GB/s\\nplatform.h2d_bw = 4GB/s\\n")
# and on figures: an override changes the figure's data
add_test(NAME overrides.figures COMMAND sh -c "cd ${OV_DIR} && $<TARGET_FILE:moesim> figures --only tpot-cache --trace t.h5 --out fa >/dev/null && $<TARGET_FILE:moesim> figures --only tpot-cache --trace t.h5 --out fb --set platform.h2d_bw=4GB/s >/dev/null && ! cmp -s fa/tpot_cache.csv fb/tpot_cache.csv && $<TARGET_FILE:moesim> figures --only tpot-cache --trace t.h5 --out fc --set platform.h2d_bw=zz 2>&1 | grep -qx 'moesim: --set platform.h2d_bw=zz: \\[link\\] h2d_bw = .zz.: not a bandwidth in bytes/s such as 32GB/s'")
set_tests_properties(overrides.sweep_same_as_run overrides.figures PROPERTIES FIXTURES_REQUIRED ov_trace)
