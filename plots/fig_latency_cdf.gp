# fMoE Fig. 10: CDF of end-to-end request latency when serving the trace's
# arrivals online (batch 4, learnt state starts empty).
# Reads dir/latency_cdf.csv (system,latency_s,cdf).
load plots . "/fig_common.gp"
csv = dir . "/latency_cdf.csv"
N = int(system(distinct(csv) . " | wc -l")); array S[N]
do for [i=1:N] { S[i] = system(distinct(csv) . " | sed -n " . i . "p") }
set key outside right center box spacing 1.2 noenhanced
set xlabel "request latency, arrival to last token (s)"
set ylabel "CDF of requests"
set yrange [0:1.02]
set xrange [0:*]
# curves that coincide stay visible: each is drawn thinner than the one before
# it, so a later one runs inside an earlier one
plot for [i=1:N] csv using (strcol(1) eq S[i] ? $2 : 1/0):3 with steps lt i lw 1.5 + 1.5 * (N - i) title S[i]
