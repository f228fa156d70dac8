# moesim serverless figure (like Fig. 14 of seed paper 002): billed cost of all
# MoE layers and inverse throughput per deployment, from serverless.csv.
# Variables (gnuplot -e): csv, out.
if (!exists("csv")) csv = "serverless.csv"
if (!exists("out")) out = "serverless.png"
set datafile separator ","
set terminal pngcairo size 1200,480 font "DejaVu Sans,11"
set output out
set multiplot layout 1,2 title "Serverless MoE deployment (billed on the test batch's real routing)"
set style fill solid 0.8 border -1
set boxwidth 0.6
set grid ytics
set xtics rotate by -25
set logscale y
set ylabel "billed cost of all MoE layers (USD, log)"
plot csv using 0:(column("cost_usd")):xtic(1) every ::1 with boxes lc rgb "#1b9e77" notitle
set ylabel "inverse throughput (s per token, log)"
plot csv using 0:(column("inv_throughput_s_per_tok")):xtic(1) every ::1 with boxes lc rgb "#d95f02" notitle
unset multiplot
