# fMoE Fig. 16: memory held by the Expert Map Store (policy_state_bytes)
# against its capacity, for three model shapes.
# Reads dir/mapstore_memory.csv (model,capacity,state_mb).
load plots . "/fig_common.gp"
csv = dir . "/mapstore_memory.csv"
N = int(system(distinct(csv) . " | wc -l")); array S[N]
do for [i=1:N] { S[i] = system(distinct(csv) . " | sed -n " . i . "p") }
set key outside right center box spacing 1.2 noenhanced
set xlabel "Expert Map Store capacity (maps)"
set ylabel "map store memory (MiB)"
set logscale x 2
set logscale y 2
set xtics (125, 250, 500, 1000)
set xrange [100:1250]
# the figure does not replay the --trace: only the platform is the run's
if (!exists("platform")) platform = subtitle
set title lit(heading) . "\n{/*0.85 a generated trace of each model, on " . lit(platform) . "}" enhanced
plot for [i=1:N] csv using (strcol(1) eq S[i] ? $2 : 1/0):3 with linespoints lt i ps nest(i, N) title S[i]
