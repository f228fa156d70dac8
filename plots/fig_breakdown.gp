# fMoE Fig. 15: where the time of one decode iteration goes (means over the
# replayed decode iterations).  Asynchronous work (prefetch copies, map
# matching and update) runs beside the iteration and is drawn hatched.
# Reads dir/breakdown.csv (operation,ms,async).
height = 600
load plots . "/fig_common.gp"
csv = dir . "/breakdown.csv"
set style fill solid 0.85 border -1
stats csv using 2 nooutput
set yrange [STATS_records + 0.6:0.4]  # top to bottom; row 0 is the header
set ytics nomirror noenhanced
set xlabel "mean time per decode iteration (ms)"
unset grid
set grid xtics
set xrange [0:*]
set offsets 0, graph 0.15, 0, 0
set lmargin 34
set key outside below center horizontal box
set bmargin 6
# every bar carries its value, so a bar of 0 ms still shows
plot csv using ($3 > 0 ? 1/0 : $2/2):0:($2/2):(0.35):yticlabels(1) with boxxyerror lt 1 title "on the iteration's critical path", \
     '' using ($3 > 0 ? $2/2 : 1/0):0:($2/2):(0.35) with boxxyerror lt 2 fs pattern 4 title "asynchronous (overlaps the iteration)", \
     '' using 2:0:(sprintf(" %.2f ms", $2)) with labels left offset 0.5, 0 notitle
