/* The searched part of `moesim trace fit` (traces/synth/fit.h, "searched"):
 * coordinate search of one knob per statistic on seeded trial generations.
 * Internal to traces/synth/fit.c. */
#ifndef MS_FIT_SEARCH_H
#define MS_FIT_SEARCH_H

#include "traces/synth/fit.h"

/* Searches the knobs of r->p (popularity, lengths and shape already set)
 * against r->source, fills r->searched and r->fitted. */
int ms_fit_search(ms_fit_result *r, const ms_fit_options *o, ms_err *err);

#endif
