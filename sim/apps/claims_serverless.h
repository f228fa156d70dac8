/* The serverless paper's Fig. 14 claim for `moesim claims` (internal to
 * sim/apps/claims*.c; see claims_serverless.c). */
#ifndef MS_CLAIMS_SERVERLESS_H
#define MS_CLAIMS_SERVERLESS_H

#include "sim/apps/claims.h"
#include "sim/apps/claims_table.h"

/* Runs the comparison on trace with the claim's serverless profile
 * (cl->platform) and the trace's model (or `model`, a profile, when not NULL); values, verdict and, when it does
 * not hold and with_sensitivity, the latency target that flips it.  0, or
 * -1 with err (a trace without prompt token ids, a model the profiles do
 * not have, no feasible plan). */
int cl_serverless_evaluate(const cl_claim *cl, const char *trace, const char *model, unsigned seed, int with_sensitivity,
                           ms_claim_result *r, ms_verdict *vd, ms_err *err);

#endif
