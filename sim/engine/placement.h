/* Expert placement on GPUs: which GPU holds (layer, expert) in a run with
 * several GPUs (docs/engine.md "Several GPUs").  A run's `placement` is one
 * of
 *   round-robin  expert x = l * J + e on GPU x mod G (fMoE's hash map)
 *   layer        contiguous layers: layer l on GPU floor(l * G / L)
 *   balanced     per layer, experts by decreasing load (token-row
 *                activations of the training split; the whole trace when
 *                there is none) each onto the GPU with the least load so far
 *                in that layer (ties: fewer experts, then the lower GPU)
 *   FILE         a CSV of lines "layer,expert,gpu" naming every (layer,
 *                expert) exactly once; an optional header line
 *                "layer,expert,gpu", blank lines and '#' comments. */
#ifndef MS_PLACEMENT_H
#define MS_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

#include "sim/core/err.h"

typedef enum { MS_PLACE_ROUND_ROBIN, MS_PLACE_LAYER, MS_PLACE_BALANCED, MS_PLACE_FILE } ms_place_kind;

/* The kind a placement spec names (NULL or "" = round-robin; any other
 * name is a file). */
ms_place_kind ms_placement_kind(const char *spec);

/* gpu_of[L * J] for a named kind; load[L * J] is read by balanced only. */
void ms_placement_fill(ms_place_kind kind, uint32_t L, uint32_t J, uint32_t G, const uint64_t *load, uint8_t *gpu_of);

/* A placement file's text (n bytes, need not end in NUL) into gpu_of[L * J];
 * 0, or -1 with "PATH:LINE: why" (or "PATH: why" for a missing expert). */
int ms_placement_parse(const char *text, size_t n, const char *path, uint32_t L, uint32_t J, uint32_t G,
                       uint8_t *gpu_of, ms_err *err);
/* The same from the file at path. */
int ms_placement_read(const char *path, uint32_t L, uint32_t J, uint32_t G, uint8_t *gpu_of, ms_err *err);

#endif
