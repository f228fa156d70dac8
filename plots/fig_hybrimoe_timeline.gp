# HybriMoE: the GPU, CPU and PCIe timelines of one MoE layer under the hybrid
# scheduler (hybrimoe+mrs+hybrid), one box per interval labelled
# L<layer>/E<expert> (layers from 0, as in --events): a copy may be for a later
# layer than the one the GPU and CPU lanes show.
# Reads dir/hybrimoe_timeline.csv
# (lane,start_ms,end_ms,kind,iteration,layer,expert,label,shown_layer).
# An interval too short to see (under 1 % of the time axis) gets a marker of
# its colour under its lane.
load plots . "/fig_common.gp"
csv = dir . "/hybrimoe_timeline.csv"
it = system(rows_of(csv) . " | head -1 | cut -d, -f5")
ly = system(rows_of(csv) . " | head -1 | cut -d, -f9")
set title titled(", iteration " . it . ", layer " . ly . " (layers from 0, as in --events)") enhanced
stats csv using 2:3 nooutput  # before any range is set: stats keeps to them
span = STATS_max_y - STATS_min_x
narrow = 0.06 * span  # a box narrower than this has its label above it
tiny = 0.01 * span    # and one narrower than this a marker below it
set style fill solid 0.8 border -1
set yrange [-0.7:2.9]
set ytics ("PCIe (H2D copies)" 0, "CPU" 1, "GPU" 2)
set xlabel "time since the layer started (ms); a triangle under a lane marks an interval too short to see"
set key outside bottom center horizontal box noenhanced
set bmargin 7
unset grid
set grid xtics
kc(k) = k eq "dense" ? 1 : k eq "compute_gpu" ? 2 : k eq "compute_cpu" ? 3 : k eq "copy_demand" ? 4 : 8
plot for [k in "dense compute_gpu compute_cpu copy_demand copy_prefetch"] csv \
        using (strcol(4) eq k ? ($2+$3)/2 : 1/0):1:(($3-$2)/2):(0.3) with boxxyerror lt kc(k) \
        title (k eq "dense" ? "non-expert compute" : k eq "compute_gpu" ? "expert on GPU" : k eq "compute_cpu" ? "expert on CPU" : k eq "copy_demand" ? "on-demand copy" : "prefetch copy"), \
     for [k in "dense compute_gpu compute_cpu copy_demand copy_prefetch"] csv \
        using (strcol(4) eq k && $3 - $2 < tiny ? ($2+$3)/2 : 1/0):($1 - 0.38) with points lt kc(k) pt 9 ps 1.6 notitle, \
     csv using (($2+$3)/2):($3 - $2 < narrow ? $1 + 0.42 : $1):8 with labels tc rgb "#000000" font ",9" noenhanced notitle
