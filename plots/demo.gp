# moesim demo figure: expert hit rate and TPOT against GPU expert-cache size,
# one line per policy combination.  Reads the long-format CSV `moesim demo`
# writes (columns named in its header).
# Variables (gnuplot -e): csv, out, combos (space-separated), title_text.
if (!exists("csv")) csv = "demo.csv"
if (!exists("out")) out = "demo.png"
if (!exists("combos")) combos = "none+lru"
if (!exists("title_text")) title_text = "moesim demo"

set datafile separator ","
set terminal pngcairo size 1400,640 font "DejaVu Sans,11"
set output out
# two panels side by side, and under them a strip holding one key for both
# (outside the data)
set multiplot title title_text font ",13" noenhanced
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
unset key
set grid
set xlabel "GPU expert cache (experts)"
set xrange [10:70]
set ylabel "expert hit rate (%, late prefetches are not hits)"
# hit rates of 0 stay off the axis, and the points of the series at 0 of combo
# i (of n) are spread sideways by (i - (n + 1) / 2) * 0.8 experts
set yrange [-3:100]
set xlabel "GPU expert cache (experts; points at 0 % are spread sideways)"
n = words(combos)
zx(x, y, i) = y < 1 ? x + (i - (n + 1) / 2.0) * 0.8 : x
# combinations that coincide elsewhere stay visible too: points shrink from
# the first combination (size 1.8) to the last (0.8), a later one inside an earlier
nest(i) = 0.8 + 1.0 * (n - i) / (n > 1 ? n - 1.0 : 1.0)
set origin 0, 0.2
set size 0.5, 0.74
plot for [i=1:n] csv using (strcol(1) eq word(combos, i) ? zx(column("cache_experts"), 100*column("hit_rate"), i) : 1/0):(100*column("hit_rate")) \
     with linespoints lt i ps nest(i) notitle
unset yrange
set xlabel "GPU expert cache (experts)"
set ylabel "mean time per output token (ms)"
set logscale y
set origin 0.5, 0.2
set size 0.5, 0.74
plot for [i=1:n] csv using (strcol(1) eq word(combos, i) ? column("cache_experts") : 1/0):(column("tpot_ms")) \
     with linespoints lt i ps nest(i) notitle
# the key strip: a plot of nothing but the key
set origin 0.05, 0
set size 0.9, 0.2
unset logscale
unset border
unset tics
unset grid
unset xlabel
unset ylabel
set xrange [0:1]
set yrange [0:1]
set key center center horizontal maxrows 3 box noenhanced spacing 1.1 width 2
plot for [i=1:n] NaN with linespoints lt i ps nest(i) title word(combos, i)
unset multiplot
