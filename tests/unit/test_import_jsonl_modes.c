/* jsonl importer modes (issue 17 part 1), cell by cell on the fixtures of
 * tests/data/jsonl: per-step positions, decode-only requests with the prompt
 * length from a field or unknown, request keys from two fields and two files.
 * Expected rows are worked out by hand from the fixture lines (comments). */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "traces/import/import.h"

static int32_t id_at(const ms_trace_meta *m, const ms_request *r, uint32_t row, uint32_t l, uint32_t k)
{
    return r->topk_ids[ms_topk_index(m, row, l) + k];
}

/* Checks row `row` of q: layer 0 ids a0,a1 and layer 1 ids b0,b1. */
static void check_row(const ms_trace_meta *m, const ms_request *q, uint32_t row, int a0, int a1, int b0, int b1)
{
    CHECK_EQ_INT(id_at(m, q, row, 0, 0), a0);
    CHECK_EQ_INT(id_at(m, q, row, 0, 1), a1);
    CHECK_EQ_INT(id_at(m, q, row, 1, 0), b0);
    CHECK_EQ_INT(id_at(m, q, row, 1, 1), b1);
}

static ms_trace_reader *import(const char *const *in, size_t n, const char *out, ms_import_opts *o,
                               ms_import_report *rep)
{
    o->experts = 4;
    o->expert_bytes = 1;
    ms_err err = {{0}};
    int rc = ms_import_jsonl_files(in, n, out, o, rep, &err);
    CHECK_EQ_INT(rc, 0);
    if (rc) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    ms_trace_reader *r = ms_reader_open(out, &err);
    CHECK(r != NULL);
    return r;
}

static void test_per_step(void)
{
    const char *in = MS_TEST_DATA "/jsonl/per_step.jsonl";
    ms_import_opts o;
    ms_import_opts_init(&o);
    o.token_pos = MS_TOKEN_POS_PER_STEP;
    ms_import_report rep;
    ms_trace_reader *r = import(&in, 1, "test_jsonl_modes_step.h5", &o, &rep);
    if (!r)
        return;
    const ms_trace_meta *m = ms_reader_meta(r);
    ms_err err;
    ms_request q;
    memset(&q, 0, sizeof q);
    /* request 0: lines 1-4 = prefill step (tokens 0, 1), lines 7-8 = decode
     * step (token 0 again -> row 2), lines 11-12 = decode step (row 3) */
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1);
    CHECK_EQ_INT(q.id, 0);
    CHECK_EQ_INT(q.prompt_len, 2);
    CHECK_EQ_INT(q.output_len, 2);
    check_row(m, &q, 0, 1, 3, 0, 2);
    check_row(m, &q, 1, 2, 1, 3, 0);
    check_row(m, &q, 2, 1, 2, 3, 1);
    check_row(m, &q, 3, 0, 3, 1, 0);
    /* request 1: lines 5-6 prefill (row 0), lines 9-10 decode (row 1) */
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1);
    CHECK_EQ_INT(q.id, 1);
    CHECK_EQ_INT(q.prompt_len, 1);
    CHECK_EQ_INT(q.output_len, 1);
    check_row(m, &q, 0, 0, 1, 2, 3);
    check_row(m, &q, 1, 3, 2, 0, 3);
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 0);
    ms_request_free(&q);
    ms_reader_close(r);
}

static void test_decode_only_keys(void)
{
    const char *in[2] = {MS_TEST_DATA "/jsonl/decode_gsm8k.jsonl", MS_TEST_DATA "/jsonl/decode_math.jsonl"};
    ms_import_opts o;
    ms_import_opts_init(&o);
    o.token_pos = MS_TOKEN_POS_PER_REQUEST;
    o.request_key = "dataset,problem_id";
    o.fields = "prompt_len=prompt_tokens";
    ms_import_report rep;
    ms_trace_reader *r = import(in, 2, "test_jsonl_modes_keys.h5", &o, &rep);
    if (!r)
        return;
    const ms_trace_meta *m = ms_reader_meta(r);
    CHECK(!strcmp(m->source, "decode_gsm8k.jsonl + 1 more (jsonl routing log)"));
    ms_err err;
    ms_request q;
    memset(&q, 0, sizeof q);
    /* ("gsm8k", 0): prompt_tokens 3, decode tokens 0, 1 -> rows 3, 4; rows 0-2 missing */
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1);
    CHECK_EQ_INT(q.id, 0);
    CHECK_EQ_INT(q.prompt_len, 3);
    CHECK_EQ_INT(q.output_len, 2);
    check_row(m, &q, 0, -1, -1, -1, -1);
    check_row(m, &q, 2, -1, -1, -1, -1);
    check_row(m, &q, 3, 1, 3, 0, 2);
    check_row(m, &q, 4, 3, 0, 1, 2);
    /* ("gsm8k", 1): prompt_tokens 2, decode token 0 -> row 2 */
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1);
    CHECK_EQ_INT(q.id, 1);
    CHECK_EQ_INT(q.prompt_len, 2);
    CHECK_EQ_INT(q.output_len, 1);
    check_row(m, &q, 2, 2, 1, 3, 1);
    /* ("math", 0) of the second file: prompt_tokens 4, decode token 0 -> row 4 */
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1);
    CHECK_EQ_INT(q.id, 2);
    CHECK_EQ_INT(q.prompt_len, 4);
    CHECK_EQ_INT(q.output_len, 1);
    check_row(m, &q, 4, 0, 1, 2, 3);
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 0);
    CHECK_EQ_INT(rep.missing_prefill, (3 + 2 + 4) * 2 * 2);
    ms_request_free(&q);
    ms_reader_close(r);

    /* without the field: prompt length unknown, one placeholder row each, said in `source` */
    o.fields = NULL;
    r = import(in, 2, "test_jsonl_modes_unknown.h5", &o, &rep);
    if (!r)
        return;
    m = ms_reader_meta(r);
    CHECK(!strcmp(m->source, "decode_gsm8k.jsonl + 1 more (jsonl routing log; 3 requests start with decode, prompt "
                             "length unknown: 1 placeholder prompt row)"));
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1);
    CHECK_EQ_INT(q.prompt_len, 1);
    check_row(m, &q, 0, -1, -1, -1, -1);
    check_row(m, &q, 1, 1, 3, 0, 2);
    check_row(m, &q, 2, 3, 0, 1, 2);
    ms_request_free(&q);
    ms_reader_close(r);
}

/* Issue 32: per-step positions without a phase field, --prompt-len 1 counting
 * steps: the first step of each request is its prompt, whatever its width. */
static void test_per_step_prompt_steps(void)
{
    const char *in = MS_TEST_DATA "/jsonl/per_step_noprompt.jsonl";
    ms_import_opts o;
    ms_import_opts_init(&o);
    o.token_pos = MS_TOKEN_POS_PER_STEP;
    o.prompt_len = 1;
    ms_import_report rep;
    ms_trace_reader *r = import(&in, 1, "test_jsonl_modes_step_plen.h5", &o, &rep);
    if (!r)
        return;
    const ms_trace_meta *m = ms_reader_meta(r);
    ms_err err;
    ms_request q;
    memset(&q, 0, sizeof q);
    /* request 0: lines 1-6 = step 0 (tokens 0-2 -> rows 0-2), lines 11-12 row 3, lines 15-16 row 4 */
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1);
    CHECK_EQ_INT(q.id, 0);
    CHECK_EQ_INT(q.prompt_len, 3);
    CHECK_EQ_INT(q.output_len, 2);
    CHECK_EQ_INT(q.n_iters, 3);
    CHECK_EQ_INT(q.iters[0].n_rows, 3);
    check_row(m, &q, 0, 1, 3, 0, 2);
    check_row(m, &q, 2, 1, 2, 0, 3);
    check_row(m, &q, 3, 1, 2, 0, 3);
    check_row(m, &q, 4, 2, 1, 3, 0);
    /* request 1: lines 7-10 = step 0 (rows 0-1), lines 13-14 row 2 */
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1);
    CHECK_EQ_INT(q.id, 1);
    CHECK_EQ_INT(q.prompt_len, 2);
    CHECK_EQ_INT(q.output_len, 1);
    check_row(m, &q, 1, 2, 1, 3, 0);
    check_row(m, &q, 2, 1, 3, 0, 2);
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 0);
    CHECK_EQ_INT(rep.prefill_rows, 5);
    CHECK_EQ_INT(rep.decode_iters, 3);
    ms_request_free(&q);
    ms_reader_close(r);
}

/* Issue 32: a decode-only dump without a phase field (--phase decode),
 * absolute positions: the prompt is the rows before the first decode token,
 * all missing. */
static void test_all_decode(void)
{
    const char *in = MS_TEST_DATA "/jsonl/decode_nophase.jsonl";
    ms_import_opts o;
    ms_import_opts_init(&o);
    o.all_decode = 1;
    ms_import_report rep;
    ms_trace_reader *r = import(&in, 1, "test_jsonl_modes_all_decode.h5", &o, &rep);
    if (!r)
        return;
    const ms_trace_meta *m = ms_reader_meta(r);
    ms_err err;
    ms_request q;
    memset(&q, 0, sizeof q);
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1); /* request 3: tokens 4, 5 */
    CHECK_EQ_INT(q.id, 3);
    CHECK_EQ_INT(q.prompt_len, 4);
    CHECK_EQ_INT(q.output_len, 2);
    check_row(m, &q, 3, -1, -1, -1, -1);
    check_row(m, &q, 4, 1, 3, 0, 2);
    check_row(m, &q, 5, 1, 2, 0, 3);
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1); /* request 8: token 2 */
    CHECK_EQ_INT(q.id, 8);
    CHECK_EQ_INT(q.prompt_len, 2);
    CHECK_EQ_INT(q.output_len, 1);
    check_row(m, &q, 2, 2, 1, 3, 0);
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 0);
    CHECK_EQ_INT(rep.missing_prefill, 24);
    ms_request_free(&q);
    ms_reader_close(r);
}

/* Issue 32: ids only (no weights field), probs_kind topk_ids, 1/K weights. */
static void test_ids_only(void)
{
    const char *in = MS_TEST_DATA "/jsonl/ids_only.jsonl";
    ms_import_opts o;
    ms_import_opts_init(&o);
    o.probs_kind = MS_PROBS_TOPK_IDS;
    ms_import_report rep;
    ms_trace_reader *r = import(&in, 1, "test_jsonl_modes_ids.h5", &o, &rep);
    if (!r)
        return;
    const ms_trace_meta *m = ms_reader_meta(r);
    CHECK_EQ_INT(m->probs_kind, MS_PROBS_TOPK_IDS);
    ms_err err;
    ms_request q;
    memset(&q, 0, sizeof q);
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1);
    CHECK_EQ_INT(q.prompt_len, 2);
    CHECK_EQ_INT(q.output_len, 1);
    check_row(m, &q, 0, 1, 3, 0, 2);
    check_row(m, &q, 2, 1, 2, 0, 3);
    for (size_t c = 0; c < (size_t)q.n_rows * m->L * m->K; c++)
        CHECK(q.topk_w[c] == 0.5f);
    ms_request_free(&q);
    ms_reader_close(r);
    /* without the kind, the missing weights are an error naming it */
    o.probs_kind = -1;
    o.experts = 4;
    o.expert_bytes = 1;
    CHECK_EQ_INT(ms_import_jsonl_files(&in, 1, "test_jsonl_modes_ids2.h5", &o, &rep, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "field topk_weights: missing (a dump of expert ids without weights: --probs-kind "
                                "topk_ids)");
}

int main(void)
{
    test_per_step();
    test_decode_only_keys();
    test_per_step_prompt_steps();
    test_all_decode();
    test_ids_only();
    CHECK_DONE();
}
