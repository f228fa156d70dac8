/* The row checks' tolerances and the fast path in front of them
 * (trace.c's check_rows, trace_check_fast.c). */
#ifndef MS_TRACE_CHECK_H
#define MS_TRACE_CHECK_H

#include "traces/format/trace.h"

/* Sums of normalised weights / probabilities may be off by float rounding. */
#define MS_SUM_TOL 1e-3
/* FULL traces store topk_w as a copy of probs; allow float rounding only. */
#define MS_TOPK_PROB_TOL 1e-6

/* 1 when every (row, layer) cell of r's selected parts passes the checks of
 * ms_request_check_parts' row loop, so the loop has nothing to report; 0
 * when some cell may fail (or K > 16, which it does not cover): the loop
 * then runs and names the first bad value (or finds none).  It tests the
 * same conditions on the same values (the same double sums, in the same
 * order), branch-free within a cell: a bad cell is never passed.  r's
 * arrays of the selected parts must be present (check_presence first). */
int ms_request_rows_fast_ok(const ms_trace_meta *m, const ms_request *r, unsigned parts);

/* The row loop itself, cell by cell: 0, or -1 with the one-line message
 * naming `where` (the file), the request, row, layer and value. */
int ms_request_rows_check(const ms_trace_meta *m, const ms_request *r, unsigned parts, const char *where,
                          ms_err *err);

#endif
