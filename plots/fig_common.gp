# Shared set-up of every plots/fig_<name>.gp (loaded first).  `moesim figures`
# passes through gnuplot -e: dir (the folder holding the CSVs), out (the file
# to write), term (png or pdf), plots (this folder), heading (figure title and
# the paper figure it reproduces), subtitle ("<model> on <platform>"), and
# model and platform alone.
# Conventions of every figure: layers are numbered from 0 (as in traces,
# --events and `trace stats`) and axes say so; keys sit outside the plot
# area; series at 0 stay visible (near0 and dodge below).
if (!exists("dir")) dir = "."
if (!exists("term")) term = "png"
if (!exists("heading")) heading = "moesim figure"
if (!exists("subtitle")) subtitle = ""
if (!exists("width")) width = 1000
if (!exists("height")) height = 560
if (term eq "pdf") {
    # the PNG's layout: a 9 pt font on a page width*9/11 pt wide is the
    # PNG's 11 px font on width px, so keys and labels fit the same way
    set terminal pdfcairo size width / 88.0, height / 88.0 font "DejaVu Sans,9"
} else {
    set terminal pngcairo size width, height font "DejaVu Sans,11"
}
if (!exists("out")) out = "figure." . term
set output out
set datafile separator ","
set datafile missing ""
# Names from the data (model, platform, systems) are printed literally: keys
# and tic labels that show them are noenhanced, and lit(s) escapes the
# enhanced-text markup (_ ^ { } @ & ~ \) of a string inside an enhanced title.
lit(s) = strlen(s) == 0 ? "" : ((strstrt("_^{}@&~\\", s[1:1]) > 0 ? "\\" : "") . s[1:1] . lit(s[2:strlen(s)]))
# The two-line title: heading, then subtitle (+ extra) in a smaller font.
titled(extra) = lit(heading) . "\n{/*0.85 " . lit(subtitle . extra) . "}"
set title titled("") enhanced
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
# Series at or near 0 must not hide in the x axis or behind one another:
# rate axes start a little below 0 (ylow), and a point of series i (of n)
# whose y is under near0 moves sideways by (i - (n + 1) / 2) * dx, its y kept
# (dodgelog: by that many times f octaves, for log2 x axes).
near0 = 0
ylow(top) = -0.03 * (top > 0 ? top : 1)
dodge(x, y, i, n, dx) = y < near0 ? x + (i - (n + 1) / 2.0) * dx : x
dodgelog(x, y, i, n, f) = y < near0 ? x * 2 ** ((i - (n + 1) / 2.0) * f) : x
# Series that coincide elsewhere stay visible too: series i of n is drawn with
# points of size nest(i, n), from 1.8 for the first down to 0.8 for the last, so
# a later point sits inside an earlier one.
nest(i, n) = 0.8 + 1.0 * (n - i) / (n > 1 ? n - 1.0 : 1.0)
# A shell pipeline printing the data rows of a CSV: without its '# moesim'
# provenance line and its header.
rows_of(f) = sprintf("grep -v '^#' '%s' | tail -n +2", f)
# The distinct values of a CSV's first column, in order of first appearance:
#   N = int(system(distinct(csv) . " | wc -l")); array S[N]
#   do for [i=1:N] { S[i] = system(distinct(csv) . " | sed -n " . i . "p") }
distinct(f) = rows_of(f) . " | cut -d, -f1 | awk '!s[$0]++'"
