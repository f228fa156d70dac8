# MoE-Infinity Fig. 12: TPOT and prefetch recall of eam+eam against the EAM
# collection's capacity.  Reads dir/moeinf_latency_eamc.csv (capacity,tpot_ms,recall).
load plots . "/fig_common.gp"
csv = dir . "/moeinf_latency_eamc.csv"
stats csv using 2 nooutput  # before any range is set: stats keeps to them
top2 = STATS_max
stats csv using (100*$3) nooutput
top3 = STATS_max
set key outside below center horizontal box
set bmargin 6
set xlabel "EAM collection capacity (EAMs)"
set ylabel "mean time per output token, TPOT (ms)"
set y2label "prefetch recall, in time or late (%)"
set logscale x 2
set xtics (1, 2, 3, 4, 6, 8, 16)
set xrange [0.9:18]
set ytics nomirror
set y2tics
set yrange [ylow(top2):*]
set y2range [ylow(top3):*]
plot csv using 1:2 with linespoints lt 1 ps nest(1, 2) axes x1y1 title "TPOT (left axis)", \
     '' using 1:(100*$3) with linespoints lt 2 ps nest(2, 2) axes x1y2 title "prefetch recall (right axis)"
