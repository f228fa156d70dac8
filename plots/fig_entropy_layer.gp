# fMoE Fig. 3b: per-layer Shannon entropy of expert activations, iteration-level
# (fine) vs request-level and trace-level (coarse).
# Reads dir/entropy_layer.csv (layer,iteration,request,trace,h_max).
load plots . "/fig_common.gp"
csv = dir . "/entropy_layer.csv"
set key outside right center box
set xlabel "MoE layer"
set ylabel "entropy of expert activations (bits)"
stats csv using 5 nooutput
set yrange [0:STATS_max * 1.15]
set xtics 4
plot csv using 1:2 with linespoints lt 1 title "iteration level (fine)", \
     '' using 1:3 with linespoints lt 2 title "request level (coarse)", \
     '' using 1:4 with linespoints lt 3 title "whole trace", \
     '' using 1:5 with lines lt 5 dt 3 lw 1.5 title "log2(J): uniform"
