# fMoE Fig. 12a: expert hit rate of the pattern-tracking methods, at prefetch
# distances 1, 2 and 3.  Reads dir/ablation_tracking.csv (method,d1,d2,d3; a
# cell is empty where the trace's speculative gates stop short of d).
load plots . "/fig_common.gp"
csv = dir . "/ablation_tracking.csv"
set style fill solid 0.85 border -1
set key outside right top box noenhanced
set ylabel "expert hit rate (%; late prefetches are not hits)"
set xlabel "pattern-tracking method (all with the fMoE cache)"
top = 0
do for [j=2:4] {
    stats csv using (100*column(j)) nooutput
    top = STATS_max > top ? STATS_max : top
}
set yrange [0:(top > 0 ? top : 1) * 1.12]
NR = int(system(rows_of(csv) . " | wc -l"))
set xrange [0.4:NR + 0.6]
unset grid
set grid ytics
set xtics noenhanced
bw = 0.26  # bar width; the three bars of a method sit at -bw, 0, +bw around it
set boxwidth bw * 0.95
# every bar carries its value, so a bar at 0 still shows ($0: the header is
# row 0, the first method 1); "n/a" where the trace's speculative gates stop
# short of the distance (an empty cell)
na = system(rows_of(csv) . " | awk -F, '{ for (j = 2; j <= 4; j++) if ($j == \"\") print NR, j - 1 }'")
do for [k=1:words(na)/2] {
    set label sprintf("n/a") at word(na, 2*k-1) + (word(na, 2*k) - 2) * bw, 0 center offset 0, 0.7 font ",9"
}
plot csv using 0:(1/0):xtic(1) notitle, \
     for [j=1:3] csv using ($0 + (j - 2) * bw):(100*column(j + 1)) with boxes lt j title sprintf("distance %d", j), \
     for [j=1:3] csv using ($0 + (j - 2) * bw):(100*column(j + 1)):(sprintf("%.1f", 100*column(j + 1))) \
        with labels center offset 0, 0.7 font ",9" notitle
