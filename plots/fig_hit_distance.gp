# fMoE Fig. 4: expert hit rate against prefetch distance, one line per system
# (left), and the prefetch recall behind it (right: activated experts a
# prefetch covered, arriving in time or late).
# Reads dir/hit_distance.csv (system,distance,hit_rate,recall).
width = 1300; height = 560
load plots . "/fig_common.gp"
csv = dir . "/hit_distance.csv"
N = int(system(distinct(csv) . " | wc -l")); array S[N]
do for [i=1:N] { S[i] = system(distinct(csv) . " | sed -n " . i . "p") }
set multiplot title heading . "\n{/*0.85 " . subtitle . "}" enhanced
unset title
set xlabel "prefetch distance d (MoE layers ahead)"
set xtics 1
set xrange [0.8:5.2]
set yrange [0:*]
set size 0.34, 0.9
set origin 0.0, 0.0
set ylabel "expert hit rate (%; late prefetches are not hits)"
set key off
plot for [i=1:N] csv using (strcol(1) eq S[i] ? $2 : 1/0):(100 * $3) with linespoints lt i notitle
set origin 0.34, 0.0
set ylabel "prefetch recall (%; in time or late)"
set key at screen 0.695, 0.5 left center Left reverse box noenhanced spacing 1.3
plot for [i=1:N] csv using (strcol(1) eq S[i] ? $2 : 1/0):(100 * $4) with linespoints lt i title S[i]
unset multiplot
