# CLI tests of `moesim figures`: cheap figures end to end on tiny traces
# (CSV, PNG and PDF written and non-empty, CSV contents checked), the
# conventions of issue 14 (layers numbered from 0, copy bars labelled
# L<layer>/E<expert>, cache sizes scaled to the trace's model, a model name
# neither the shell nor gnuplot may interpret), and the one-line error for an
# unknown figure name.
set(FIG_FAIL ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_fail.sh)
set(FIG_DIR ${CMAKE_CURRENT_BINARY_DIR}/figures-test)
set(FIG_CHECKS ${CMAKE_CURRENT_BINARY_DIR}/figures-checks)
add_test(NAME figures.gen_fixture COMMAND sh -c "rm -rf ${FIG_DIR} && mkdir -p ${FIG_DIR} && $<TARGET_FILE:moesim> trace gen --model mixtral-8x7b -o ${FIG_DIR}/tiny.h5 --seed 5 --requests 4 && $<TARGET_FILE:moesim> trace gen --model qwen1.5-moe-a2.7b -o ${FIG_DIR}/qwen.h5 --seed 5 --requests 4")
set_tests_properties(figures.gen_fixture PROPERTIES FIXTURES_SETUP fig_trace)

# entropy-layer: one row per MoE layer (32, layers 0..31) plus the provenance
# line and the header; ablation-cache: 3 caches x 3 sizes, 16/32/64 on a
# Mixtral trace
add_test(NAME figures.two_cheap COMMAND sh -c "$<TARGET_FILE:moesim> figures --trace ${FIG_DIR}/tiny.h5 --model mixtral-8x7b --out ${FIG_DIR} --only entropy-layer,ablation-cache && for f in entropy-layer ablation-cache; do test -s ${FIG_DIR}/$f.png && test -s ${FIG_DIR}/$f.pdf || exit 1; done && [ $(wc -l < ${FIG_DIR}/entropy_layer.csv) -eq 34 ] && [ $(wc -l < ${FIG_DIR}/ablation_cache.csv) -eq 5 ] && head -1 ${FIG_DIR}/entropy_layer.csv | grep -q '^# moesim .*; trace .*tiny.h5 content_sha256 [0-9a-f]\\{64\\} (stored, unverified); platform ' && sed -n 2p ${FIG_DIR}/entropy_layer.csv | grep -qx 'layer,iteration,request,trace,h_max' && sed -n 3p ${FIG_DIR}/entropy_layer.csv | grep -q '^0,' && tail -n 1 ${FIG_DIR}/entropy_layer.csv | grep -q '^31,' && sed -n 2p ${FIG_DIR}/ablation_cache.csv | grep -qx 'method,c16,c32,c64' && grep -q '^LFU,0\\.[0-9]*,0\\.[0-9]*,0\\.[0-9]*$' ${FIG_DIR}/ablation_cache.csv")
set_tests_properties(figures.two_cheap PROPERTIES FIXTURES_REQUIRED fig_trace)

# Layers from 0 (as in --events): the heatmap's layers are exactly 0..31 and
# its experts 0..7; every timeline interval is labelled L<its layer>/E<its
# expert> (non-expert compute: no label), the GPU and CPU lanes show the
# shown_layer, and there are copies to label.
file(WRITE ${FIG_CHECKS}/heatmap.awk [=[
# heatmap.csv: panel,layer,expert,weight
/^#/ || $1 == "panel" { next }
{ n++; if (n == 1 || $2 < lmin) lmin = $2; if ($2 > lmax) lmax = $2
  if (n == 1 || $3 < emin) emin = $3; if ($3 > emax) emax = $3 }
END { if (n == 0 || lmin != 0 || lmax != 31 || emin != 0 || emax != 7) {
        print "heatmap: layers " lmin ".." lmax ", experts " emin ".." emax ", " n " rows"; exit 1 } }
]=])
file(WRITE ${FIG_CHECKS}/timeline.awk [=[
# hybrimoe_timeline.csv: lane,start_ms,end_ms,kind,iteration,layer,expert,label,shown_layer
/^#/ { next }
$0 == "lane,start_ms,end_ms,kind,iteration,layer,expert,label,shown_layer" { hdr = 1; next }
{ n++; want = $7 >= 0 ? "L" $6 "/E" $7 : ""
  if ($8 != want) { print "row " n ": label '" $8 "', expected '" want "'"; bad = 1 }
  if ($1 > 0 && $6 != $9) { print "row " n ": a GPU/CPU interval of layer " $6 " in the timeline of layer " $9; bad = 1 }
  if ($9 < 0 || $9 > 31) { print "row " n ": shown_layer " $9 " outside 0..31"; bad = 1 }
  if ($4 ~ /^copy_/ && $8 ~ /^L[0-9]+\/E[0-9]+$/) copies++ }
END { if (!hdr || n == 0 || !copies) { print "header " hdr ", " n " rows, " copies " labelled copies"; bad = 1 }
      exit bad }
]=])
add_test(NAME figures.layers_from_0 COMMAND sh -c "$<TARGET_FILE:moesim> figures --trace ${FIG_DIR}/tiny.h5 --model mixtral-8x7b --out ${FIG_DIR}/layers --only heatmap,hybrimoe-timeline && test -s ${FIG_DIR}/layers/heatmap.png && test -s ${FIG_DIR}/layers/hybrimoe-timeline.png && awk -F, -f ${FIG_CHECKS}/heatmap.awk ${FIG_DIR}/layers/heatmap.csv && awk -F, -f ${FIG_CHECKS}/timeline.awk ${FIG_DIR}/layers/hybrimoe_timeline.csv")
set_tests_properties(figures.layers_from_0 PROPERTIES FIXTURES_REQUIRED fig_trace)

# Cache sizes scaled to the trace's model: qwen1.5-moe-a2.7b has 24 x 60 =
# 1,440 experts, so 16/24/32/48/64 of Mixtral's 256 become 90/135/180/270/360
# (Mixtral's sizes on this trace leave LRU at a 0 % hit rate at every size).
file(WRITE ${FIG_CHECKS}/scaled.awk [=[
# moeinf_hit_cache.csv: system,cache_experts,cache_gb,hit_rate
/^#/ || $1 == "system" { next }
!seen[$2]++ { sizes = sizes (sizes == "" ? "" : " ") $2 }
$1 == "LRU" && $2 == 360 { lru = $4 }
END { if (sizes != "90 135 180 270 360" || !(lru > 0)) {
        print "cache sizes '" sizes "', LRU hit rate at 360 experts '" lru "'"; exit 1 } }
]=])
add_test(NAME figures.cache_scaled COMMAND sh -c "$<TARGET_FILE:moesim> figures --trace ${FIG_DIR}/qwen.h5 --out ${FIG_DIR}/scaled --only ablation-cache,moeinf-hit-cache && sed -n 2p ${FIG_DIR}/scaled/ablation_cache.csv | grep -qx 'method,c90,c180,c360' && awk -F, -f ${FIG_CHECKS}/scaled.awk ${FIG_DIR}/scaled/moeinf_hit_cache.csv")
set_tests_properties(figures.cache_scaled PROPERTIES FIXTURES_REQUIRED fig_trace)

# A model name with gnuplot markup (_ ^ { } @ & ~), quotes and shell
# substitutions, as a route-csv dump may carry: the figures are drawn, and
# nothing in the name runs (no file INJ or INJ2 appears).
file(WRITE ${FIG_CHECKS}/odd.route.csv [=[
# route_trace v1
# model=/m/Odd_Name^2{x}@q'"$(touch${IFS}INJ)`touch${IFS}INJ2`&~.gguf arch=odd_arch n_layer=2 n_expert=8 n_expert_used=2
# layer=0 expert_bytes=1000 dense_bytes=500
# layer=1 expert_bytes=2000 dense_bytes=600
turn,phase,step,layer,slot,expert,weight,residency,expert_bytes
0,0,0,0,0,3,0.6,0,1000
0,0,0,0,1,5,0.4,0,0
0,0,1,0,0,1,0.7,0,0
0,0,1,0,1,2,0.3,0,1000
0,0,2,0,0,7,0.55,0,0
0,0,2,1,0,4,0.5,0,2000
0,0,2,1,1,6,0.5,0,0
0,1,3,0,0,3,0.8,1,1000
0,1,3,0,1,1,0.2,0,0
0,1,3,1,0,4,0.9,1,0
0,1,3,1,1,0,0.1,1,2000
0,1,4,0,0,2,0.6,0,0
0,1,4,0,1,3,0.4,1,0
0,1,4,1,0,6,0.75,0,0
0,1,4,1,1,4,0.25,1,0
]=])
add_test(NAME figures.odd_model_name COMMAND sh -c "rm -rf ${FIG_DIR}/odd && mkdir -p ${FIG_DIR}/odd && cd ${FIG_DIR}/odd && $<TARGET_FILE:moesim> trace import --format route-csv ${FIG_CHECKS}/odd.route.csv odd.h5 > /dev/null && $<TARGET_FILE:moesim> trace info odd.h5 | grep -qF 'Odd_Name^2{x}@q' && $<TARGET_FILE:moesim> figures --trace odd.h5 --out . --only entropy-layer,heatmap && test -s entropy-layer.png && test -s heatmap.pdf && test ! -e INJ && test ! -e INJ2 && test ! -e ../INJ && test ! -e ../INJ2")
set_tests_properties(figures.odd_model_name PROPERTIES FIXTURES_REQUIRED fig_trace)

add_test(NAME figures.bad_name COMMAND ${FIG_FAIL} 2 "figures: unknown figure 'nosuchfigure' \\(known: hit-distance, tpot-cache, .*hybrimoe-timeline\\)" $<TARGET_FILE:moesim> figures --only nosuchfigure)
add_test(NAME figures.list COMMAND moesim figures --list)
set_tests_properties(figures.list PROPERTIES PASS_REGULAR_EXPRESSION "hit-distance +fMoE Fig. 4.*moeinf-hit-cache +MoE-Infinity Fig. 11.*hybrimoe-timeline")
