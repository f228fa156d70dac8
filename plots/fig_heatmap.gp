# fMoE Fig. 3a: expert activation heatmaps of one request: two consecutive
# decode iterations and the whole request.  Colour: mean routed gate weight.
# Reads dir/heatmap.csv (panel,layer,expert,weight).
width = 1300; height = 520
load plots . "/fig_common.gp"
csv = dir . "/heatmap.csv"
N = int(system(distinct(csv) . " | wc -l")); array S[N]
rows = int(system("tail -n +2 '" . csv . "' | wc -l")) / N  # each panel is one block of rows
do for [i=1:N] { S[i] = system(distinct(csv) . " | sed -n " . i . "p") }
set multiplot layout 1, N title heading . "\n{/*0.85 " . subtitle . "}" enhanced
unset title
unset grid
set palette defined (0 "#ffffff", 0.25 "#c6dbef", 0.5 "#6baed6", 0.75 "#2171b5", 1 "#08306b")
set cbrange [0:1]
set xlabel "MoE layer"
set ylabel "expert"
set tics out
set xtics 4
stats csv using 2:3 nooutput
set xrange [STATS_min_x - 0.5:STATS_max_x + 0.5]
set yrange [STATS_min_y - 0.5:STATS_max_y + 0.5]
if (STATS_max_y < 16) { set ytics 1 } else { set ytics autofreq }
set cblabel "mean routed gate weight"
rows = int(system("tail -n +2 '" . csv . "' | wc -l")) / N  # each panel is one block of rows
do for [i=1:N] {
    set title (i < N ? S[i] . " (fine)" : "whole request (coarse)")
    if (i < N) { unset colorbox } else { set colorbox }
    plot csv every ::((i-1)*rows + 1)::(i*rows) using 2:3:4 with image notitle
}
unset multiplot
