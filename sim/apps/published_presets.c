/* The presets of `moesim published` (see published_presets.h; each
 * system's reasoning and sources in docs/published.md "Presets" and
 * docs/published-sources.md §E). */
#include "sim/apps/published_presets.h"

#include <math.h>
#include <stdio.h>
#include <string.h>


#define KB(k) (1u << (k))

static const ms_pub_preset presets[] = {
    {"no-cache", "mixtral-offloading", 0,
     "every selected expert fetched on demand, nothing kept (Mixtral-Offloading's W/o LRU cache & pre-loading)",
     "arXiv 2312.17238 Table 2; dvmazur/mixtral-offloading@ce54518 src/expert_cache.py"},
    {"mixtral-offloading", "mixtral-offloading", KB(MS_PUB_SLOTS_PER_LAYER) | KB(MS_PUB_PREFETCH),
     "per-layer LRU of slots_per_layer experts (one packed copy per expert); prefetch = 1: speculative pre-loading "
     "of the next layer's guessed experts",
     "dvmazur/mixtral-offloading@ce54518 src/expert_cache.py l.33-52, 120-201; src/build_model.py l.204-235"},
    {"hf-accelerate", "hf-accelerate", KB(MS_PUB_GPU_EXPERT_GB),
     "device_map=\"auto\": the MoE layers that do not fit gpu_expert_gb (else the GPU's room for experts, less one "
     "layer's buffer) copied whole before each forward, on the compute stream (synchronous); the rest resident",
     "huggingface/accelerate src/accelerate/utils/modeling.py infer_auto_device_map; src/accelerate/hooks.py "
     "AlignDevicesHook.pre_forward"},
    {"deepspeed-zero3", "deepspeed", 0, "every expert of the next MoE layer fetched ahead on a side stream (overlapped)",
     "microsoft/DeepSpeed deepspeed/runtime/zero/partitioned_param_coordinator.py fetch_sub_module"},
    {"vllm-cpu-offload", "vllm", KB(MS_PUB_CPU_OFFLOAD_GB),
     "cpu_offload_gb of weights (whole layers from layer 0) streamed every forward pass, the rest resident",
     "vllm-project/vllm@d30d0c1 vllm/model_executor/models/utils.py maybe_offload_to_cpu, make_layers"},
    {"moe-infinity", "moe-infinity", KB(MS_PUB_GPU_EXPERT_GB),
     "activation-aware expert prefetching and caching (EAM) in gpu_expert_gb of GPU memory",
     "EfficientMoE/MoE-Infinity@cca059c; arXiv 2401.14361 §4-5"},
    {"fmoe", "hf-eager", KB(MS_PUB_GPU_EXPERT_GB),
     "semantic- and trajectory-based expert maps guide prefetching and caching in gpu_expert_gb", "seed 001 (fMoE) §4"},
    {"hybrimoe", "ktransformers", KB(MS_PUB_GPU_EXPERT_GB) | KB(MS_PUB_CPU_THREADS),
     "CPU-GPU hybrid: missed experts split between the CPU and copies by a simulated schedule, MRS cache of "
     "gpu_expert_gb",
     "PKU-SEC-Lab/HybriMoE@508a85b README; seed 003 §4"},
    {"fiddler", "fiddler", KB(MS_PUB_GPU_EXPERT_GB) | KB(MS_PUB_CPU_THREADS),
     "the most popular experts resident in gpu_expert_gb; a missed expert computed on the CPU",
     "efeslab/fiddler@227715b src/fiddler/mixtral.py l.14, 38-39, 505-654"},
    {"ktransformers", "ktransformers", KB(MS_PUB_CPU_THREADS),
     "every routed expert computed on the CPU; attention, gate and shared experts on the GPU",
     "kvcache-ai/ktransformers@95009ea optimize_rules/DeepSeek-V3-Chat.yaml l.31-55"},
    {"llama-cpp", "llama-cpp", KB(MS_PUB_CPU_MOE_LAYERS) | KB(MS_PUB_CPU_THREADS),
     "--n-cpu-moe N: the routed experts of the first cpu_moe_layers layers on the CPU, all else on the GPU",
     "ggml-org/llama.cpp PR #15077; common/arg.cpp llm_ffn_exps_block_regex"},
};
#define N_PRESETS (sizeof presets / sizeof presets[0])

const ms_pub_preset *ms_pub_preset_find(const char *system)
{
    for (size_t i = 0; i < N_PRESETS; i++)
        if (!strcmp(presets[i].system, system))
            return &presets[i];
    return NULL;
}

const char *ms_pub_preset_names(char *buf, size_t n)
{
    size_t u = 0;
    buf[0] = 0;
    for (size_t i = 0; i < N_PRESETS && u < n; i++)
        u += (size_t)snprintf(buf + u, n - u, "%s%s", i ? ", " : "", presets[i].system);
    return buf;
}

void ms_pub_presets_list(FILE *out)
{
    for (size_t i = 0; i < N_PRESETS; i++) {
        fprintf(out, "%-18s framework %-18s knobs:", presets[i].system, presets[i].framework);
        int any = 0;
        for (int k = 0; k < MS_PUB_KNOB_N; k++)
            if (presets[i].knobs >> k & 1) {
                fprintf(out, "%s %s", any ? "," : "", ms_pub_knob_name((ms_pub_knob)k));
                any = 1;
            }
        fprintf(out, "%s\n    %s\n    source: %s\n", any ? "" : " none", presets[i].what, presets[i].where);
    }
}

static int setup_fail(const ms_pub_row *r, const char *key, const char *value, const char *why, ms_err *err)
{
    return ms_fail(err, "%s: row %s: %s = %s: %s", r->file, r->name, key, value, why);
}

static double knob(const ms_pub_row *r, ms_pub_knob k) { return r->knob_given >> k & 1 ? r->knob[k] : NAN; }

/* gpu_expert_gb: the expert cache in bytes; without it the GPU's room for
 * experts (budget.h). */
static int cache_from_gb(const ms_pub_row *r, double room, ms_pub_setup *s, ms_err *err)
{
    double gb = knob(r, MS_PUB_GPU_EXPERT_GB);
    double bytes = isnan(gb) ? room : gb * 1e9;
    if (isnan(bytes))
        return setup_fail(r, "gpu_expert_gb", "(not given)", "needed: the GPU's room for experts is unknown", err);
    if (!(bytes > 0)) {
        char v[64];
        snprintf(v, sizeof v, isnan(gb) ? "(not given)" : "%g", gb);
        return setup_fail(r, "gpu_expert_gb", v,
                          isnan(gb) ? "the GPU has no room for experts beside the dense weights, embeddings and KV"
                                    : "a cache needs a positive size",
                          err);
    }
    s->cap_kind = MS_CAP_BYTES;
    s->cap_value = bytes;
    return 0;
}

static void threads(const ms_pub_row *r, ms_pub_setup *s)
{
    double t = knob(r, MS_PUB_CPU_THREADS);
    if (!isnan(t))
        s->cpu_cores = (uint32_t)t;
}

static int set_policies(ms_pub_setup *s, const char *prefetch, const char *cache, const char *sched)
{
    snprintf(s->prefetch, sizeof s->prefetch, "%s", prefetch);
    snprintf(s->cache, sizeof s->cache, "%s", cache);
    snprintf(s->sched, sizeof s->sched, "%s", sched);
    return 0;
}

double ms_pub_dense_bytes(const ms_pub_row *r, const ms_model *m)
{
    return r->dense_bits > 0 ? m->dense_params * r->dense_bits / 8 : (double)m->dense_bytes;
}

double ms_pub_expert_bytes(const ms_pub_row *r, const ms_model *m)
{
    return r->expert_bits > 0 ? m->expert_params * r->expert_bits / 8 : (double)m->expert_bytes;
}

/* One MoE layer's experts in bytes at the row's expert_bits. */
static double layer_expert_bytes(const ms_pub_row *r, const ms_model *m)
{
    return m->experts * ms_pub_expert_bytes(r, m);
}

/* The first n MoE layers streamed whole every forward pass (layer-stream,
 * copies as the framework makes them), the rest pinned: the cache holds
 * the pinned layers and the one streamed layer's buffer. */
static int stream_first_layers(uint32_t n, const ms_model *m, ms_pub_setup *s)
{
    uint32_t L = m->moe_layers, J = m->experts;
    char pre[64], cache[64];
    s->cap_kind = MS_CAP_EXPERTS;
    s->cap_value = (double)(L - n + 1) * J;
    snprintf(pre, sizeof pre, "layer-stream:ahead=0,layers=%u", n);
    snprintf(cache, sizeof cache, "pin-layers:first=%u", n);
    return set_policies(s, pre, cache, "gpu");
}

/* The first r MoE layers resident, the rest streamed whole every forward
 * pass; r = L: nothing streamed. */
static int stream_last_layers(uint32_t r, const ms_model *m, ms_pub_setup *s)
{
    uint32_t L = m->moe_layers, J = m->experts;
    char pre[64], cache[64];
    s->cap_kind = MS_CAP_EXPERTS;
    s->cap_value = (double)(r < L ? r + 1 : L) * J;
    snprintf(pre, sizeof pre, r < L ? "layer-stream:ahead=0,from=%u" : "none", r);
    snprintf(cache, sizeof cache, r ? "pin-layers:last=%u" : "pin-layers:first=%u", r ? r : L); /* first=L: none */
    return set_policies(s, pre, cache, "gpu");
}

/* vLLM's cpu_offload_gb: whole parameters are offloaded in module order
 * until the budget is used, and every forward pass copies them back
 * (vllm model_executor/models/utils.py maybe_offload_to_cpu).  Modelled as
 * the first N MoE layers streamed every forward pass (layer-stream over
 * those layers, synchronous copies from the framework) and the rest pinned:
 * N = round(cpu_offload_gb / one layer's bytes), in [1, L]; the cache holds
 * the pinned layers and one streamed layer (docs/policies.md "Streaming and
 * CPU experts"). */
static int vllm_offload(const ms_pub_row *r, const ms_model *m, ms_pub_setup *s, ms_err *err)
{
    double gb = knob(r, MS_PUB_CPU_OFFLOAD_GB);
    if (isnan(gb))
        return setup_fail(r, "cpu_offload_gb", "(not given)", "needed by vllm-cpu-offload", err);
    uint32_t L = m->moe_layers;
    double n = round(gb * 1e9 / (ms_pub_dense_bytes(r, m) + layer_expert_bytes(r, m)));
    return stream_first_layers(n < 1 ? 1 : n > L ? L : (uint32_t)n, m, s);
}

/* HF Accelerate, device_map="auto" (accelerate utils/modeling.py
 * infer_auto_device_map): modules fill the GPU in model order; once one is
 * offloaded, the largest layer's size stays reserved as the buffer an
 * offloaded block is copied into, and each offloaded block's weights are
 * copied in at its forward by its AlignDevicesHook (place_submodules: the
 * block's every expert, routed or not) and dropped after.  Resident MoE
 * layers R = floor((room - one layer) / one layer) in [0, L], the rest
 * streamed whole every forward (synchronous, pageable copies from the
 * framework profile); room = gpu_expert_gb when the row gives it (the GPU
 * memory the system left the experts; 0: every layer offloaded), else the
 * GPU's room for experts.  The last layers are the offloaded ones (an
 * encoder-decoder model's decoder, which is what a decode step runs).  The
 * dense weights of an offloaded block stay resident in moesim (3-5 % of a
 * Mixtral or DeepSeek-V2-Lite block). */
static int accelerate_device_map(const ms_pub_row *r, const ms_model *m, double gpu_room, ms_pub_setup *s,
                                 ms_err *err)
{
    double gb = knob(r, MS_PUB_GPU_EXPERT_GB), room = isnan(gb) ? gpu_room : gb * 1e9;
    double layer = layer_expert_bytes(r, m);
    uint32_t L = m->moe_layers;
    if (isnan(room))
        return setup_fail(r, "gpu_expert_gb", "(not given)", "needed: the GPU's room for experts is unknown", err);
    double resident = floor((room - layer) / layer);
    uint32_t R = resident < 0 ? 0 : resident > L ? L : (uint32_t)resident;
    if (room >= L * layer) /* everything fits: Accelerate offloads nothing, no buffer is reserved */
        return stream_last_layers(L, m, s);
    if (R == L)
        R = L - 1;
    if (room < layer && isnan(gb)) {
        char why[400];
        snprintf(why, sizeof why,
                 "one MoE layer's experts (%.4g GB) do not fit the GPU's %.4g GB of room for experts: Accelerate "
                 "would offload dense weights too, which moesim keeps resident",
                 layer / 1e9, room / 1e9);
        return setup_fail(r, "gpu_expert_gb", "(not given)", why, err);
    }
    return stream_last_layers(R, m, s);
}

int ms_pub_preset_setup(const ms_pub_row *r, const ms_model *m, double gpu_room, ms_pub_setup *s, ms_err *err)
{
    const ms_pub_preset *p = ms_pub_preset_find(r->system);
    memset(s, 0, sizeof *s);
    if (!p)
        return setup_fail(r, "system", r->system, "unknown system", err);
    snprintf(s->framework, sizeof s->framework, "%s", p->framework);
    uint32_t L = m->moe_layers, J = m->experts;
    s->cap_kind = MS_CAP_EXPERTS;
    const char *sys = r->system;
    char buf[160];
    if (!strcmp(sys, "no-cache")) {
        /* an LRU of one layer's experts: room for any step's activated set
         * (a prefill activates up to all J); between two visits of a layer
         * the other L - 1 layers insert at least K experts each, so a decode
         * step finds none of its layer's experts left when (L - 1) x K >= J */
        if ((uint64_t)(L - 1) * m->top_k < J) {
            char why[512];
            snprintf(why, sizeof why,
                     "no-cache on %.64s (L = %u, K = %u, J = %u) needs a cache policy that keeps nothing: an LRU with "
                     "room for a prefill's %u experts keeps decode experts from one token to the next",
                     m->name, L, m->top_k, J, J);
            return setup_fail(r, "system", sys, why, err);
        }
        s->cap_value = J;
        return set_policies(s, "none", "lru", "gpu");
    }
    if (!strcmp(sys, "mixtral-offloading")) {
        double slots = knob(r, MS_PUB_SLOTS_PER_LAYER), pre = knob(r, MS_PUB_PREFETCH);
        if (isnan(slots))
            return setup_fail(r, "slots_per_layer", "(not given)", "needed by mixtral-offloading", err);
        s->cap_value = slots * L;
        snprintf(buf, sizeof buf, "lru-slots:mode=code,slots=%u", (unsigned)slots);
        return set_policies(s, !isnan(pre) && pre == 1 ? "speculative" : "none", buf, "gpu");
    }
    if (!strcmp(sys, "hf-accelerate"))
        return accelerate_device_map(r, m, gpu_room, s, err);
    if (!strcmp(sys, "deepspeed-zero3")) {
        /* two layers' experts: the one computing and the one streamed in */
        s->cap_value = 2.0 * J;
        return set_policies(s, "layer-stream:ahead=1", "lru", "gpu");
    }
    if (!strcmp(sys, "vllm-cpu-offload"))
        return vllm_offload(r, m, s, err);
    if (!strcmp(sys, "moe-infinity"))
        return cache_from_gb(r, gpu_room, s, err) || set_policies(s, "eam", "eam", "gpu");
    if (!strcmp(sys, "fmoe"))
        return cache_from_gb(r, gpu_room, s, err) || set_policies(s, "fmoe", "fmoe", "gpu");
    if (!strcmp(sys, "hybrimoe")) {
        threads(r, s);
        return cache_from_gb(r, gpu_room, s, err) || set_policies(s, "hybrimoe", "mrs", "hybrid");
    }
    if (!strcmp(sys, "fiddler")) {
        threads(r, s);
        return cache_from_gb(r, gpu_room, s, err) || set_policies(s, "none", "static", "fiddler");
    }
    /* every expert resident on the GPU except the CPU's: a static cache of all */
    s->cap_value = (double)L * J;
    if (!strcmp(sys, "ktransformers")) {
        double t = knob(r, MS_PUB_CPU_THREADS);
        if (isnan(t))
            snprintf(buf, sizeof buf, "cpu-all");
        else
            snprintf(buf, sizeof buf, "cpu-all:threads=%u", (unsigned)t);
        s->cap_value = J; /* nothing routed is computed on the GPU: one layer's room, as no-cache */
        return set_policies(s, "none", "lru", buf);
    }
    if (!strcmp(sys, "llama-cpp")) {
        /* the first N layers' experts on the CPU; the rest pinned on the GPU
         * (pin-layers preloads layers N..L-1 and never evicts them) */
        double n = knob(r, MS_PUB_CPU_MOE_LAYERS), t = knob(r, MS_PUB_CPU_THREADS);
        unsigned nl = isnan(n) ? 0u : (unsigned)n;
        if (nl > L)
            return setup_fail(r, "cpu_moe_layers", "(given)", "more than the model's MoE layers", err);
        int u = snprintf(buf, sizeof buf, "cpu-layers:layers=%u", nl);
        if (!isnan(t))
            snprintf(buf + u, sizeof buf - (size_t)u, ",threads=%u", (unsigned)t);
        char cache[64];
        snprintf(cache, sizeof cache, "pin-layers:first=%u", nl);
        double resident = (double)(L - nl) * J;
        s->cap_value = resident > m->top_k ? resident : m->top_k;
        return set_policies(s, "none", cache, buf);
    }
    return setup_fail(r, "system", sys, "a preset without a setup (a bug)", err);
}
