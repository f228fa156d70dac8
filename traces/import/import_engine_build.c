/* sglang / vllm importers, writing half: dense layers, lengths, cells
 * (traces/import/import_engine.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/import/import_engine.h"

static const char *engine_name(const eng_state *s)
{
    return s->vllm ? "vllm" : "sglang";
}

/* ---- building the trace ---- */

/* Engine layers whose every cell in every request is all 0: dense layers
 * (the engines zero-fill layers without a router).  With K >= 2 a real cell
 * never repeats an id, so an all-0 cell is not routing. */
static int pick_moe_layers(eng_state *s, uint32_t *moe, ms_err *err)
{
    uint8_t *zero = ms_xcalloc(s->La, 1);
    memset(zero, 1, s->La);
    for (size_t i = 0; i < s->n; i++)
        for (uint64_t t = 0; t < s->reqs[i].rows; t++)
            for (uint32_t l = 0; l < s->La; l++)
                for (uint32_t k = 0; k < s->K && zero[l]; k++)
                    zero[l] &= s->reqs[i].ids[(t * s->La + l) * s->K + k] == 0;
    uint32_t n_zero = 0;
    char list[256] = "";
    for (uint32_t l = 0; l < s->La; l++)
        if (zero[l]) {
            size_t u = strlen(list);
            if (u < sizeof list - 8)
                snprintf(list + u, sizeof list - u, "%s%u", n_zero ? ", " : "", l);
            n_zero++;
        }
    uint32_t L = s->d.L;
    int rc = 0;
    if (s->La > (L ? L : 0) && s->K < 2 && (L || n_zero))
        rc = ms_fail(err, "%s: K = 1: a dense layer (all 0) cannot be told from expert 0; give --engine-layers equal "
                          "to the MoE layers",
                     s->path);
    else if (L && s->La < L)
        rc = ms_fail(err, "%s: %u engine layers, fewer than the L = %u MoE layers", s->path, s->La, L);
    else if (L && s->La - L != n_zero)
        rc = ms_fail(err, "%s: %u engine layers for L = %u MoE layers, but %u layers have all cells 0 (%s): expected "
                          "%u dense layers",
                     s->path, s->La, L, n_zero, n_zero ? list : "none", s->La - L);
    else if (!L && s->K >= 2 && n_zero == s->La)
        rc = ms_fail(err, "%s: every layer has all cells 0: no routing", s->path);
    if (rc == 0) {
        uint32_t m = 0;
        int drop = L ? s->La > L : s->K >= 2;
        for (uint32_t l = 0; l < s->La; l++)
            if (!(drop && zero[l]))
                moe[m++] = l;
        s->d.L = m;
        if (drop && n_zero)
            ms_import_note(&s->rep, "dense layers dropped (all cells 0): engine layers %s", list);
    }
    free(zero);
    return rc;
}

static void note_missing(eng_state *s, uint64_t req, uint32_t row, uint32_t layer, uint32_t P)
{
    ms_import_report *rep = &s->rep;
    for (uint32_t k = 0; k < s->d.K; k++) {
        if (row < P)
            rep->missing_prefill++;
        else
            rep->missing_decode++;
        if (rep->n_listed < MS_IMPORT_MISSING_LIST)
            rep->first_missing[rep->n_listed++] = (ms_missing_cell){req, row, layer, k, row >= P};
    }
}

/* Prompt and output lengths from the response's counts (rows = prompt +
 * completion - 1 - start: the last sampled token is never fed). */
static int request_lengths(eng_state *s, const eng_req *r, uint32_t *P, uint32_t *O, ms_err *err)
{
    char at[600];
    eng_where(s, r->line, r->index, at, sizeof at);
    long long Pt = r->P >= 0 ? r->P : (long long)s->o->prompt_len, st = s->o->start_len;
    if (Pt <= 0)
        return ms_fail(err, "%s: response %s: prompt length unknown (no usage.prompt_tokens%s): give --prompt-len P",
                       at, r->key, s->vllm ? "" : " / meta_info.prompt_tokens");
    if (st >= Pt)
        return ms_fail(err, "%s: response %s: --start-len %lld leaves no prompt rows (prompt %lld)", at, r->key, st,
                       Pt);
    if (r->C >= 0 && (long long)r->rows != Pt + r->C - 1 - st)
        return ms_fail(err, "%s: response %s: %llu routed-expert rows, expected prompt %lld + completion %lld - 1 - "
                            "start %lld = %lld",
                       at, r->key, (unsigned long long)r->rows, Pt, r->C, st, Pt + r->C - 1 - st);
    if ((long long)r->rows < Pt - st)
        return ms_fail(err, "%s: response %s: %llu routed-expert rows, fewer than the %lld prompt rows", at, r->key,
                       (unsigned long long)r->rows, Pt - st);
    *P = (uint32_t)(Pt - st);
    *O = (uint32_t)((long long)r->rows - (Pt - st));
    return 0;
}

static int build_request(eng_state *s, const ms_trace_meta *m, const eng_req *r, uint64_t id, const uint32_t *moe,
                         ms_request *req, ms_err *err)
{
    uint32_t P = 0, O = 0;
    if (request_lengths(s, r, &P, &O, err))
        return -1;
    memset(req, 0, sizeof *req);
    req->id = id;
    req->prompt_len = P;
    req->output_len = O;
    req->n_iters = 1 + O;
    req->n_rows = P + O;
    ms_request_alloc(req, m);
    req->iters[0] = (ms_iteration){MS_PHASE_PREFILL, 0, P};
    for (uint32_t t = P; t < P + O; t++)
        req->iters[1 + t - P] = (ms_iteration){MS_PHASE_DECODE, t, 1};
    float w = (float)(1.0 / m->K);
    for (uint32_t t = 0; t < req->n_rows; t++)
        for (uint32_t l = 0; l < m->L; l++) {
            const int32_t *src = &r->ids[((uint64_t)t * s->La + moe[l]) * s->K];
            size_t c = ms_topk_index(m, t, l);
            int dup = 0;
            for (uint32_t k = 0; k < m->K; k++) {
                if (src[k] < 0 || (uint32_t)src[k] >= m->J) {
                    char at[600];
                    eng_where(s, r->line, r->index, at, sizeof at);
                    ms_request_free(req);
                    if (src[k] == INT32_MIN) /* decode_npy's mark for a value outside int32 */
                        return ms_fail(err, "%s: response %s: row %u engine layer %u: expert id outside int32, not in "
                                            "[0, %u)",
                                       at, r->key, t, moe[l], m->J);
                    return ms_fail(err, "%s: response %s: row %u engine layer %u: expert id %lld out of range [0, %u)",
                                   at, r->key, t, moe[l], (long long)src[k], m->J);
                }
                for (uint32_t q = 0; q < k; q++)
                    dup |= src[q] == src[k];
            }
            for (uint32_t k = 0; k < m->K; k++) { /* a repeated id: a zero-filled row, not routing */
                req->topk_ids[c + k] = dup ? -1 : src[k];
                req->topk_w[c + k] = dup ? 0.0f : w;
            }
            if (dup) {
                s->dup_cells++;
                note_missing(s, id, t, l, P);
            }
        }
    if (ms_request_check(m, req, s->path, err)) {
        ms_request_free(req);
        return -1;
    }
    s->rep.requests++;
    s->rep.prefill_iters++;
    s->rep.prefill_rows += P;
    s->rep.decode_iters += O;
    s->rep.prefill_cells += (uint64_t)P * m->L * m->K;
    s->rep.decode_cells += (uint64_t)O * m->L * m->K;
    return 0;
}

static void add_notes(eng_state *s)
{
    ms_import_report *rep = &s->rep;
    long long cached = 0;
    for (size_t i = 0; i < s->n; i++)
        cached += s->reqs[i].cached > 0 ? s->reqs[i].cached : 0;
    ms_import_note(rep, "%zu %s%s -> request ids 0..%zu in order of first appearance", s->n,
                   s->vllm ? "choice" : "response", s->n == 1 ? "" : "s", s->n - 1);
    ms_import_note(rep, "expert ids only: the source has no gate weights, stored as the 1/K placeholder (probs_kind "
                        "topk_ids)");
    if (s->skipped)
        ms_import_note(rep, "%llu records without routed experts (stream chunks, usage) merged by response id",
                       (unsigned long long)s->skipped);
    if (s->dup_cells)
        ms_import_note(rep, "%llu cells with a repeated id (zero-filled, never routed) kept as missing",
                       (unsigned long long)s->dup_cells);
    if (cached)
        ms_import_note(rep, "%lld prompt rows came from the prefix cache (meta_info.cached_tokens): an earlier "
                            "request's routing",
                       cached);
}

int eng_write_trace(eng_state *s, const char *out_path, ms_err *err)
{
    for (size_t i = 0; i < s->n; i++)
        if (!s->reqs[i].have)
            return ms_fail(err, "%s: response %s carries no routed experts (server started without "
                                "--enable-return-routed-experts, or the request was aborted?)",
                           s->path, s->reqs[i].key);
    if (!s->La || !s->K)
        return ms_fail(err, "%s: no routed experts in the file", s->path);
    if (s->d.K && s->d.K != s->K)
        return ms_fail(err, "%s: the payload has K = %u experts per token, expected %u", s->path, s->K, s->d.K);
    s->d.K = s->K;
    uint32_t *moe = ms_xcalloc(s->La, sizeof *moe);
    int rc = pick_moe_layers(s, moe, err);
    char source[MS_SOURCE_MAX];
    snprintf(source, sizeof source, "%.300s (%s --enable-return-routed-experts: expert ids only, weights 1/K "
                                    "placeholders)",
             ms_import_base_name(s->path), engine_name(s));
    ms_trace_meta m;
    memset(&m, 0, sizeof m);
    ms_import_sink sink;
    memset(&sink, 0, sizeof sink);
    if (rc == 0) {
        ms_import_meta_fill(&s->d, source, MS_PROBS_TOPK_IDS, &m);
        rc = ms_import_sink_open(&sink, s->path, out_path, &m, err);
    }
    for (size_t i = 0; rc == 0 && i < s->n; i++) {
        ms_request req;
        rc = build_request(s, &m, &s->reqs[i], i, moe, &req, err);
        if (rc == 0) {
            rc = ms_writer_add(sink.w, &req, err);
            ms_request_free(&req);
        }
    }
    if (sink.w)
        rc = ms_import_sink_finish(&sink, rc, err);
    if (rc == 0)
        add_notes(s);
    ms_trace_meta_free(&m);
    free(moe);
    return rc;
}

static int import_engine(int vllm, const char *in_path, const char *out_path, const ms_import_opts *o,
                         ms_import_report *rep, ms_err *err)
{
    eng_state s;
    memset(&s, 0, sizeof s);
    s.path = in_path;
    s.o = o;
    s.vllm = vllm;
    snprintf(s.rep.input, sizeof s.rep.input, "%s", ms_import_base_name(in_path));
    snprintf(s.rep.row_unit, sizeof s.rep.row_unit, "API records");
    int rc = ms_import_dims_resolve(o, engine_name(&s), &s.d, err);
    if (rc == 0) {
        s.K = s.d.K;
        s.La = o->engine_layers ? o->engine_layers : s.d.L;
        if (!vllm && (!s.La || !s.K))
            rc = ms_fail(err, "trace import --format sglang: the payload has no shape: give --model PROFILE (or "
                              "--layers L and --topk K), and --engine-layers N when the model has dense layers");
    }
    if (rc == 0)
        rc = eng_read_input(&s, err);
    s.rep.rows = s.records;
    if (rc == 0)
        rc = eng_write_trace(&s, out_path, err);
    if (rep)
        *rep = s.rep;
    for (size_t i = 0; i < s.n; i++)
        free(s.reqs[i].ids);
    free(s.reqs);
    return rc;
}

int ms_import_sglang(const char *in_path, const char *out_path, const ms_import_opts *o, ms_import_report *rep,
                     ms_err *err)
{
    return import_engine(0, in_path, out_path, o, rep, err);
}

int ms_import_vllm(const char *in_path, const char *out_path, const ms_import_opts *o, ms_import_report *rep,
                   ms_err *err)
{
    return import_engine(1, in_path, out_path, o, rep, err);
}
