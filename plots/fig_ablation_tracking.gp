# fMoE Fig. 12a: expert hit rate of the pattern-tracking methods, at prefetch
# distances 1, 2 and 3.  Reads dir/ablation_tracking.csv (method,d1,d2,d3).
load plots . "/fig_common.gp"
csv = dir . "/ablation_tracking.csv"
set style data histograms
set style histogram clustered gap 1.5
set style fill solid 0.85 border -1
set boxwidth 0.9
set key top left box noenhanced
set ylabel "expert hit rate (%; late prefetches are not hits)"
set xlabel "pattern-tracking method (all with the fMoE cache)"
set yrange [0:*]
set grid ytics
unset grid
set grid ytics
plot csv every ::1 using (100*$2):xtic(1) lt 1 title "distance 1", \
     '' every ::1 using (100*$3) lt 2 title "distance 2", \
     '' every ::1 using (100*$4) lt 3 title "distance 3"
