/* Verdicts of `moesim claims` from the values of a claim's runs (internal to
 * sim/apps/claims*.c). */
#ifndef MS_CLAIMS_VERDICT_H
#define MS_CLAIMS_VERDICT_H

#include <stddef.h>

#include "sim/apps/claims.h"
#include "sim/apps/claims_table.h"
#include "traces/format/trace.h"

/* v[i * nx + a]: system i of the claim at axis value a (nx = 1 without an
 * axis).  Fills r (values, value text) and returns the verdict. */
ms_verdict cl_values_verdict(const cl_claim *cl, const double *v, size_t nx, ms_claim_result *r);
/* CL_STORE_MB: fMoE's map store of cl->axis_vals[0] maps of the trace's
 * shape against the paper's bound; no run needed. */
void cl_store_verdict(const cl_claim *cl, const ms_trace_meta *meta, ms_claim_result *r, ms_verdict *vd);

#endif
