# MoE-Infinity Fig. 11: cache hit ratio against the GPU cache size, the
# classic caches and MoE-Infinity against Belady's bound.
# Reads dir/moeinf_hit_cache.csv (system,cache_experts,cache_gb,hit_rate).
load plots . "/fig_common.gp"
csv = dir . "/moeinf_hit_cache.csv"
N = int(system(distinct(csv) . " | wc -l")); array S[N]
do for [i=1:N] { S[i] = system(distinct(csv) . " | sed -n " . i . "p") }
set key top left box noenhanced
set xlabel "GPU expert-cache size (GB)"
set ylabel "expert hit ratio (%)"
set yrange [0:100]
plot for [i=1:N] csv using (strcol(1) eq S[i] ? $3 : 1/0):(100*$4) with linespoints lt i title S[i]
