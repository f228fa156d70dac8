/* dense-csv importer modes (issue 17 part 2), cell by cell on the fixtures
 * of tests/data/densecsv: files from layer2, id columns, --tokens-per-seq +
 * --prompt-len, and raw softmax kept only at the top-k.  Expected cells are
 * read off the fixture rows by hand (comments). */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "traces/import/import.h"

static ms_trace_reader *import(const char *dir, const char *out, ms_import_opts *o)
{
    o->topk = 2;
    o->expert_bytes = 1000;
    ms_err err = {{0}};
    ms_import_report rep;
    int rc = ms_import_densecsv(dir, out, o, &rep, &err);
    CHECK_EQ_INT(rc, 0);
    if (rc) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    ms_trace_reader *r = ms_reader_open(out, &err);
    CHECK(r != NULL);
    return r;
}

static void test_from_layer2(void)
{
    ms_import_opts o;
    ms_import_opts_init(&o);
    o.tokens_per_seq = 2;
    o.prompt_len = 1;
    ms_trace_reader *r = import(MS_TEST_DATA "/densecsv/from_layer2", "test_dense_modes_l2.h5", &o);
    if (!r)
        return;
    const ms_trace_meta *m = ms_reader_meta(r);
    CHECK_EQ_INT(m->L, 2);
    CHECK_EQ_INT(m->J, 4); /* layer_id and token_id are not experts */
    CHECK_EQ_INT(m->probs_kind, MS_PROBS_FULL);
    ms_err err;
    ms_request q;
    memset(&q, 0, sizeof q);
    /* sequence 1 = rows 3-4 of the files: prompt row 0.7,0.1,0.1,0.1 (layer2)
     * and 0.2,0.2,0.5,0.1 (layer3); decode row 0.05,0.05,0.6,0.3 / 0.3,0.3,0.2,0.2 */
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1);
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1);
    CHECK_EQ_INT(q.id, 1);
    CHECK_EQ_INT(q.prompt_len, 1);
    CHECK_EQ_INT(q.output_len, 1);
    size_t c = ms_topk_index(m, 0, 0);
    CHECK_EQ_INT(q.topk_ids[c], 0);
    CHECK_NEAR(q.topk_w[c], 0.7, 1e-6);
    c = ms_topk_index(m, 0, 1);
    CHECK_EQ_INT(q.topk_ids[c], 2);
    c = ms_topk_index(m, 1, 0);
    CHECK_EQ_INT(q.topk_ids[c], 2);
    CHECK_EQ_INT(q.topk_ids[c + 1], 3);
    c = ms_topk_index(m, 1, 1); /* 0.3, 0.3 tie: lower id first */
    CHECK_EQ_INT(q.topk_ids[c], 0);
    CHECK_EQ_INT(q.topk_ids[c + 1], 1);
    CHECK_NEAR(q.probs[ms_probs_index(m, 1, 1) + 3], 0.2, 1e-6);
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 0);
    ms_request_free(&q);
    ms_reader_close(r);
}

static void test_topk_raw(void)
{
    ms_import_opts o;
    ms_import_opts_init(&o);
    o.probs_kind = MS_PROBS_TOPK_RAW;
    ms_trace_reader *r = import(MS_TEST_DATA "/densecsv/topk_raw", "test_dense_modes_raw.h5", &o);
    if (!r)
        return;
    const ms_trace_meta *m = ms_reader_meta(r);
    CHECK_EQ_INT(m->probs_kind, MS_PROBS_TOPK_RAW);
    CHECK(strstr(m->source, "top-k only") != NULL);
    ms_err err;
    ms_request q;
    memset(&q, 0, sizeof q);
    /* request 0: row ",0.5,0.3," -> [1, 2] (0.5, 0.3); row "0.6,,,0.25" -> [0, 3] */
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1);
    CHECK_EQ_INT(q.prompt_len, 2);
    CHECK(q.probs == NULL);
    CHECK_EQ_INT(q.topk_ids[0], 1);
    CHECK_EQ_INT(q.topk_ids[1], 2);
    CHECK_NEAR(q.topk_w[0], 0.5, 1e-7);
    CHECK_NEAR(q.topk_w[1], 0.3, 1e-7);
    CHECK_EQ_INT(q.topk_ids[2], 0);
    CHECK_EQ_INT(q.topk_ids[3], 3);
    CHECK_NEAR(q.topk_w[3], 0.25, 1e-7);
    /* request 1: one value kept (",,0.45,") -> [2, -1] */
    CHECK_EQ_INT(ms_reader_next(r, &q, &err), 1);
    CHECK_EQ_INT(q.id, 1);
    CHECK_EQ_INT(q.topk_ids[0], 2);
    CHECK_EQ_INT(q.topk_ids[1], -1);
    CHECK_NEAR(q.topk_w[1], 0, 0);
    ms_request_free(&q);
    ms_reader_close(r);
}

int main(void)
{
    test_from_layer2();
    test_topk_raw();
    CHECK_DONE();
}
