# fMoE Fig. 3c: mean entropy over layers of a request's activations aggregated
# over its first i iterations.  Reads dir/entropy_iters.csv
# (iterations,all,decode,requests,h_max).
load plots . "/fig_common.gp"
csv = dir . "/entropy_iters.csv"
set key outside right center box spacing 1.2
set xlabel "iterations aggregated (from the start of the request)"
set ylabel "mean entropy over layers (bits)"
stats csv using 5 nooutput
set yrange [ylow(STATS_max):STATS_max * 1.15]
set logscale x 2
plot csv using 1:3 with lines lt 1 lw 2.5 title "decode steps only (no prefill)", \
     '' using 1:2 with lines lt 2 lw 2.5 title "all iterations (prefill first)", \
     '' using 1:5 with lines lt 5 dt 3 lw 1.5 title "log2(J): uniform"
