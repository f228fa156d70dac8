# MoE-Infinity Fig. 10: prefetch recall (activated experts served by a
# prefetch that arrived before the gate) against the host-to-GPU bandwidth.
# Reads dir/moeinf_recall_bw.csv (system,bandwidth_gbs,recall).
load plots . "/fig_common.gp"
csv = dir . "/moeinf_recall_bw.csv"
N = int(system(distinct(csv) . " | wc -l")); array S[N]
do for [i=1:N] { S[i] = system(distinct(csv) . " | sed -n " . i . "p") }
stats csv using (100*$3) nooutput  # before any range is set: stats keeps to them
top = STATS_max
set key outside right center box spacing 1.2 noenhanced
set xlabel "host-to-GPU bandwidth (GB/s)"
set ylabel "prefetch recall, in time (% of activated experts)"
set logscale x 2
set xtics (8, 16, 32, 64, 128)
set xrange [6.5:160]
set yrange [ylow(top):*]
near0 = 0.015 * (top > 0 ? top : 1)
set label 1 "points near 0 are spread\nsideways so that every\nseries shows" at screen 0.745, 0.3 left font ",9"
plot for [i=1:N] csv using (strcol(1) eq S[i] ? dodgelog($2, 100*$3, i, N, 0.05) : 1/0):(100*$3) \
     with linespoints lt i ps nest(i, N) title S[i]
