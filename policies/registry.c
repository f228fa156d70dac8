/* The one policy registry: the CLI, `moesim list`, the docs and the tests
 * all iterate this table.  Adding a policy = its file + one line here. */
#include <string.h>

#include "policies/policy.h"

extern const ms_policy_desc ms_policy_prefetch_none, ms_policy_prefetch_oracle, ms_policy_prefetch_topk_id,
    ms_policy_prefetch_traced_topk;
extern const ms_policy_desc ms_policy_prefetch_fmoe, ms_policy_cache_fmoe;
extern const ms_policy_desc ms_policy_prefetch_speculative, ms_policy_prefetch_transition;
extern const ms_policy_desc ms_policy_cache_lru_slots, ms_policy_cache_neighbor;
extern const ms_policy_desc ms_policy_cache_lru, ms_policy_cache_lfu, ms_policy_cache_fifo, ms_policy_cache_belady,
    ms_policy_cache_static;
extern const ms_policy_desc ms_policy_sched_gpu;
extern const ms_policy_desc ms_policy_prefetch_eam, ms_policy_cache_eam;
extern const ms_policy_desc ms_policy_prefetch_hybrimoe, ms_policy_cache_mrs, ms_policy_sched_hybrid,
    ms_policy_sched_fiddler;
extern const ms_policy_desc ms_policy_prefetch_layer_stream, ms_policy_cache_pin_layers, ms_policy_sched_cpu_layers,
    ms_policy_sched_cpu_all;

const ms_policy_desc *const ms_policy_registry[] = {
    &ms_policy_prefetch_none,
    &ms_policy_prefetch_oracle,
    &ms_policy_prefetch_topk_id,
    &ms_policy_prefetch_traced_topk,
    &ms_policy_prefetch_fmoe,
    &ms_policy_prefetch_speculative,
    &ms_policy_prefetch_transition,
    &ms_policy_prefetch_hybrimoe,
    &ms_policy_prefetch_eam,
    &ms_policy_prefetch_layer_stream,
    &ms_policy_cache_lru,
    &ms_policy_cache_lfu,
    &ms_policy_cache_fifo,
    &ms_policy_cache_belady,
    &ms_policy_cache_static,
    &ms_policy_cache_fmoe,
    &ms_policy_cache_lru_slots,
    &ms_policy_cache_neighbor,
    &ms_policy_cache_mrs,
    &ms_policy_cache_eam,
    &ms_policy_cache_pin_layers,
    &ms_policy_sched_gpu,
    &ms_policy_sched_hybrid,
    &ms_policy_sched_fiddler,
    &ms_policy_sched_cpu_layers,
    &ms_policy_sched_cpu_all,
    NULL,
};

static ms_policy_finder extra_finder;

void ms_policy_set_finder(ms_policy_finder finder) { extra_finder = finder; }

const ms_policy_desc *ms_policy_find(ms_policy_kind kind, const char *name)
{
    for (int i = 0; ms_policy_registry[i]; i++)
        if (ms_policy_registry[i]->kind == kind && !strcmp(ms_policy_registry[i]->name, name))
            return ms_policy_registry[i];
    return extra_finder ? extra_finder(kind, name) : NULL;
}

const char *ms_policy_kind_name(ms_policy_kind kind)
{
    switch (kind) {
    case MS_KIND_PREFETCH: return "prefetch";
    case MS_KIND_CACHE: return "cache";
    case MS_KIND_SCHED: return "sched";
    }
    return "?";
}
