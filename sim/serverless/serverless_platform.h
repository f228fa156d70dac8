/* Serverless platform profile for `moesim serverless` (seed paper 002:
 * serverless MoE deployment).  An INI file with one [serverless] section,
 * looked up by name in <profile dir>/serverless/NAME.ini or loaded from a
 * path ending in ".ini" (the INIs in sim/profiles/serverless/ say where every figure
 * comes from).  Every key is required and range-checked; unknown keys,
 * malformed numbers and an unsorted memory list are one-line errors naming
 * the file, line and key.  Units in the struct: seconds, bytes, MB (memory
 * options, as the provider bills them), USD. */
#ifndef MS_SERVERLESS_PLATFORM_H
#define MS_SERVERLESS_PLATFORM_H

#include "sim/core/err.h"

#define MS_SL_MAX_MEM 32

typedef struct {
    char name[128];
    char description[256];
    int n_mem;
    double mem_mb[MS_SL_MAX_MEM]; /* ascending memory options M_j */
    double mb_per_vcpu;           /* memory that buys one vCPU */
    double vcpu_flops;            /* FLOP/s of one vCPU */
    double warm_start_s;          /* T^str */
    double storage_delay_s;       /* T^dl */
    double storage_bw;            /* B^s, bytes/s */
    double function_bw;           /* B^f, bytes/s */
    double payload_bytes;         /* D^p */
    double price_per_gb_s;        /* USD per GB-second (GB = 1024 MB) */
    int max_replicas;             /* G */
    double runtime_bytes;         /* M^itrm */
    double act_bytes;             /* bytes per activation element */
    double lambdaml_mb, nonmoe_mb;
    double cluster_price_per_s, cluster_vcpus, cluster_vcpu_flops, cluster_billing_s;
} ms_sl_platform;

int ms_sl_platform_load(const char *name_or_path, ms_sl_platform *out, ms_err *err);

/* FLOP/s of a function with mem_mb of memory (CPU share proportional to memory). */
double ms_sl_flops(const ms_sl_platform *p, double mem_mb);

#endif
