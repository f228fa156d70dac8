# fMoE Fig. 3a: expert activation heatmaps of one request: two consecutive
# decode iterations and the whole request.  Colour: mean routed gate weight.
# Reads dir/heatmap.csv (panel,layer,expert,weight; layers and experts from 0).
width = 1300; height = 540
load plots . "/fig_common.gp"
csv = dir . "/heatmap.csv"
N = int(system(distinct(csv) . " | wc -l")); array S[N]
do for [i=1:N] { S[i] = system(distinct(csv) . " | sed -n " . i . "p") }
rows = int(system(rows_of(csv) . " | wc -l")) / N  # each panel is one block of rows
# fixed panel margins leave room on the right for the labelled colour bar
set multiplot layout 1, N title titled("") enhanced margins 0.06, 0.88, 0.13, 0.84 spacing 0.05, 0
unset title
unset grid
set palette defined (0 "#ffffff", 0.25 "#c6dbef", 0.5 "#6baed6", 0.75 "#2171b5", 1 "#08306b")
set cbrange [0:1]
set xlabel "MoE layer (from 0)"
set ylabel "expert (from 0)"
set tics out nomirror
stats csv using 2:3 nooutput
set xrange [STATS_min_x - 0.5:STATS_max_x + 0.5]
set yrange [STATS_min_y - 0.5:STATS_max_y + 0.5]
set xtics 0, (STATS_max_x >= 40 ? 8 : STATS_max_x >= 12 ? 4 : 1)
if (STATS_max_y < 16) { set ytics 0, 1 } else { set ytics autofreq }
set cblabel "mean routed gate weight" offset 1, 0
set colorbox user origin screen 0.905, screen 0.13 size screen 0.015, screen 0.71
do for [i=1:N] {
    set title (i < N ? S[i] . " (fine)" : "whole request (coarse)") noenhanced
    if (i < N) { unset colorbox } else { set colorbox }
    if (i > 1) { unset ylabel }
    plot csv every ::((i-1)*rows + 1)::(i*rows) using 2:3:4 with image notitle
}
unset multiplot
