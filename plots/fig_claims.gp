# `moesim claims`: every numeric comparison, the paper's value beside
# moesim's (reductions and gains in %, recall in %, gaps in points, the best
# distance), one pair of bars per item.  Reads dir/claims_values.csv
# (item,paper,moesim,verdict).
# one pair of bars per item and long item names: a wider, taller canvas than the default
if (!exists("width")) width = 1700
if (!exists("height")) height = 820
load plots . "/fig_common.gp"
csv = dir . "/claims_values.csv"
set style fill solid 0.85 border -1
set key outside right top box noenhanced
set ylabel "value (% for reductions, gains, recall; points for gaps)"
NR = int(system(rows_of(csv) . " | wc -l"))
set xrange [0.4:NR + 0.6]  # $0: the header is row 0, the first item 1
set xtics rotate by 45 right noenhanced font ",9"
set grid ytics
set yrange [*<0:0<*]  # the axis always holds 0: a bar's height is its value, never cut at the data's minimum
set xzeroaxis
bw = 0.38
set boxwidth bw * 0.95
set bmargin 17
set lmargin 22
plot csv using ($0 - bw / 2):2:xtic(1) with boxes lt 1 title "paper", \
     csv using ($0 + bw / 2):3 with boxes lt 2 title "moesim", \
     csv using ($0 + bw / 2):3:(sprintf("%.0f", $3)) with labels center offset 0, 0.7 font ",8" notitle
