/* An out-of-tree cache policy (docs/python.md "Out-of-tree C policies"):
 * least recently used over (layer, expert), the built-in `lru` rewritten
 * with nothing of moesim but its installed headers.  Build it against an
 * installed moesim (CMakeLists.txt beside it) and run
 *     moesim run --trace T.h5 --cache plugin:path=./libmoesim_lru_plugin.so --cache-experts 64
 * It gives the same metrics as --cache lru (ctest plugin.example checks). */
#include <stdio.h>
#include <stdlib.h>

#include "policies/plugin.h"

#define NIL UINT32_MAX

typedef struct {
    uint32_t *prev, *next; /* a list over x = l * J + e: head most recent */
    uint8_t *in;
    uint32_t head, tail, J;
} lru;

static void *lru_create(const ms_params *p, const ms_policy_env *env, ms_err *err)
{
    (void)p;
    size_t nx = (size_t)env->meta->L * env->meta->J;
    lru *s = calloc(1, sizeof *s);
    if (s) {
        s->prev = malloc(nx * sizeof *s->prev);
        s->next = malloc(nx * sizeof *s->next);
        s->in = calloc(nx, 1);
    }
    if (!s || !s->prev || !s->next || !s->in) {
        snprintf(err->msg, sizeof err->msg, "lru_plugin: out of memory");
        if (s) {
            free(s->prev);
            free(s->next);
            free(s->in);
        }
        free(s);
        return NULL;
    }
    s->head = s->tail = NIL;
    s->J = env->meta->J;
    return s;
}

static void lru_destroy(void *st)
{
    lru *s = st;
    free(s->prev);
    free(s->next);
    free(s->in);
    free(s);
}

static void unlink_x(lru *s, uint32_t x)
{
    if (s->prev[x] != NIL)
        s->next[s->prev[x]] = s->next[x];
    else
        s->head = s->next[x];
    if (s->next[x] != NIL)
        s->prev[s->next[x]] = s->prev[x];
    else
        s->tail = s->prev[x];
    s->in[x] = 0;
}

static void touch(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    lru *s = st;
    uint32_t x = l * s->J + e;
    if (s->in[x])
        unlink_x(s, x);
    s->prev[x] = NIL;
    s->next[x] = s->head;
    if (s->head != NIL)
        s->prev[s->head] = x;
    s->head = x;
    if (s->tail == NIL)
        s->tail = x;
    s->in[x] = 1;
}

static void evict(void *st, const ms_view *v, uint32_t l, uint32_t e)
{
    (void)v;
    lru *s = st;
    uint32_t x = l * s->J + e;
    if (s->in[x])
        unlink_x(s, x);
}

static int victim(void *st, const ms_view *v, uint32_t *l, uint32_t *e)
{
    lru *s = st;
    for (uint32_t x = s->tail; x != NIL; x = s->prev[x])
        if (ms_view_evictable(v, x / s->J, x % s->J)) {
            *l = x / s->J;
            *e = x % s->J;
            return 1;
        }
    return 0;
}

static const ms_param_spec params[] = {{NULL, 0, NULL, 0, 0, NULL, NULL}};
static const ms_cache_ops ops = {
    .create = lru_create, .destroy = lru_destroy, .on_insert = touch, .on_access = touch, .on_evict = evict,
    .victim = victim,
};

MS_POLICY_PLUGIN = {
    .name = "lru_plugin", .kind = MS_KIND_CACHE, .params = params, .cache = &ops,
    .summary = "least recently used, built out of tree",
};
