# `moesim published`: predicted vs measured, log-log, one point per row that
# ran; y = x and the factor-1.25 band; point type by system (the words of
# `systems`, in the order of their system_index), filled for calibration
# rows, open for evaluation rows.  Reads dir/published.csv
# (row,system,role,metric,measured,predicted,ratio,abs_ln_ratio,system_index,calibration,...).
if (!exists("width")) width = 1000
if (!exists("height")) height = 800
load plots . "/fig_common.gp"
csv = dir . "/published.csv"
if (!exists("systems")) systems = ""
set datafile separator ","
# one square range holding every point, a factor 2 beyond them (also for a single row)
stats csv using 5 nooutput name "M"
stats csv using 6 nooutput name "P"
lo = (M_min < P_min ? M_min : P_min) / 2
hi = (M_max > P_max ? M_max : P_max) * 2
set xrange [lo:hi]
set yrange [lo:hi]
set logscale xy
set xlabel "measured (tok/s or ms, the row's metric)"
set ylabel "moesim's prediction"
set key outside right top box noenhanced
set grid
set size ratio -1
f(x) = x
plot csv using 5:($6 > 0 ? $6 : 1/0) with points pt 0 notitle, \
     f(x) with lines lc rgb "black" title "y = x", \
     1.25 * x with lines dt 2 lc rgb "gray40" title "factor 1.25", \
     x / 1.25 with lines dt 2 lc rgb "gray40" notitle, \
     for [s = 0:words(systems) - 1] csv using ($9 == s && $10 == 1 ? $5 : 1/0):6 with points pt 2 * (s % 7) + 5 \
         ps 1.5 lc s + 1 title word(systems, s + 1) . " (calibration)", \
     for [s = 0:words(systems) - 1] csv using ($9 == s && $10 == 0 ? $5 : 1/0):6 with points pt 2 * (s % 7) + 4 \
         ps 1.5 lc s + 1 title word(systems, s + 1) . " (evaluation)"
