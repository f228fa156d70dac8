# fMoE Fig. 12b: expert hit rate of fMoE prefetching over LRU, LFU and the fMoE
# cache at three cache sizes.  Reads dir/ablation_cache.csv (method,c16,c32,c64).
load plots . "/fig_common.gp"
csv = dir . "/ablation_cache.csv"
set style data histograms
set style histogram clustered gap 1.5
set style fill solid 0.85 border -1
set key top left box noenhanced
set ylabel "expert hit rate (%; late prefetches are not hits)"
set xlabel "cache replacement policy (prefetcher: fmoe, distance 3)"
set yrange [0:*]
unset grid
set grid ytics
plot csv every ::1 using (100*$2):xtic(1) lt 1 title "16 experts cached", \
     '' every ::1 using (100*$3) lt 2 title "32 experts cached", \
     '' every ::1 using (100*$4) lt 3 title "64 experts cached"
