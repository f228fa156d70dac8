/* The claims as data (internal to sim/apps/claims*.c): see claims.h. */
#ifndef MS_CLAIMS_TABLE_H
#define MS_CLAIMS_TABLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *label, *prefetch, *cache, *sched;
    uint32_t distance; /* 0: the claim's */
} cl_system;

typedef enum {
    CL_M_HIT_RATE,        /* hits / activations */
    CL_M_TPOT_MS,         /* mean time per output token */
    CL_M_TTFT_MS,         /* time to first token: the prefill iteration's latency, without queueing */
    CL_M_RECALL_IN_TIME,  /* activations whose prefetch arrived before the gate / activations */
    CL_M_RECALL_MOEINF,   /* MoE-Infinity's prefetch recall: activated experts a prefetch request named (docs/metrics.md) */
    CL_M_SIM_SEMANTIC,    /* fMoE: mean semantic similarity of the matched maps */
    CL_M_SIM_TRAJECTORY,  /* fMoE: mean trajectory similarity of the matched maps */
    CL_M_N
} cl_metric;

typedef enum {
    CL_REDUCTION, /* sys[0] lowers the metric by paper_vals[i] % against sys[i + 1] */
    CL_GAIN,      /* sys[0] raises the metric by paper_vals[i] % against sys[i + 1] */
    CL_ABOVE,     /* sys[0]'s metric is above every other system's */
    CL_ORDER,     /* the systems' metric rises in table order */
    CL_FALLS,     /* each system's metric falls along the axis (and, with 2 systems, sys[0] above sys[1] everywhere) */
    CL_BEST_AT,   /* sys[0]'s metric is lowest at axis value paper_vals[0] */
    CL_SPAN,      /* sys[0]'s metric goes from paper_vals[0] to paper_vals[1] between the axis ends (percent) */
    CL_GAP,       /* sys[1] (the bound) is paper_vals[0] points above sys[0] */
    CL_ENTROPY,   /* the trace's iteration-level expert entropy is below the request-level one, per layer */
    CL_STORE_MB,  /* fMoE's map store holding axis_vals[0] maps of the trace's shape takes under paper_vals[0] MB */
    CL_SERVERLESS,/* seed 002 Fig. 14 on the platform's serverless profile: cost >= paper_vals[0] % below LambdaML,
                   * throughput <= paper_vals[1] % below it, cost >= paper_vals[2] % below a CPU cluster */
    CL_PLATEAU,   /* sys[0]'s metric stops improving at axis value paper_vals[0]: from there on within tol %
                   * (relative) of its value at the last axis value */
    CL_LOWEST,    /* sys[0]'s metric is the lowest of the systems at most axis values (more than half) */
    CL_HOST_TIME, /* a host-time figure: not simulated; the note names the benchmark that measures it */
} cl_kind;

typedef enum {
    CL_AX_NONE,
    CL_AX_DISTANCE,
    CL_AX_BW_GBPS,
    CL_AX_CACHE_FRAC,
    CL_AX_CAPACITY,     /* the prefetcher's capacity= (MoE-Infinity's EAMC entries, fMoE's map store) */
    CL_AX_BATCH,        /* the batch size (offline: every request waits at time 0) */
} cl_axis;

typedef struct {
    const char *id, *paper, *where, *statement;
    const char *model;     /* the paper's model (a profile); the trace is shaped like it */
    const char *model_note;/* the mapping when the profile stands in for the paper's model */
    const char *platform;  /* the testbed profile (CL_SERVERLESS: a serverless profile) */
    uint32_t gpus;         /* 0: the testbed's; MoE-Infinity reports one GPU of its server */
    double cache_frac;     /* of the trace's L x J experts; 0: cache_gb */
    double cache_gb;
    uint32_t distance;
    cl_kind kind;
    cl_metric metric;
    const cl_system *sys;
    size_t nsys;
    const double *paper_vals; /* the paper's values (percent for rates and reductions) */
    size_t npaper;
    double tol;            /* holds: every value within tol (percentage points) */
    cl_axis axis;
    const double *axis_vals;
    size_t naxis;
    const char *host_note;  /* CL_HOST_TIME: where it is measured */
    unsigned requests_x;    /* the claim's trace has requests_x times --requests (0: 1) */
    int short_requests;     /* QA-like short requests instead of ShareGPT lengths */
} cl_claim;

extern const cl_claim cl_claims[];
extern const size_t cl_n_claims;
const cl_claim *cl_find(const char *id);

#endif
