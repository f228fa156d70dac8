/* The searched part of `moesim trace fit` (traces/synth/fit.h, "searched"):
 * coordinate search of one knob per statistic on seeded trial generations.
 * Internal to traces/synth/fit.c. */
#ifndef MS_FIT_SEARCH_H
#define MS_FIT_SEARCH_H

#include "traces/synth/fit.h"

/* Searches the knobs of r->p (popularity, lengths and shape already set)
 * against r->source, then, where one popularity governs every row (no decode
 * popularities), calibrates r->popularity once against the trial
 * generations' activation shares (r->source_freq; kept only when they come
 * closer: r->calibrated, r->calib_tv); fills r->searched and r->fitted. */
int ms_fit_search(ms_fit_result *r, const ms_fit_options *o, ms_err *err);

#endif
