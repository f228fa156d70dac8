# fMoE Fig. 3b: per-layer Shannon entropy of expert activations, iteration-level
# (fine) vs request-level and trace-level (coarse).
# Reads dir/entropy_layer.csv (layer,iteration,request,trace,h_max; layer from 0).
load plots . "/fig_common.gp"
csv = dir . "/entropy_layer.csv"
set key outside right center box
set xlabel "MoE layer (from 0, as in traces and --events)" noenhanced
set ylabel "entropy of expert activations (bits)"
stats csv using 1 nooutput  # before any range is set: stats keeps to them
lmax = STATS_max
stats csv using 5 nooutput
set yrange [ylow(STATS_max):STATS_max * 1.15]
set xrange [-0.5:lmax + 0.5]
set xtics 0, (lmax >= 40 ? 8 : lmax >= 12 ? 4 : 1)
plot csv using 1:2 with linespoints lt 1 ps nest(1, 3) title "iteration level (fine)", \
     '' using 1:3 with linespoints lt 2 ps nest(2, 3) title "request level (coarse)", \
     '' using 1:4 with linespoints lt 3 ps nest(3, 3) title "whole trace", \
     '' using 1:5 with lines lt 5 dt 3 lw 1.5 title "log2(J): uniform"
