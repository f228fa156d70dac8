# fMoE Fig. 14a: mean best similarity score of fMoE's semantic and trajectory
# searches against the Expert Map Store capacity.
# Reads dir/similarity_capacity.csv (capacity,semantic,trajectory,hit_rate).
load plots . "/fig_common.gp"
csv = dir . "/similarity_capacity.csv"
set key outside right center box spacing 1.2
set xlabel "Expert Map Store capacity (maps)"
set ylabel "mean similarity score (cosine)"
set logscale x 2
set yrange [ylow(1):1]
near0 = 0.015
plot csv using (dodgelog($1, $2, 1, 2, 0.04)):2 with linespoints lt 1 ps nest(1, 2) title "semantic search", \
     '' using (dodgelog($1, $3, 2, 2, 0.04)):3 with linespoints lt 2 ps nest(2, 2) title "trajectory search"
