# `moesim published` (sim/apps/published.h, docs/published.md): the small row
# file's goldens, every bad-row case, the fit's recovery of known constants,
# outputs, --jobs, presets.
set(PUB_DIR ${CMAKE_CURRENT_SOURCE_DIR}/published)
set(PUB_FAIL ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_fail.sh)
# The goldens of tests/published/small.ini (4 rows in 2 runs: three rows share one run).  Hand check of
# nocache-mixtral (Mixtral-8x7B bf16 on a5000-pcie4, framework mixtral-offloading: copies in stream order
# (sync) and each a swap with write-back, batch 1): each MoE layer of a decode step = layer_s 2 ms + dense
# (83,968,000 B / 768 GB/s + 5 us launch = 0.114333 ms) + 2 x (write-back + copy: 2 x (352,321,536 B /
# 26.3 GB/s + 6 us) = 26.804406 ms) + 2 x the expert's compute (352,321,536 B / 768 GB/s + 5 us =
# 0.463752 ms; nothing overlaps under sync) = 56.649835 ms; x 32 layers + iteration_s 5 ms =
# 1817.8276 ms per token; moesim: 1817.82758 ms.
add_test(NAME published.small_golden COMMAND sh -c "d=${CMAKE_CURRENT_BINARY_DIR}/published_small && rm -rf $d && $<TARGET_FILE:moesim> published --rows ${PUB_DIR}/small.ini --out $d > $d.txt && tail -n +2 $d/published.csv | diff - ${PUB_DIR}/small.golden.csv && grep -q '^4 rows in 2 runs$' $d.txt && grep -q '^evaluation  *3 rows  median |ln ratio| 1.291 (x3.64)  worst 1.858 (x6.41, nocache-mixtral-ttft)$' $d.txt && awk '/\"predicted\"/ && !n++ { gsub(/[^0-9.]/, \"\", $2); e = $2 / 1817.8276 - 1; exit !(e < 1e-5 && e > -1e-5) }' $d/published.json")
add_test(NAME published.bad_rows COMMAND ${PUB_DIR}/bad_rows.sh $<TARGET_FILE:moesim> ${PUB_FAIL} ${CMAKE_CURRENT_BINARY_DIR}/published_bad)
add_test(NAME published.fit_recovery COMMAND ${PUB_DIR}/fit_recovery.sh $<TARGET_FILE:moesim> ${CMAKE_SOURCE_DIR}/sim/profiles ${CMAKE_CURRENT_BINARY_DIR}/published_fit)
set_tests_properties(published.fit_recovery PROPERTIES TIMEOUT 600)
add_test(NAME published.outputs COMMAND ${PUB_DIR}/outputs.sh $<TARGET_FILE:moesim> ${PUB_FAIL} ${PUB_DIR}/small.ini ${CMAKE_CURRENT_BINARY_DIR}/published_outputs)
# --jobs 3 (runs in worker processes) gives the bytes of --jobs 1
add_test(NAME published.jobs COMMAND sh -c "d=${CMAKE_CURRENT_BINARY_DIR}/published_jobs && rm -rf $d && mkdir -p $d && $<TARGET_FILE:moesim> published --rows ${PUB_DIR}/small.ini --out $d/1 > $d.1.txt && $<TARGET_FILE:moesim> published --rows ${PUB_DIR}/small.ini --out $d/3 --jobs 3 > $d.3.txt && cmp $d.1.txt $d.3.txt && cmp $d/1/published.csv $d/3/published.csv && cmp $d/1/published.json $d/3/published.json")
add_test(NAME published.presets COMMAND sh -c "[ $($<TARGET_FILE:moesim> published --presets | grep -c '^[a-z]') = 11 ] && $<TARGET_FILE:moesim> published --presets | grep -q '^llama-cpp  *framework llama-cpp  *knobs: cpu_moe_layers, cpu_threads$'")
add_test(NAME published.only COMMAND sh -c "d=${CMAKE_CURRENT_BINARY_DIR}/published_only && rm -rf $d && $<TARGET_FILE:moesim> published --rows ${PUB_DIR}/small.ini --only mixtral-offloading --out $d > $d.txt && grep -q '^1 rows in 1 runs$' $d.txt && grep -q '^mo-mixtral ' $d.txt")
add_test(NAME published.bad_only COMMAND ${PUB_FAIL} 2 "^moesim: published: --only nosuch: no such system \\(no-cache, " $<TARGET_FILE:moesim> published --only nosuch)
add_test(NAME published.bad_jobs COMMAND ${PUB_FAIL} 2 "published: --jobs 0: expected a whole number in \\[1, 4096\\]" $<TARGET_FILE:moesim> published --jobs 0)
add_test(NAME published.bad_flag COMMAND ${PUB_FAIL} 2 "published: unknown option '--fast'" $<TARGET_FILE:moesim> published --fast 1)
# no-cache is an LRU with room for one layer's J experts; on a model where (L - 1) x K < J (Switch-Base-128:
# 11 x 1 < 128) it would keep decode experts between tokens, so the row says so instead of running
# (it ran at 36.9 ms per token, 26x below Mixtral's, with the check removed)
add_test(NAME published.nocache_keeps_nothing COMMAND sh -c "d=${CMAKE_CURRENT_BINARY_DIR}/published_nocache && rm -rf $d && mkdir -p $d && sed 's/^model = mixtral-8x7b/model = switch-base-128/' ${PUB_DIR}/small.ini | sed -n '1,/^$/p' > $d/rows.ini && ! $<TARGET_FILE:moesim> published --rows $d/rows.ini --out $d/o > $d/out.txt && grep -q 'cannot run: .*row nocache-mixtral: system = no-cache: no-cache on switch-base-128 (L = 12, K = 1, J = 128) needs a cache policy that keeps nothing' $d/out.txt")
# with no --rows: every .ini of the profile folder's published/, in file-name order (a.ini's row first)
add_test(NAME published.default_rows COMMAND sh -c "d=${CMAKE_CURRENT_BINARY_DIR}/published_default && rm -rf $d && mkdir -p $d && cp -rL ${CMAKE_SOURCE_DIR}/sim/profiles $d/prof && mkdir -p $d/prof/published && rm -f $d/prof/published/*.ini && cp ${PUB_DIR}/small.ini $d/prof/published/b.ini && sed -n '/^\\[row mo-mixtral\\]/,/^$/p' ${PUB_DIR}/small.ini | sed 's/^\\[row mo-mixtral\\]/[row first]/' > $d/prof/published/a.ini && MOESIM_PROFILE_DIR=$d/prof $<TARGET_FILE:moesim> published --out $d/o > $d/out.txt && sed -n 2p $d/out.txt | grep -q '^first ' && grep -q '^5 rows in 2 runs$' $d/out.txt && rm -r $d/prof/published/*.ini && ! MOESIM_PROFILE_DIR=$d/prof $<TARGET_FILE:moesim> published --out $d/o2 2> $d/err.txt && grep -q 'published: no row files in .*/published (give --rows FILE)' $d/err.txt")
# --fit leaves out a calibration row that cannot run (here: no-cache on Switch-Base-128), saying so, and
# fits on the rest; the command still exits 1 (the row's table line says why).
add_test(NAME published.fit_leaves_out COMMAND sh -c "d=${CMAKE_CURRENT_BINARY_DIR}/published_fitout && rm -rf $d && mkdir -p $d && sed -n '/^\\[row mo-mixtral\\]/,/^$/p' ${PUB_DIR}/small.ini > $d/rows.ini && sed -n '/^\\[row mo-mixtral\\]/,/^$/p' ${PUB_DIR}/small.ini | sed 's/^\\[row mo-mixtral\\]/[row acc]/; s/^system = .*/system = no-cache/; s/^model = .*/model = switch-base-128/' | grep -v '^slots_per_layer\\|^prefetch' >> $d/rows.ini && ! $<TARGET_FILE:moesim> published --rows $d/rows.ini --fit --out $d/o > $d/out.txt && grep -q '^published --fit: calibration row acc left out: .*needs a cache policy that keeps nothing' $d/out.txt && grep -q 'calibration rows: mo-mixtral;' $d/o/frameworks/mixtral-offloading.ini")
# two rows of one failing run (an fMoE cache of 0.8 GB cannot hold a prefill step's two 352 MB experts): each
# row's error names that row, not the run's first
add_test(NAME published.shared_run_error COMMAND sh -c "d=${CMAKE_CURRENT_BINARY_DIR}/published_shared && rm -rf $d && mkdir -p $d && sed -n '/^\\[row mo-mixtral\\]/,/^$/p' ${PUB_DIR}/small.ini | sed 's/^system = .*/system = fmoe/; s/^slots_per_layer = .*/gpu_expert_gb = 0.8/' | grep -v '^prefetch' > $d/one.ini && sed 's/^\\[row mo-mixtral\\]/[row one]/' $d/one.ini > $d/rows.ini && sed 's/^\\[row mo-mixtral\\]/[row two]/; s/^metric = .*/metric = tpot_ms/' $d/one.ini >> $d/rows.ini && ! $<TARGET_FILE:moesim> published --rows $d/rows.ini --out $d/o > $d/out.txt && grep -q '^2 rows in 1 runs$' $d/out.txt && grep -q 'cannot run: .*rows.ini: row two: fmoe (fmoe + fmoe + gpu): GPU expert cache' $d/out.txt")
