# fMoE Fig. 11: mean TPOT against the GPU expert-cache budget, one line per system.
# Reads dir/tpot_cache.csv (system,cache_experts,cache_gb,tpot_ms,hit_rate).
# The budgets are 1/16, 3/32, 1/8, 3/16 and 1/4 of the model's L x J experts
# (16 to 64 of Mixtral-8x7B's 256).
load plots . "/fig_common.gp"
csv = dir . "/tpot_cache.csv"
N = int(system(distinct(csv) . " | wc -l")); array S[N]
do for [i=1:N] { S[i] = system(distinct(csv) . " | sed -n " . i . "p") }
set key outside right center box spacing 1.2 noenhanced
set xlabel "GPU expert-cache budget (GB; 1/16 to 1/4 of the model's L x J experts)"
set ylabel "mean time per output token, TPOT (ms)"
stats csv using 4 nooutput
set yrange [ylow(STATS_max):*]
plot for [i=1:N] csv using (strcol(1) eq S[i] ? $3 : 1/0):4 with linespoints lt i ps nest(i, N) title S[i]
