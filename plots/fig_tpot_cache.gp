# fMoE Fig. 11: mean TPOT against the GPU expert-cache budget, one line per system.
# Reads dir/tpot_cache.csv (system,cache_experts,cache_gb,tpot_ms,hit_rate).
load plots . "/fig_common.gp"
csv = dir . "/tpot_cache.csv"
N = int(system(distinct(csv) . " | wc -l")); array S[N]
do for [i=1:N] { S[i] = system(distinct(csv) . " | sed -n " . i . "p") }
set key outside right center box spacing 1.2 noenhanced
set xlabel "GPU expert-cache budget (GB)"
set ylabel "mean time per output token, TPOT (ms)"
set yrange [0:*]
plot for [i=1:N] csv using (strcol(1) eq S[i] ? $3 : 1/0):4 with linespoints lt i title S[i]
