# MoE-Infinity Fig. 11: cache hit ratio against the GPU cache size, the
# classic caches and MoE-Infinity against Belady's bound.  The sizes are
# 1/16 to 1/4 of the model's L x J experts (16 to 64 of Mixtral-8x7B's 256).
# Reads dir/moeinf_hit_cache.csv (system,cache_experts,cache_gb,hit_rate).
load plots . "/fig_common.gp"
csv = dir . "/moeinf_hit_cache.csv"
N = int(system(distinct(csv) . " | wc -l")); array S[N]
do for [i=1:N] { S[i] = system(distinct(csv) . " | sed -n " . i . "p") }
stats csv using 3 nooutput  # before any range is set: stats keeps to them
dx = (STATS_max - STATS_min) * 0.012
set key outside right center box spacing 1.2 noenhanced
set xlabel "GPU expert-cache size (GB; 1/16 to 1/4 of the model's L x J experts)"
set ylabel "expert hit ratio (%)"
set yrange [ylow(100):100]
near0 = 1.5
set label 1 "points near 0 are spread\nsideways so that every\nseries shows" at screen 0.745, 0.22 left font ",9"
plot for [i=1:N] csv using (strcol(1) eq S[i] ? dodge($3, 100*$4, i, N, dx) : 1/0):(100*$4) with linespoints lt i ps nest(i, N) title S[i]
