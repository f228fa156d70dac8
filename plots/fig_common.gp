# Shared set-up of every plots/fig_<name>.gp (loaded first).  `moesim figures`
# passes through gnuplot -e: dir (the folder holding the CSVs), out (the file
# to write), term (png or pdf), plots (this folder), heading (figure title and
# the paper figure it reproduces) and subtitle (model and platform).
if (!exists("dir")) dir = "."
if (!exists("term")) term = "png"
if (!exists("heading")) heading = "moesim figure"
if (!exists("subtitle")) subtitle = ""
if (!exists("width")) width = 1000
if (!exists("height")) height = 560
if (term eq "pdf") {
    set terminal pdfcairo size (width / 100.0) * 0.85, (height / 100.0) * 0.85 font "DejaVu Sans,9"
} else {
    set terminal pngcairo size width, height font "DejaVu Sans,11"
}
if (!exists("out")) out = "figure." . term
set output out
set datafile separator ","
set datafile missing ""
set title heading . "\n{/*0.85 " . subtitle . "}" enhanced
set grid
set linetype 1 lc rgb "#1b9e77" lw 2 pt 7 ps 1.1
set linetype 2 lc rgb "#d95f02" lw 2 pt 5 ps 1.1
set linetype 3 lc rgb "#7570b3" lw 2 pt 9 ps 1.3
set linetype 4 lc rgb "#e7298a" lw 2 pt 11 ps 1.3
set linetype 5 lc rgb "#000000" lw 2 pt 13 ps 1.3
set linetype 6 lc rgb "#66a61e" lw 2 pt 7 dt 2
set linetype 7 lc rgb "#e6ab02" lw 2 pt 5 dt 2
set linetype 8 lc rgb "#1f78b4" lw 2 pt 9 dt 2
set linetype cycle 8
# The distinct values of a CSV's first column, in order of first appearance:
#   N = int(system(distinct(csv) . " | wc -l")); array S[N]
#   do for [i=1:N] { S[i] = system(distinct(csv) . " | sed -n " . i . "p") }
distinct(f) = sprintf("tail -n +2 '%s' | cut -d, -f1 | awk '!s[$0]++'", f)
