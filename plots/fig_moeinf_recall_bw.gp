# MoE-Infinity Fig. 10: prefetch recall (activated experts served by a
# prefetch that arrived before the gate) against the host-to-GPU bandwidth.
# Reads dir/moeinf_recall_bw.csv (system,bandwidth_gbs,recall).
load plots . "/fig_common.gp"
csv = dir . "/moeinf_recall_bw.csv"
N = int(system(distinct(csv) . " | wc -l")); array S[N]
do for [i=1:N] { S[i] = system(distinct(csv) . " | sed -n " . i . "p") }
set key top left box noenhanced
set xlabel "host-to-GPU bandwidth (GB/s)"
set ylabel "prefetch recall, in time (% of activated experts)"
set logscale x 2
set xtics (8, 16, 32, 64, 128)
set xrange [6.5:160]
set yrange [0:*]
plot for [i=1:N] csv using (strcol(1) eq S[i] ? $2 : 1/0):(100*$3) with linespoints lt i title S[i]
