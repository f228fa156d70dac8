/* route-csv importer: exact parse of a hand-written fixture, one error per
 * kind of bad input (line number and field in the message), and the two
 * real BigMoeOnEdge traces (counts cross-checked with awk). */
#include <stdio.h>
#include <unistd.h>

#include "check.h"
#include "traces/import/import.h"

#define FIXTURES MS_TEST_DATA "/routecsv"
#define REAL_DIR MS_TEST_SHARED "/traces/bigmoeonedge"
#define TMP_CSV "test_import_routecsv_tmp.csv"

static int32_t id_at(const ms_trace_meta *m, const ms_request *r, uint32_t row, uint32_t l, uint32_t k)
{
    return r->topk_ids[ms_topk_index(m, row, l) + k];
}
static float w_at(const ms_trace_meta *m, const ms_request *r, uint32_t row, uint32_t l, uint32_t k)
{
    return r->topk_w[ms_topk_index(m, row, l) + k];
}
static int hit_at(const ms_trace_meta *m, const ms_request *r, uint32_t row, uint32_t l, uint32_t k)
{
    return r->recorded_hit[ms_topk_index(m, row, l) + k];
}

/* Checks one cell: id, weight, residency. */
#define CHECK_CELL(m, r, row, l, k, id, w, hit)                \
    do {                                                       \
        CHECK_EQ_INT(id_at(m, r, row, l, k), id);              \
        CHECK_NEAR(w_at(m, r, row, l, k), w, 1e-7);            \
        CHECK_EQ_INT(hit_at(m, r, row, l, k), hit);            \
    } while (0)

static void test_small_fixture(void)
{
    ms_routecsv_trace t;
    ms_import_report rep;
    ms_err err = {{0}};
    int rc = ms_routecsv_parse(FIXTURES "/small.csv", &t, &rep, &err);
    CHECK_EQ_INT(rc, 0);
    if (rc) {
        fprintf(stderr, "%s\n", err.msg);
        ms_routecsv_free(&t);
        return;
    }
    const ms_trace_meta *m = &t.meta;
    CHECK_EQ_INT(m->L, 2);
    CHECK_EQ_INT(m->J, 8);
    CHECK_EQ_INT(m->K, 2);
    CHECK_EQ_INT(m->probs_kind, MS_PROBS_TOPK_RENORM);
    CHECK_EQ_INT(m->has_recorded_hits, 1);
    CHECK_EQ_INT(m->hidden_size, 0);
    CHECK_EQ_INT(m->expert_bytes[0], 1000);
    CHECK_EQ_INT(m->expert_bytes[1], 2000);
    CHECK_EQ_INT(m->dense_bytes[0], 500);
    CHECK_EQ_INT(m->dense_bytes[1], 600);
    CHECK(!strcmp(m->model_name, "Tiny-MoE-Q4 (tinymoe)"));
    CHECK(!strcmp(m->source, "small.csv (route_trace v1)"));
    CHECK_EQ_INT(t.n_requests, 2);

    /* turn 0: prefill steps 0..2, decode steps 3 and 4 */
    const ms_request *r = &t.requests[0];
    CHECK_EQ_INT(r->id, 0);
    CHECK_NEAR(r->arrival_s, 0, 0);
    CHECK_EQ_INT(r->prompt_len, 3);
    CHECK_EQ_INT(r->output_len, 2);
    CHECK_EQ_INT(r->n_iters, 3);
    CHECK_EQ_INT(r->n_rows, 5);
    CHECK_EQ_INT(r->iters[0].phase, MS_PHASE_PREFILL);
    CHECK_EQ_INT(r->iters[0].row0, 0);
    CHECK_EQ_INT(r->iters[0].n_rows, 3);
    CHECK_EQ_INT(r->iters[1].phase, MS_PHASE_DECODE);
    CHECK_EQ_INT(r->iters[1].row0, 3);
    CHECK_EQ_INT(r->iters[1].n_rows, 1);
    CHECK_EQ_INT(r->iters[2].row0, 4);
    CHECK_CELL(m, r, 0, 0, 0, 3, 0.6f, 0);
    CHECK_CELL(m, r, 0, 0, 1, 5, 0.4f, 0);
    CHECK_CELL(m, r, 0, 1, 0, -1, 0, -1); /* layer 1 absent for steps 0 and 1 */
    CHECK_CELL(m, r, 0, 1, 1, -1, 0, -1);
    CHECK_CELL(m, r, 1, 0, 0, 1, 0.7f, 0);
    CHECK_CELL(m, r, 1, 0, 1, 2, 0.3f, 0);
    CHECK_CELL(m, r, 1, 1, 1, -1, 0, -1);
    CHECK_CELL(m, r, 2, 0, 0, 7, 0.55f, 0);
    CHECK_CELL(m, r, 2, 0, 1, -1, 0, -1); /* partial group: one slot of two */
    CHECK_CELL(m, r, 2, 1, 0, 4, 0.5f, 0);
    CHECK_CELL(m, r, 2, 1, 1, 6, 0.5f, 0);
    CHECK_CELL(m, r, 3, 0, 0, 3, 0.8f, 1);
    CHECK_CELL(m, r, 3, 0, 1, 1, 0.2f, 0);
    CHECK_CELL(m, r, 3, 1, 0, 4, 0.9f, 1);
    CHECK_CELL(m, r, 3, 1, 1, 0, 0.1f, 1);
    CHECK_CELL(m, r, 4, 0, 0, 2, 0.6f, 0);
    CHECK_CELL(m, r, 4, 1, 1, 4, 0.25f, 1);

    /* turn 1: rows given in reverse slot order; ids must follow `slot` */
    r = &t.requests[1];
    CHECK_EQ_INT(r->id, 1);
    CHECK_EQ_INT(r->prompt_len, 1);
    CHECK_EQ_INT(r->output_len, 1);
    CHECK_EQ_INT(r->n_iters, 2);
    CHECK_EQ_INT(r->n_rows, 2);
    CHECK_CELL(m, r, 0, 0, 0, 7, 0.75f, 0);
    CHECK_CELL(m, r, 0, 0, 1, 0, 0.25f, 0);
    CHECK_CELL(m, r, 0, 1, 0, 2, 0.5f, 0);
    CHECK_CELL(m, r, 0, 1, 1, 1, 0.5f, 0);
    CHECK_CELL(m, r, 1, 0, 0, 5, 0.6f, 1);
    CHECK_CELL(m, r, 1, 1, 0, 4, 0.55f, 0);
    CHECK_CELL(m, r, 1, 1, 1, 3, 0.45f, 1);

    CHECK_EQ_INT(rep.rows, 23);
    CHECK_EQ_INT(rep.requests, 2);
    CHECK_EQ_INT(rep.prefill_iters, 2);
    CHECK_EQ_INT(rep.decode_iters, 3);
    CHECK_EQ_INT(rep.prefill_rows, 4);
    CHECK_EQ_INT(rep.prefill_cells, 16);
    CHECK_EQ_INT(rep.decode_cells, 12);
    CHECK_EQ_INT(rep.missing_prefill, 5);
    CHECK_EQ_INT(rep.missing_decode, 0);
    CHECK_EQ_INT(rep.n_listed, 5);
    CHECK_EQ_INT(rep.first_missing[0].step, 0);
    CHECK_EQ_INT(rep.first_missing[0].layer, 1);
    CHECK_EQ_INT(rep.first_missing[0].slot, 0);
    CHECK_EQ_INT(rep.first_missing[4].step, 2);
    CHECK_EQ_INT(rep.first_missing[4].layer, 0);
    CHECK_EQ_INT(rep.first_missing[4].slot, 1);
    char line[1024];
    ms_import_report_format(&rep, line, sizeof line);
    CHECK_STR_CONTAINS(line, "imported small.csv: 2 requests, 2 prefill iterations (4 token rows) + 3 decode iterations, 23 CSV rows; 5 missing cells (");
    CHECK_STR_CONTAINS(line, "first: turn 0 step 0 layer 1 slot 0, turn 0 step 0 layer 1 slot 1,");
    CHECK_STR_CONTAINS(line, "turn 0 step 2 layer 0 slot 1");
    ms_routecsv_free(&t);
}

#define HDR                                                                      \
    "# route_trace v1\n"                                                         \
    "# model=/m/Tiny.gguf arch=tiny n_layer=2 n_expert=8 n_expert_used=2\n"      \
    "# layer=0 expert_bytes=1000 dense_bytes=500\n"                              \
    "# layer=1 expert_bytes=2000 dense_bytes=600\n"
#define COLS "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes\n"
#define ROW6 "0,0,0,0,0,3,0.6,0,0\n" /* a valid first data row (line 6) */

typedef struct {
    const char *text;
    const char *expect; /* substring of the error, after "FILE:" */
} bad_case;

/* Every case starts from HDR/COLS (lines 1-5) unless it breaks the header. */
static const bad_case bad_cases[] = {
    {"", "empty file"},
    {"# route_trace v2\n", ":1: header: expected '# route_trace v1', got '# route_trace v2'"},
    {"# route_trace v1\n" COLS, ":2: header: model line"},
    {"# route_trace v1\n# model=/m arch=a n_layer=2 n_expert=8 n_expert_used=2 extra=1\n", ":2: header: unknown key 'extra'"},
    {"# route_trace v1\n# model=/m arch=a n_layer=2 n_expert=8\n", ":2: header: key 'n_expert_used' missing"},
    {"# route_trace v1\n# model=/m arch=a n_layer=2 n_expert=8 n_expert_used=9\n", ":2: field n_expert_used: value 9 exceeds n_expert 8"},
    {"# route_trace v1\n# model=/m arch=a n_layer=x n_expert=8 n_expert_used=2\n", ":2: field n_layer: 'x' is not a non-negative integer"},
    {"# route_trace v1\n# model=/m arch=a n_layer=2 n_expert=8 n_expert_used=2\n# layer=1 expert_bytes=1 dense_bytes=1\n", ":3: field layer: value 1, expected 0"},
    {"# route_trace v1\n# model=/m arch=a n_layer=2 n_expert=8 n_expert_used=2\n# layer=0 expert_bytes=1 dense_bytes=1\n" COLS, ":4: header: layer line for layer 1 missing"},
    {"# route_trace v1\n# model=/m arch=a n_layer=1 n_expert=8 n_expert_used=2\n# layer=0 expert_bytes=0 dense_bytes=1\n", ":3: field expert_bytes: value 0 is below 1"},
    {"# route_trace v1\n# model=/m arch=a n_layer=1 n_expert=8 n_expert_used=2\n# comment\n", ":3: header: unknown header line '# comment'"},
    {HDR "turn,phase,step,layer,slot,expert,weight,residency\n", ":5: header: column line"},
    {HDR, ":4: header: file ends before the column line"},
    {HDR COLS, ":5: no data rows"},
    {HDR COLS "0,0,x,0,0,3,0.6,0,0\n", ":6: field step: 'x' is not a non-negative integer"},
    {HDR COLS "0,0,0,0,0,-1,0.6,0,0\n", ":6: field expert: '-1' is not a non-negative integer"},
    {HDR COLS "0,0,0,0,0,,0.6,0,0\n", ":6: field expert: '' is not a non-negative integer"},
    {HDR COLS "0,0,0,2,0,3,0.6,0,0\n", ":6: field layer: value 2 out of range [0, 1] (n_layer=2)"},
    {HDR COLS "0,0,0,0,0,8,0.6,0,0\n", ":6: field expert: value 8 out of range [0, 7] (n_expert=8)"},
    {HDR COLS "0,0,0,0,2,3,0.6,0,0\n", ":6: field slot: value 2 out of range [0, 1] (n_expert_used=2)"},
    {HDR COLS "0,2,0,0,0,3,0.6,0,0\n", ":6: field phase: value 2 out of range [0, 1]"},
    {HDR COLS "0,0,0,0,0,3,nan,0,0\n", ":6: field weight: 'nan' is not a finite number"},
    {HDR COLS "0,0,0,0,0,3,-0.5,0,0\n", ":6: field weight: value -0.5 is negative"},
    {HDR COLS "0,0,0,0,0,3,1.5,0,0\n", ":6: field weight: value 1.5 exceeds 1"},
    {HDR COLS "0,0,0,0,0,3,0.6,2,0\n", ":6: field residency: value 2 out of range [0, 1]"},
    {HDR COLS "0,0,0,0,0,3,0.6,0,999\n", ":6: field expert_bytes: value 999 disagrees with the header's 1000 for layer 0"},
    {HDR COLS ROW6 "0,0,0,0,0,4,0.4,0,0\n", ":7: field slot: duplicate cell step 0 layer 0 slot 0 (first on line 6)"},
    {HDR COLS ROW6 "0,0,0,0,1,3,0.4,0,0\n", ":7: field expert: expert 3 already routed in step 0 layer 0 on line 6"},
    {HDR COLS ROW6 "0,0,0,0,1,5,0.3,0,0\n", ":7: field weight: weights of step 0 layer 0 sum to 0.9"},
    {HDR COLS "0,1,0,0,0,3,0.6,0,0\n", ":6: field phase: decode row before any prefill row of turn 0"},
    {HDR COLS ROW6 "0,1,1,0,0,3,0.6,0,0\n0,0,0,1,0,3,0.6,0,0\n", ":8: field phase: prefill row after decode rows of turn 0"},
    {HDR COLS ROW6 "0,0,1,0,0,3,0.6,0,0\n0,1,1,1,0,3,0.6,0,0\n", ":8: field step: decode step 1 is not after the prefill steps (last 1) of turn 0"},
    {HDR COLS "0,0,1,0,0,3,0.6,0,0\n", ":6: field step: prefill steps of turn 0 start at 1, expected 0"},
    {HDR COLS ROW6 "0,0,2,0,0,3,0.6,0,0\n", ":7: field step: step 2 follows step 0 in turn 0 (step 1 has no rows)"},
    {HDR COLS ROW6 "0,1,2,0,0,3,0.6,0,0\n", ":7: field step: first decode step of turn 0 is 2, expected 1"},
    {HDR COLS ROW6 "0,0,0,1,0,3,0.7,0,0\n0,0,0,1,1,2,0.4,0,0\n", ":8: field weight: weights of step 0 layer 1 sum to 1.1, expected 1"},
    {"# route_trace v1\n# model=/m arch=a n_layer=2 n_expert=8 n_expert_used=3\n# layer=0 expert_bytes=1 dense_bytes=1\n"
     "# layer=1 expert_bytes=1 dense_bytes=1\n" COLS "0,0,0,0,0,3,0.7,0,0\n0,0,0,0,2,2,0.4,0,0\n",
     ":7: field weight: weights of step 0 layer 0 sum to 1.1, more than 1"},
    {HDR COLS "1,0,0,0,0,3,0.6,0,0\n0,0,0,0,0,3,0.6,0,0\n", ":7: field turn: value 0 after turn 1"},
    {HDR COLS ROW6 "0,0,1,0,0,1,0.", ":7: expected 9 fields (turn,phase,step,layer,slot,expert,weight,residency,expert_bytes), got 7 (truncated last line?)"},
    {HDR COLS ROW6 "0,0,1,0,0,1,0.7,0,0", ":7: last line has no newline (truncated file?)"},
    {HDR COLS "0,0,0,0,0,3,0.6,0,0,1\n", ":6: expected 9 fields"},
};

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
}

static void test_bad_inputs(void)
{
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        write_file(TMP_CSV, bad_cases[i].text);
        ms_routecsv_trace t;
        ms_err err = {{0}};
        int rc = ms_routecsv_parse(TMP_CSV, &t, NULL, &err);
        if (rc != -1)
            fprintf(stderr, "bad case %zu parsed without error\n", i);
        CHECK_EQ_INT(rc, -1);
        CHECK_STR_CONTAINS(err.msg, TMP_CSV);
        CHECK_STR_CONTAINS(err.msg, bad_cases[i].expect);
        CHECK(strchr(err.msg, '\n') == NULL);
        ms_routecsv_free(&t);
    }
    ms_routecsv_trace t;
    ms_err err = {{0}};
    CHECK_EQ_INT(ms_routecsv_parse("no/such/file.csv", &t, NULL, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "no/such/file.csv: cannot open");
    ms_routecsv_free(&t);
    remove(TMP_CSV);
}

/* CRLF line ends are accepted; the rows are the same. */
static void test_crlf(void)
{
    write_file(TMP_CSV, "# route_trace v1\r\n# model=/m/T.gguf arch=t n_layer=1 n_expert=4 n_expert_used=1\r\n"
                        "# layer=0 expert_bytes=10 dense_bytes=0\r\n"
                        "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes\r\n"
                        "0,0,0,0,0,3,1,0,10\r\n0,1,1,0,0,2,1,1,0\r\n");
    ms_routecsv_trace t;
    ms_err err = {{0}};
    CHECK_EQ_INT(ms_routecsv_parse(TMP_CSV, &t, NULL, &err), 0);
    if (t.n_requests == 1) {
        CHECK_EQ_INT(t.requests[0].topk_ids[0], 3);
        CHECK_EQ_INT(t.requests[0].topk_ids[1], 2);
        CHECK_EQ_INT(t.requests[0].recorded_hit[1], 1);
    }
    CHECK_EQ_INT(t.n_requests, 1);
    ms_routecsv_free(&t);
    remove(TMP_CSV);
}

typedef struct {
    const char *file;
    uint32_t L, K, P, D;
    uint64_t rows, missing, decode_hits;
    uint32_t probe_layer;
    uint64_t probe_expert_bytes, probe_dense_bytes;
    uint32_t first_missing_layer;
} real_case;

/* Expected values, computed independently from the CSV with awk:
 *   rows:     grep -v '^#' F | tail -n +2 | wc -l
 *   P, D:     distinct steps with phase 0 / phase 1
 *   missing:  for each prefill step s, layer l < n_layer, slot k < K, count
 *             (s, l, k) with no row  (awk array over "$3 $4 $5")
 *   decode_hits: awk -F, '$2==1 {h += $8} END {print h}'
 * In both files the missing cells are exactly the last MoE layer for every
 * prompt token but the last (llama.cpp skips the last layer's FFN for
 * tokens whose logits are not needed), hence (P - 1) * K. */
static const real_case real_cases[] = {
    {"qwen.route.csv", 48, 6, 28, 128, 44766, 162, 29597, 6, 2654208, 11682816, 47},
    {"gptoss.route.csv", 36, 2, 85, 64, 10560, 168, 2066, 4, 13219200, 22727168, 35},
};

static void test_real_trace(const real_case *c)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", REAL_DIR, c->file);
    ms_routecsv_trace t;
    ms_import_report rep;
    ms_err err = {{0}};
    int rc = ms_routecsv_parse(path, &t, &rep, &err);
    CHECK_EQ_INT(rc, 0);
    if (rc || t.n_requests != 1) {
        fprintf(stderr, "%s: %s\n", c->file, err.msg);
        CHECK_EQ_INT(t.n_requests, 1);
        ms_routecsv_free(&t);
        return;
    }
    const ms_trace_meta *m = &t.meta;
    const ms_request *r = &t.requests[0];
    CHECK_EQ_INT(m->L, c->L);
    CHECK_EQ_INT(m->J, 128);
    CHECK_EQ_INT(m->K, c->K);
    CHECK_EQ_INT(m->expert_bytes[c->probe_layer], c->probe_expert_bytes);
    CHECK_EQ_INT(m->dense_bytes[c->probe_layer], c->probe_dense_bytes);
    CHECK_EQ_INT(r->prompt_len, c->P);
    CHECK_EQ_INT(r->iters[0].n_rows, c->P);
    CHECK_EQ_INT(r->n_iters, 1 + c->D);
    CHECK_EQ_INT(r->n_rows, c->P + c->D);
    CHECK_EQ_INT(r->output_len, c->D);
    CHECK_EQ_INT(rep.rows, c->rows);
    CHECK_EQ_INT(rep.prefill_rows, c->P);
    CHECK_EQ_INT(rep.decode_iters, c->D);
    CHECK_EQ_INT(rep.missing_prefill, c->missing);
    CHECK_EQ_INT(rep.missing_decode, 0);
    CHECK_EQ_INT(rep.first_missing[0].step, 0);
    CHECK_EQ_INT(rep.first_missing[0].layer, c->first_missing_layer);
    CHECK_EQ_INT(rep.first_missing[0].slot, 0);
    uint64_t hits = 0, missing = 0;
    for (uint32_t row = 0; row < r->n_rows; row++)
        for (uint32_t l = 0; l < m->L; l++)
            for (uint32_t k = 0; k < m->K; k++) {
                hits += row >= c->P && hit_at(m, r, row, l, k) == 1;
                missing += id_at(m, r, row, l, k) == -1;
            }
    CHECK_EQ_INT(hits, c->decode_hits);
    CHECK_EQ_INT(missing, c->missing);
    ms_routecsv_free(&t);
}

static void test_real_values(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/qwen.route.csv", REAL_DIR);
    ms_routecsv_trace t;
    ms_import_report rep;
    ms_err err = {{0}};
    if (ms_routecsv_parse(path, &t, &rep, &err) != 0 || t.n_requests != 1) {
        CHECK(!"qwen.route.csv parses");
        ms_routecsv_free(&t);
        return;
    }
    const ms_trace_meta *m = &t.meta;
    const ms_request *r = &t.requests[0];
    CHECK(!strcmp(m->model_name, "Qwen3-30B-A3B-Q4_K_M (qwen3moe)"));
    CHECK(!strcmp(m->source, "qwen.route.csv (route_trace v1)"));
    /* first data row: 0,0,0,0,0,49,0.221297,0,3059712 */
    CHECK_CELL(m, r, 0, 0, 0, 49, 0.221297f, 0);
    CHECK_CELL(m, r, 0, 0, 5, 70, 0.112209f, 0);
    /* last row: 0,1,155,47,5,126,0.0559865,1,0  (step 155 = row 155) */
    CHECK_CELL(m, r, 155, 47, 5, 126, 0.0559865f, 1);
    CHECK_CELL(m, r, 26, 47, 0, -1, 0, -1);
    CHECK(id_at(m, r, 27, 47, 0) >= 0); /* last prompt token has its last layer */
    char line[1024];
    ms_import_report_format(&rep, line, sizeof line);
    CHECK_STR_CONTAINS(line, "imported qwen.route.csv: 1 request, 1 prefill iteration (28 token rows) + 128 decode iterations, "
                             "44766 CSV rows; 162 missing cells (2.0 % of prefill cells), first: step 0 layer 47 slot 0, "
                             "step 0 layer 47 slot 1");
    ms_routecsv_free(&t);
}

/* Every array of two requests is equal (same meta). */
static void check_same_request(const ms_trace_meta *m, const ms_request *a, const ms_request *b)
{
    CHECK_EQ_INT(a->id, b->id);
    CHECK_EQ_INT(a->prompt_len, b->prompt_len);
    CHECK_EQ_INT(a->output_len, b->output_len);
    CHECK_EQ_INT(a->n_iters, b->n_iters);
    CHECK_EQ_INT(a->n_rows, b->n_rows);
    if (a->n_iters != b->n_iters || a->n_rows != b->n_rows || !b->recorded_hit)
        return;
    CHECK(!memcmp(a->iters, b->iters, a->n_iters * sizeof *a->iters));
    size_t cells = (size_t)a->n_rows * m->L * m->K;
    CHECK(!memcmp(a->topk_ids, b->topk_ids, cells * sizeof *a->topk_ids));
    CHECK(!memcmp(a->topk_w, b->topk_w, cells * sizeof *a->topk_w));
    CHECK(!memcmp(a->recorded_hit, b->recorded_hit, cells));
}

/* Import to HDF5, read back with the trace reader: same meta, same requests. */
static void test_round_trip(const char *csv, const char *h5)
{
    ms_routecsv_trace t;
    ms_import_report rep;
    ms_err err = {{0}};
    CHECK_EQ_INT(ms_routecsv_parse(csv, &t, NULL, &err), 0);
    remove(h5);
    int rc = ms_import_routecsv(csv, h5, &rep, &err);
    CHECK_EQ_INT(rc, 0);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    ms_trace_reader *rd = rc ? NULL : ms_reader_open(h5, &err);
    CHECK(rc || rd != NULL);
    if (rd) {
        const ms_trace_meta *m = ms_reader_meta(rd);
        CHECK(!strcmp(m->model_name, t.meta.model_name));
        CHECK(!strcmp(m->source, t.meta.source));
        CHECK_EQ_INT(m->L, t.meta.L);
        CHECK_EQ_INT(m->J, t.meta.J);
        CHECK_EQ_INT(m->K, t.meta.K);
        CHECK_EQ_INT(m->probs_kind, MS_PROBS_TOPK_RENORM);
        CHECK_EQ_INT(m->has_recorded_hits, 1);
        CHECK_EQ_INT(m->n_requests, t.n_requests);
        CHECK_EQ_INT(m->n_requests, rep.requests);
        CHECK(!memcmp(m->expert_bytes, t.meta.expert_bytes, m->L * sizeof *m->expert_bytes));
        CHECK(!memcmp(m->dense_bytes, t.meta.dense_bytes, m->L * sizeof *m->dense_bytes));
        ms_request q;
        memset(&q, 0, sizeof q);
        uint64_t i = 0;
        while ((rc = ms_reader_next(rd, &q, &err)) == 1 && i < t.n_requests)
            check_same_request(m, &t.requests[i++], &q);
        CHECK_EQ_INT(rc, 0);
        CHECK_EQ_INT(i, t.n_requests);
        ms_request_free(&q);
        ms_reader_close(rd);
    }
    ms_routecsv_free(&t);
    remove(h5);
}

/* A CSV error found after the output was opened leaves an existing OUT as
 * it was, and no temporary file behind. */
static void test_failed_import_keeps_output(void)
{
    const char *out = "test_import_routecsv_keep.h5";
    write_file(out, "keep");
    ms_err err = {{0}};
    CHECK_EQ_INT(ms_import_routecsv(FIXTURES "/dup_cell.csv", out, NULL, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "dup_cell.csv:7: field slot: duplicate cell");
    char buf[16] = {0};
    FILE *f = fopen(out, "r");
    CHECK(f != NULL);
    if (f) {
        CHECK(fgets(buf, sizeof buf, f) != NULL);
        fclose(f);
    }
    CHECK(!strcmp(buf, "keep"));
    CHECK(access("test_import_routecsv_keep.h5.import", F_OK) != 0);
    CHECK(access("test_import_routecsv_keep.h5.import.tmp", F_OK) != 0);
    CHECK_EQ_INT(ms_import_routecsv(FIXTURES "/small.csv", FIXTURES "/small.csv", NULL, &err), -1);
    CHECK_STR_CONTAINS(err.msg, "output is the input file");
    remove(out);
}

int main(void)
{
    test_small_fixture();
    test_bad_inputs();
    test_crlf();
    for (size_t i = 0; i < sizeof real_cases / sizeof real_cases[0]; i++)
        test_real_trace(&real_cases[i]);
    test_real_values();
    test_round_trip(FIXTURES "/small.csv", "test_import_routecsv_small.h5");
    test_round_trip(REAL_DIR "/qwen.route.csv", "test_import_routecsv_qwen.h5");
    test_failed_import_keeps_output();
    CHECK_DONE();
}
