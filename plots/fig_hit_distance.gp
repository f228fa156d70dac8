# fMoE Fig. 4: expert hit rate against prefetch distance, one line per system
# (left), and the prefetch recall behind it (right: activated experts a
# prefetch covered, arriving in time or late).
# Reads dir/hit_distance.csv (system,distance,hit_rate,recall).
width = 1300; height = 560
load plots . "/fig_common.gp"
csv = dir . "/hit_distance.csv"
N = int(system(distinct(csv) . " | wc -l")); array S[N]
do for [i=1:N] { S[i] = system(distinct(csv) . " | sed -n " . i . "p") }
stats csv using (100 * $3) nooutput  # before any range is set: stats keeps to them
top3 = STATS_max
stats csv using (100 * $4) nooutput
top4 = STATS_max
set multiplot title titled("") enhanced
unset title
set xlabel "prefetch distance d (MoE layers ahead)"
set xtics 1
set xrange [0.7:5.3]
set size 0.34, 0.9
set origin 0.0, 0.0
set ylabel "expert hit rate (%; late prefetches are not hits)"
set key off
near0 = 0.015 * top3
set yrange [ylow(top3):*]
plot for [i=1:N] csv using (strcol(1) eq S[i] ? dodge($2, 100 * $3, i, N, 0.05) : 1/0):(100 * $3) \
     with linespoints lt i ps nest(i, N) notitle
set origin 0.34, 0.0
set ylabel "prefetch recall (%; in time or late)"
near0 = 0.015 * top4
set yrange [ylow(top4):*]
set key at screen 0.695, 0.5 left center Left reverse box noenhanced spacing 1.3
set label 1 "points near 0 are spread sideways\nso that every series shows" at screen 0.7, 0.2 left font ",9"
plot for [i=1:N] csv using (strcol(1) eq S[i] ? dodge($2, 100 * $4, i, N, 0.05) : 1/0):(100 * $4) \
     with linespoints lt i ps nest(i, N) title S[i]
unset multiplot
