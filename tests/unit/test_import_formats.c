/* jsonl and dense-csv importers: the fixtures in tests/data/{jsonl,densecsv}
 * are imported and read back; request order, lengths, ids, weights, missing
 * cells and top-k derivation are checked cell by cell. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "traces/import/import.h"

static int32_t id_at(const ms_trace_meta *m, const ms_request *r, uint32_t row, uint32_t l, uint32_t k)
{
    return r->topk_ids[ms_topk_index(m, row, l) + k];
}
static float w_at(const ms_trace_meta *m, const ms_request *r, uint32_t row, uint32_t l, uint32_t k)
{
    return r->topk_w[ms_topk_index(m, row, l) + k];
}

static void test_jsonl(void)
{
    ms_import_opts o;
    ms_import_opts_init(&o);
    o.experts = 4;
    o.expert_bytes = 4096;
    ms_import_report rep;
    ms_err err = {{0}};
    int rc = ms_import_jsonl(MS_TEST_DATA "/jsonl/small.jsonl", "test_import_formats_j.h5", &o, &rep, &err);
    CHECK_EQ_INT(rc, 0);
    if (rc) {
        fprintf(stderr, "%s\n", err.msg);
        return;
    }
    CHECK_EQ_INT(rep.rows, 9);
    CHECK_EQ_INT(rep.missing_prefill, 2);
    CHECK_EQ_INT(rep.missing_decode, 0);
    ms_trace_reader *r = ms_reader_open("test_import_formats_j.h5", &err);
    CHECK(r != NULL);
    if (!r)
        return;
    const ms_trace_meta *m = ms_reader_meta(r);
    CHECK_EQ_INT(m->L, 2);
    CHECK_EQ_INT(m->J, 4);
    CHECK_EQ_INT(m->K, 2);
    CHECK_EQ_INT(m->probs_kind, MS_PROBS_TOPK_RENORM);
    CHECK_EQ_INT(m->expert_bytes[1], 4096);
    CHECK(!strcmp(m->source, "small.jsonl (jsonl routing log)"));
    ms_request q;
    memset(&q, 0, sizeof q);
    /* request 7 appears first: prompt tokens 0-1, decode token 2 */
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1);
    CHECK_EQ_INT(q.id, 7);
    CHECK_EQ_INT(q.prompt_len, 2);
    CHECK_EQ_INT(q.output_len, 1);
    CHECK_EQ_INT(id_at(m, &q, 0, 0, 0), 1);
    CHECK_NEAR(w_at(m, &q, 0, 0, 0), 0.75, 1e-7);
    CHECK_EQ_INT(id_at(m, &q, 1, 0, 0), 2);
    CHECK_EQ_INT(id_at(m, &q, 1, 1, 0), -1); /* no line for token 1 layer 1 */
    CHECK_EQ_INT(id_at(m, &q, 1, 1, 1), -1);
    CHECK_NEAR(w_at(m, &q, 1, 1, 0), 0, 0);
    CHECK_EQ_INT(id_at(m, &q, 2, 1, 0), 3); /* lines out of layer order */
    CHECK_NEAR(w_at(m, &q, 2, 1, 1), 0.45, 1e-7);
    CHECK_EQ_INT(q.iters[1].phase, MS_PHASE_DECODE);
    CHECK_EQ_INT(q.iters[1].row0, 2);
    /* request 3: prompt token 0 ("prefill"), decode token 1 ("decode") */
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1);
    CHECK_EQ_INT(q.id, 3);
    CHECK_EQ_INT(q.prompt_len, 1);
    CHECK_EQ_INT(q.output_len, 1);
    CHECK_EQ_INT(id_at(m, &q, 1, 1, 1), 3);
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 0);
    ms_request_free(&q);
    ms_reader_close(r);
    remove("test_import_formats_j.h5");
}

static void test_densecsv(void)
{
    ms_import_opts o;
    ms_import_opts_init(&o);
    o.topk = 2;
    o.expert_bytes = 1000;
    ms_import_report rep;
    ms_err err = {{0}};
    int rc = ms_import_densecsv(MS_TEST_DATA "/densecsv/small", "test_import_formats_d.h5", &o, &rep, &err);
    CHECK_EQ_INT(rc, 0);
    if (rc) {
        fprintf(stderr, "%s\n", err.msg);
        return;
    }
    ms_trace_reader *r = ms_reader_open("test_import_formats_d.h5", &err);
    CHECK(r != NULL);
    if (!r)
        return;
    const ms_trace_meta *m = ms_reader_meta(r);
    CHECK_EQ_INT(m->probs_kind, MS_PROBS_FULL);
    CHECK_EQ_INT(m->J, 4);
    CHECK_EQ_INT(m->n_requests, 2);
    ms_request q;
    memset(&q, 0, sizeof q);
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1);
    CHECK_EQ_INT(q.id, 0);
    CHECK_EQ_INT(q.prompt_len, 2);
    CHECK_EQ_INT(q.output_len, 1);
    /* row 1 layer 0: 0.25,0.25,0.4,0.1 -> ids 2, 0 (tie 0/1 to the lower id) */
    CHECK_EQ_INT(id_at(m, &q, 1, 0, 0), 2);
    CHECK_EQ_INT(id_at(m, &q, 1, 0, 1), 0);
    CHECK_NEAR(w_at(m, &q, 1, 0, 1), 0.25, 1e-7);
    /* row 2 (decode) layer 1: 0.2,0.2,0.5,0.1 -> 2, 0 */
    CHECK_EQ_INT(id_at(m, &q, 2, 1, 0), 2);
    CHECK_EQ_INT(id_at(m, &q, 2, 1, 1), 0);
    CHECK_NEAR(q.probs[ms_probs_index(m, 0, 1) + 3], 0.1, 1e-7); /* raw, not renormalised */
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1);
    CHECK_EQ_INT(q.id, 5);
    CHECK_EQ_INT(q.prompt_len, 1);
    CHECK_EQ_INT(q.output_len, 0);
    CHECK_EQ_INT(id_at(m, &q, 0, 1, 0), 0); /* 0.3,0.3,... -> 0 then 1 */
    CHECK_EQ_INT(id_at(m, &q, 0, 1, 1), 1);
    ms_request_free(&q);
    ms_reader_close(r);
    remove("test_import_formats_d.h5");
}

int main(void)
{
    test_jsonl();
    test_densecsv();
    CHECK_DONE();
}
