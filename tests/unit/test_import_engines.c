/* sglang / vllm / hf-logits importers (issue 17 part 3).  Every fixture in
 * tests/data/engine encodes the same routing (docs/traces.md, "Serving
 * engines"): 1 prompt token + 1 fed-back generated token, L = 2, K = 2, J = 4,
 *   row 0: layer 0 -> [1, 3], layer 1 -> [0, 2]
 *   row 1: layer 0 -> [2, 1], layer 1 -> [3, 0]
 * so each must import to 1 request, prompt_len 1, output_len 1, those ids.
 * The engines give no weights: probs_kind topk_ids, 1/K = 0.5 each.  The HF
 * logits give softmax probabilities whose top-2 are the same ids (values
 * from the research notes, worked with float64 softmax by hand). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "traces/import/import.h"

static const int32_t want[2][2][2] = {{{1, 3}, {0, 2}}, {{2, 1}, {3, 0}}};

typedef int (*import_fn)(const char *, const char *, const ms_import_opts *, ms_import_report *, ms_err *);

static int read_one(const char *out, ms_trace_meta *meta, ms_request *q)
{
    ms_err err = {{0}};
    ms_trace_reader *r = ms_reader_open(out, &err);
    CHECK(r != NULL);
    if (!r)
        return -1;
    int got = ms_reader_next(r, q, &err);
    CHECK_EQ_INT(got, 1);
    *meta = *ms_reader_meta(r);
    meta->expert_bytes = meta->dense_bytes = NULL; /* owned by the reader */
    CHECK_EQ_INT(ms_reader_next(r, q + 1, &err), 0);
    ms_reader_close(r);
    return got == 1 ? 0 : -1;
}

static void check_example(import_fn fn, const char *file, ms_import_opts *o, int ids_only)
{
    char in[512], out[512];
    snprintf(in, sizeof in, MS_TEST_DATA "/engine/%s", file);
    snprintf(out, sizeof out, "test_import_engines_%s.h5", file);
    ms_import_report rep;
    ms_err err = {{0}};
    int rc = fn(in, out, o, &rep, &err);
    CHECK_EQ_INT(rc, 0);
    if (rc) {
        fprintf(stderr, "%s: %s\n", file, err.msg);
        return;
    }
    ms_trace_meta m;
    ms_request q[2];
    memset(q, 0, sizeof q);
    if (read_one(out, &m, q))
        return;
    CHECK_EQ_INT(m.L, 2);
    CHECK_EQ_INT(m.K, 2);
    CHECK_EQ_INT(m.probs_kind, ids_only ? MS_PROBS_TOPK_IDS : MS_PROBS_FULL);
    CHECK_EQ_INT(q[0].prompt_len, 1);
    CHECK_EQ_INT(q[0].output_len, 1);
    for (uint32_t t = 0; t < 2; t++)
        for (uint32_t l = 0; l < 2; l++)
            for (uint32_t k = 0; k < 2; k++) {
                size_t c = ms_topk_index(&m, t, l) + k;
                CHECK_EQ_INT(q[0].topk_ids[c], want[t][l][k]);
                if (ids_only)
                    CHECK_NEAR(q[0].topk_w[c], 0.5, 0);
            }
    if (!ids_only) { /* softmax of [0, 1.5, 2, -2] (token 1, layer 0) and [2, -1, 1, 0] (token 0, layer 1) */
        CHECK_NEAR(q[0].probs[ms_probs_index(&m, 1, 0) + 2], 0.568123, 1e-6);
        CHECK_NEAR(q[0].probs[ms_probs_index(&m, 1, 0) + 1], 0.344584, 1e-6);
        CHECK_NEAR(q[0].probs[ms_probs_index(&m, 0, 1) + 0], 0.643914, 1e-6);
        CHECK_NEAR(q[0].topk_w[ms_topk_index(&m, 1, 1)], 0.597695, 1e-6);
    }
    ms_request_free(&q[0]);
    ms_request_free(&q[1]);
}

/* ---- payloads built here: dense layers and zero-filled cells ---- */

static void b64(const uint8_t *b, size_t n, char *out)
{
    static const char *t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < n ? b[i + 2] : 0);
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        out[o++] = i + 1 < n ? t[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[o] = '\0';
}

/* A /generate response with int32 ids [rows][3][2]: engine layer 0 dense
 * (all 0), layers 1-2 the example; row 1 layer 2 zero-filled ([0, 0]). */
static void test_dense_layer_and_zero_cell(void)
{
    int32_t ids[2][3][2] = {{{0, 0}, {1, 3}, {0, 2}}, {{0, 0}, {2, 1}, {0, 0}}};
    uint8_t raw[sizeof ids];
    for (size_t i = 0; i < sizeof ids / 4; i++) {
        uint32_t v = (uint32_t)((int32_t *)ids)[i];
        for (int b = 0; b < 4; b++)
            raw[4 * i + (size_t)b] = (uint8_t)(v >> (8 * b));
    }
    char text[256];
    b64(raw, sizeof raw, text);
    const char *in = "test_import_engines_dense.jsonl";
    FILE *f = fopen(in, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fprintf(f, "{\"meta_info\": {\"id\": \"a\", \"prompt_tokens\": 1, \"completion_tokens\": 2, \"routed_experts\": "
               "\"%s\"}}\n",
            text);
    fclose(f);
    ms_import_opts o;
    ms_import_opts_init(&o);
    o.layers = 2;
    o.engine_layers = 3;
    o.topk = 2;
    o.experts = 4;
    o.expert_bytes = 1;
    ms_import_report rep;
    ms_err err = {{0}};
    int rc = ms_import_sglang(in, "test_import_engines_dense.h5", &o, &rep, &err);
    CHECK_EQ_INT(rc, 0);
    if (rc) {
        fprintf(stderr, "%s\n", err.msg);
        return;
    }
    CHECK_EQ_INT(rep.missing_decode, 2); /* row 1 layer 1 (engine layer 2): both slots */
    CHECK(strstr(rep.notes, "dense layers dropped (all cells 0): engine layers 0") != NULL);
    ms_trace_meta m;
    ms_request q[2];
    memset(q, 0, sizeof q);
    if (read_one("test_import_engines_dense.h5", &m, q))
        return;
    CHECK_EQ_INT(q[0].topk_ids[ms_topk_index(&m, 0, 0)], 1);
    CHECK_EQ_INT(q[0].topk_ids[ms_topk_index(&m, 1, 0) + 1], 1);
    CHECK_EQ_INT(q[0].topk_ids[ms_topk_index(&m, 1, 1)], -1);
    CHECK_NEAR(q[0].topk_w[ms_topk_index(&m, 1, 1)], 0, 0);
    ms_request_free(&q[0]);
    ms_request_free(&q[1]);
    /* the same with L = 3 claimed: a dense layer where none is expected */
    o.layers = 3;
    rc = ms_import_sglang(in, "test_import_engines_dense.h5", &o, &rep, &err);
    CHECK_EQ_INT(rc, -1);
    CHECK(strstr(err.msg, "3 engine layers for L = 3 MoE layers, but 1 layers have all cells 0 (0): expected 0") !=
          NULL);
}

int main(void)
{
    ms_import_opts o;
    ms_import_opts_init(&o);
    o.layers = 2;
    o.topk = 2;
    o.experts = 4;
    o.expert_bytes = 1;
    const char *sglang[] = {"sglang_generate.json", "sglang_generate_stream.txt", "sglang_chat.json",
                            "sglang_chat_stream.txt"};
    for (size_t i = 0; i < 4; i++)
        check_example(ms_import_sglang, sglang[i], &o, 1);
    ms_import_opts v;
    ms_import_opts_init(&v);
    v.experts = 4;
    v.expert_bytes = 1;
    check_example(ms_import_vllm, "vllm_chat.json", &v, 1);
    v.prompt_len = 1; /* /inference/v1/generate and the offline .npy have no usage */
    check_example(ms_import_vllm, "vllm_generate.json", &v, 1);
    check_example(ms_import_vllm, "vllm_offline.npy", &v, 1);
    test_dense_layer_and_zero_cell();
    if (getenv("MOESIM_PYTHON")) {
        ms_import_opts h;
        ms_import_opts_init(&h);
        h.experts = 4;
        h.topk = 2;
        h.expert_bytes = 1;
        h.prompt_len = 1;
        check_example(ms_import_hf_logits, "hf_router_logits.npy", &h, 0);
    }
    CHECK_DONE();
}
