# HybriMoE: the GPU, CPU and PCIe timelines of one MoE layer under the hybrid
# scheduler (hybrimoe+mrs+hybrid), one box per interval labelled with its expert.
# Reads dir/hybrimoe_timeline.csv (lane,start_ms,end_ms,expert,kind,iteration,layer).
load plots . "/fig_common.gp"
csv = dir . "/hybrimoe_timeline.csv"
it = system("tail -n +2 '" . csv . "' | head -1 | cut -d, -f6")
ly = system("tail -n +2 '" . csv . "' | head -1 | cut -d, -f7")
set title heading . "\n{/*0.85 " . subtitle . ", iteration " . it . ", layer " . ly . "}" enhanced
set style fill solid 0.8 border -1
set yrange [-0.7:2.9]
set ytics ("PCIe (H2D copies)" 0, "CPU" 1, "GPU" 2)
set xlabel "time since the layer started (ms)"
set key outside bottom center horizontal box noenhanced
set bmargin 7
unset grid
set grid xtics
kc(k) = k eq "dense" ? 1 : k eq "compute_gpu" ? 2 : k eq "compute_cpu" ? 3 : k eq "copy_demand" ? 4 : 8
plot for [k in "dense compute_gpu compute_cpu copy_demand copy_prefetch"] csv \
        using (strcol(5) eq k ? ($2+$3)/2 : 1/0):1:(($3-$2)/2):(0.3) with boxxyerror lt kc(k) \
        title (k eq "dense" ? "non-expert compute" : k eq "compute_gpu" ? "expert on GPU" : k eq "compute_cpu" ? "expert on CPU" : k eq "copy_demand" ? "on-demand copy" : "prefetch copy"), \
     csv using (($2+$3)/2):1:($4 >= 0 ? sprintf("%d", $4) : "") with labels tc rgb "#000000" notitle
