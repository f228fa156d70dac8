/* Executor ops (sim/engine/exec.h) as the engine issues them, GPU cache
 * slots (eviction, making room, admission) and the host memory tier. */
#include <math.h>
#include <stdlib.h>

#include "sim/engine/state.h"

/* the executor (sim/exec.h): every op goes through it, and its times are
 * the engine's; a failure (only real backends fail) ends the run */

int eng_exec_failed(ms_view *v)
{
    v->failed = 1;
    return -1;
}

void eng_release_slot(ms_view *v, uint32_t x)
{
    if (!v->failed && ms_exec_release(v->exec, x / v->J, x % v->J, v->err))
        eng_exec_failed(v);
}


/* ------------------------------------------------------------------ */
/* cache slots */

void eng_evict(ms_view *v, uint32_t x)
{
    double bytes = v->layer_bytes[x / v->J];
    const char *unused = v->from_prefetch[x] == PF_AHEAD ? "before_target"
                         : v->from_prefetch[x] == PF_PASSED ? "after_target"
                                                            : "no";
    v->cached[x] = 0;
    v->used_units -= eng_unit_of(v, x);
    v->used_bytes -= bytes;
    eng_gpu_account(v, x, -1);
    if (v->from_prefetch[x]) {
        v->m->prefetch_evicted_unused += v->from_prefetch[x] == PF_AHEAD;
        v->from_prefetch[x] = 0;
        v->m->prefetch_wasted++;
        v->m->pcie_bytes_wasted += bytes;
    }
    if (v->cache->cache->on_evict)
        v->cache->cache->on_evict(v->cache_st, v, x / v->J, x % v->J);
    eng_event_tagged(v, "evict", v->clock, v->clock, x, bytes, unused);
    if (!eng_evict_defers_release(v, x))
        eng_release_slot(v, x);
}

/* Frees room for x by evicting the cache policy's victims; -1 when nothing
 * evictable is left and x still does not fit. */
static int policy_full(ms_view *v, uint32_t x)
{
    return v->cache->cache->full && v->cache->cache->full(v->cache_st, v, x / v->J, x % v->J);
}

int eng_make_room(ms_view *v, uint32_t x)
{
    double need = eng_unit_of(v, x);
    v->incoming = x;
    int rc = 0;
    while (eng_over_capacity(v, x, need) || policy_full(v, x)) {
        uint32_t l, e;
        if (!v->cache->cache->victim(v->cache_st, v, &l, &e)) {
            rc = -1;
            break;
        }
        if (!ms_view_evictable(v, l, e)) {
            ms_fail(v->err, "internal error: cache policy '%s' chose expert (%u, %u), which is not evictable",
                    v->cache->name, l, e);
            v->failed = 1;
            rc = -1;
            break;
        }
        eng_evict(v, l * v->J + e);
    }
    v->incoming = UINT32_MAX;
    return rc;
}

void eng_occupy(ms_view *v, uint32_t x)
{
    v->cached[x] = 1;
    v->used_units += eng_unit_of(v, x);
    v->used_bytes += v->layer_bytes[x / v->J];
    eng_gpu_account(v, x, 1);
    if (v->used_bytes > v->m->gpu_cache_peak_bytes)
        v->m->gpu_cache_peak_bytes = v->used_bytes;
    if (v->cache->cache->on_insert)
        v->cache->cache->on_insert(v->cache_st, v, x / v->J, x % v->J);
}

int eng_cache_admits(ms_view *v, uint32_t x)
{
    return !v->cache->cache->admit || v->cache->cache->admit(v->cache_st, v, x / v->J, x % v->J);
}

/* ------------------------------------------------------------------ */
/* host-memory tier: LRU over experts; misses come from SSD */

void eng_host_touch(ms_view *v, uint32_t x)
{
    v->host_used_at[x] = ++v->host_clock;
}

/* Returns 1 when x had to be read from SSD. */
int eng_host_fetch(ms_view *v, uint32_t x)
{
    if (v->host_cap <= 0)
        return 0;
    if (v->in_host[x]) {
        eng_host_touch(v, x);
        return 0;
    }
    double bytes = v->layer_bytes[x / v->J];
    while (v->host_used + bytes > v->host_cap) {
        uint32_t victim = UINT32_MAX;
        for (uint32_t y = 0; y < v->NX; y++)
            if (v->in_host[y] && (victim == UINT32_MAX || v->host_used_at[y] < v->host_used_at[victim]))
                victim = y;
        if (victim == UINT32_MAX)
            break;
        v->in_host[victim] = 0;
        v->host_used -= v->layer_bytes[victim / v->J];
    }
    v->in_host[x] = 1;
    v->host_used += bytes;
    eng_host_touch(v, x);
    return 1;
}
