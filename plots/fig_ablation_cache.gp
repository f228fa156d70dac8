# fMoE Fig. 12b: expert hit rate of fMoE prefetching over LRU, LFU and the fMoE
# cache at three cache sizes, 1/16, 1/8 and 1/4 of the model's L x J experts
# (16, 32, 64 of Mixtral-8x7B's 256).  Reads dir/ablation_cache.csv
# (method,c<n1>,c<n2>,c<n3>: the header names the sizes in experts).
load plots . "/fig_common.gp"
csv = dir . "/ablation_cache.csv"
hdr = system(sprintf("grep -v '^#' '%s' | head -1 | tr -d c", csv))  # method,n1,n2,n3
array C[3]
do for [j=1:3] { C[j] = system(sprintf("echo '%s' | cut -d, -f%d", hdr, j + 1)) }
frac = "1/16 1/8 1/4"
set style fill solid 0.85 border -1
set key outside right top box noenhanced
set ylabel "expert hit rate (%; late prefetches are not hits)"
set xlabel "cache replacement policy (prefetcher: fmoe, distance 3)"
stats csv using (100*$2) nooutput
top = STATS_max
stats csv using (100*$3) nooutput
top = STATS_max > top ? STATS_max : top
stats csv using (100*$4) nooutput
top = STATS_max > top ? STATS_max : top
set yrange [0:(top > 0 ? top : 1) * 1.12]
NR = int(system(rows_of(csv) . " | wc -l"))
set xrange [0.4:NR + 0.6]
unset grid
set grid ytics
set xtics noenhanced
bw = 0.26  # bar width; the three bars of a method sit at -bw, 0, +bw around it
set boxwidth bw * 0.95
# every bar carries its value, so a bar at 0 still shows ($0: the header is row 0, the first method 1)
plot csv using 0:(1/0):xtic(1) notitle, \
     for [j=1:3] csv using ($0 + (j - 2) * bw):(100*column(j + 1)) \
        with boxes lt j title sprintf("%s experts cached (%s of L x J)", C[j], word(frac, j)), \
     for [j=1:3] csv using ($0 + (j - 2) * bw):(100*column(j + 1)):(sprintf("%.1f", 100*column(j + 1))) \
        with labels center offset 0, 0.7 font ",9" notitle
