# moesim demo figure: expert hit rate and TPOT against GPU expert-cache size,
# one line per policy combination.  Reads the long-format CSV `moesim demo`
# writes (columns named in its header).
# Variables (gnuplot -e): csv, out, combos (space-separated), title_text.
if (!exists("csv")) csv = "demo.csv"
if (!exists("out")) out = "demo.png"
if (!exists("combos")) combos = "none+lru"
if (!exists("title_text")) title_text = "moesim demo"

set datafile separator ","
set terminal pngcairo size 1400,560 font "DejaVu Sans,11"
set output out
set multiplot layout 1,2 title title_text font ",13"
set lmargin 10
# twelve distinct colours; dashed lines for runs with a prefetcher
set linetype 1 lc rgb "#1b9e77" lw 2 pt 7
set linetype 2 lc rgb "#d95f02" lw 2 pt 5
set linetype 3 lc rgb "#7570b3" lw 2 pt 9
set linetype 4 lc rgb "#e7298a" lw 2 pt 11
set linetype 5 lc rgb "#000000" lw 2 pt 13
set linetype 6 lc rgb "#66a61e" lw 2 pt 7 dt 2
set linetype 7 lc rgb "#e6ab02" lw 2 pt 5 dt 2
set linetype 8 lc rgb "#a6761d" lw 2 pt 9 dt 2
set linetype 9 lc rgb "#1f78b4" lw 2 pt 13 dt 2
set linetype 10 lc rgb "#b15928" lw 2 pt 11 dt 2
set linetype 11 lc rgb "#6a3d9a" lw 2 pt 7 dt 4
set linetype 12 lc rgb "#999999" lw 2 pt 5 dt 4
set linetype cycle 12
set key outside right top box spacing 1.1
set grid
set xlabel "GPU expert cache (experts)"
set ylabel "expert hit rate (%, late prefetches are not hits)"
set yrange [0:100]
plot for [c in combos] csv using (strcol(1) eq c ? column("cache_experts") : 1/0):(100*column("hit_rate")) \
     with linespoints title c
unset yrange
unset key
set ylabel "mean time per output token (ms)"
set logscale y
plot for [c in combos] csv using (strcol(1) eq c ? column("cache_experts") : 1/0):(column("tpot_ms")) \
     with linespoints notitle
unset multiplot
