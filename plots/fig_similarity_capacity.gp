# fMoE Fig. 14a: mean best similarity score of fMoE's semantic and trajectory
# searches against the Expert Map Store capacity.
# Reads dir/similarity_capacity.csv (capacity,semantic,trajectory,hit_rate).
load plots . "/fig_common.gp"
csv = dir . "/similarity_capacity.csv"
set key bottom right box
set xlabel "Expert Map Store capacity (maps)"
set ylabel "mean similarity score (cosine)"
set logscale x 2
set yrange [0:1]
plot csv using 1:2 with linespoints lt 1 title "semantic search", \
     '' using 1:3 with linespoints lt 2 title "trajectory search"
