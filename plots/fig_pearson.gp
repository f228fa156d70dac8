# fMoE Fig. 8: Pearson correlation between the similarity score of the map
# fMoE searched and the expert hit rate, per decode iteration; right: the
# samples behind the trajectory coefficient.
# Reads dir/pearson.csv (score,pearson,iterations) and dir/pearson_iterations.csv.
width = 1200; height = 520
load plots . "/fig_common.gp"
csv = dir . "/pearson.csv"
its = dir . "/pearson_iterations.csv"
set multiplot layout 1, 2 title titled("") enhanced
unset title
set style fill solid 0.85 border -1
set boxwidth 0.5
set yrange [-1:1]
set ylabel "Pearson coefficient (similarity vs hit rate)"
set xlabel "similarity score"
set xrange [0.4:2.6]
unset grid
set grid ytics
set title "coefficient over decode iterations"
plot csv every ::1 using ($0 + 1):2:xtic(1) with boxes lt 1 notitle, \
     '' every ::1 using ($0 + 1):($2 >= 0 ? $2 + 0.08 : $2 - 0.08):(sprintf("%.2f (n = %d)", $2, $3)) with labels notitle
set title "per decode iteration"
set grid
set xrange [*:*]
set yrange [ylow(100):100]  # hit rates of 0 stay off the axis
set xlabel "trajectory similarity score, mean of the iteration's searches (cosine)"
set ylabel "expert hit rate of the iteration (%)"
plot its using (strcol(2) eq "decode" ? $8 : 1/0):(100*$6) with points pt 7 ps 0.35 lc rgb "#7570b3" notitle
unset multiplot
