/* The tee executor and the comparison of the two timelines: see validate.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "sim/core/dvec.h"
#include "sim/core/out.h"
#include "sim/engine/report.h"
#include "sim/apps/validate.h"

typedef struct {
    ms_op op;
    ms_event sim_ev, real_ev;
    double s0, s1;    /* start and end on the simulated timeline */
    double r0, r1;    /* start and end on the real backend, once read */
} tee_op;

typedef struct {
    double sim, real;
} pair;

typedef struct {
    ms_exec sim;
    ms_exec *real;
    uint32_t L, J;
    ms_err *err;
    /* ops not yet read from the real backend, in submission order */
    tee_op *w;
    size_t wn, wcap;
    /* the latest read copy of every expert */
    pair *copy_end;
    uint64_t *copy_iter;   /* its iteration; UINT64_MAX: before the run */
    uint8_t *copy_demand;
    /* the iteration being read */
    int open;
    uint64_t iter;
    pair iter_end, prev_end;
    pair iter_start;               /* earliest start of the iteration's ops */
    pair *dense_end, *layer_end;   /* [L] */
    ms_validate_counts it_sim, it_real;
    /* totals */
    pair *layer_sum;               /* [L] */
    ms_dvec errors;
    ms_validate_result *res;
    FILE *icsv, *ocsv;
    ms_out *icsv_out, *ocsv_out;
} tee;

const char *ms_op_kind_name(ms_op_kind k)
{
    static const char *const names[MS_OP_KINDS] = {"dense", "copy", "expert_gpu", "expert_cpu"};
    return k >= 0 && k < MS_OP_KINDS ? names[k] : "unknown";
}

static int is_compute_stream(const ms_op *op)
{
    return ms_op_stream(op->kind) == MS_STREAM_COMPUTE;
}

/* The real event of the latest compute op still unread that ended, on the
 * simulated timeline, by t; MS_NO_EVENT when it has been read (it is done). */
static ms_event issue_point(const tee *t, double at)
{
    for (size_t i = t->wn; i-- > 0;)
        if (is_compute_stream(&t->w[i].op) && t->w[i].s1 <= at)
            return t->w[i].real_ev;
    return MS_NO_EVENT;
}

static ms_event real_event_of(const tee *t, ms_event sim_ev)
{
    for (size_t i = t->wn; i-- > 0;)
        if (t->w[i].sim_ev == sim_ev)
            return t->w[i].real_ev;
    return MS_NO_EVENT;
}

static void add_count(ms_validate_counts *c, int outcome)
{
    if (outcome == 0)
        c->hits++;
    else if (outcome == 1)
        c->late++;
    else
        c->misses++;
}

/* 0 hit, 1 late, 2 miss (validate.h). */
static int classify(const tee *t, uint32_t x, double copy_end, double gate_end)
{
    if (t->copy_iter[x] == t->iter && t->copy_demand[x])
        return 2;
    return copy_end <= gate_end ? 0 : 1;
}

static void close_iteration(tee *t)
{
    if (!t->open)
        return;
    /* idle before the iteration's first op (waiting for an arrival) is not latency */
    pair base = {fmax(t->prev_end.sim, t->iter_start.sim), fmax(t->prev_end.real, t->iter_start.real)};
    double sim = t->iter_end.sim - base.sim, real = t->iter_end.real - base.real;
    double e = real > 0 ? fabs(real - sim) / real : (sim > 0 ? INFINITY : 0);
    ms_dvec_push(&t->errors, e);
    pair before = base;
    for (uint32_t l = 0; l < t->L; l++) {
        t->layer_sum[l].sim += t->layer_end[l].sim - before.sim;
        t->layer_sum[l].real += t->layer_end[l].real - before.real;
        before = t->layer_end[l];
    }
    if (t->icsv)
        fprintf(t->icsv, "%llu,%.9f,%.9f,%.6f,%llu,%llu,%llu,%llu,%llu,%llu\n", (unsigned long long)t->iter, sim, real,
                e, (unsigned long long)t->it_sim.hits, (unsigned long long)t->it_sim.late,
                (unsigned long long)t->it_sim.misses, (unsigned long long)t->it_real.hits,
                (unsigned long long)t->it_real.late, (unsigned long long)t->it_real.misses);
    t->prev_end = t->iter_end;
    t->open = 0;
}

static void open_iteration(tee *t, uint64_t iter)
{
    t->open = 1;
    t->iter = iter;
    t->iter_end = t->prev_end;
    t->iter_start.sim = t->iter_start.real = INFINITY;
    for (uint32_t l = 0; l < t->L; l++)
        t->dense_end[l] = t->layer_end[l] = t->prev_end;
    memset(&t->it_sim, 0, sizeof t->it_sim);
    memset(&t->it_real, 0, sizeof t->it_real);
}

static void add_counts(ms_validate_counts *to, const ms_validate_counts *c)
{
    to->hits += c->hits;
    to->late += c->late;
    to->misses += c->misses;
    to->cpu += c->cpu;
}

/* Folds one op, read from both timelines, into the iteration's summary. */
static void account(tee *t, const tee_op *o)
{
    const ms_op *op = &o->op;
    if (!t->open || op->iteration != t->iter) {
        if (t->open) {
            add_counts(&t->res->sim, &t->it_sim);
            add_counts(&t->res->real, &t->it_real);
        }
        close_iteration(t);
        open_iteration(t, op->iteration);
    }
    uint32_t l = op->layer < t->L ? op->layer : t->L - 1;
    uint32_t x = l * t->J + (op->expert < t->J ? op->expert : 0);
    pair end = {o->s1, o->r1};
    t->iter_start.sim = fmin(t->iter_start.sim, o->s0);
    t->iter_start.real = fmin(t->iter_start.real, o->r0);
    switch (op->kind) {
    case MS_OP_COPY:
        t->copy_end[x] = end;
        t->copy_iter[x] = op->iteration;
        t->copy_demand[x] = (uint8_t)op->demand;
        return;
    case MS_OP_DENSE:
        t->dense_end[l] = end;
        break;
    case MS_OP_EXPERT_GPU:
        add_count(&t->it_sim, classify(t, x, t->copy_end[x].sim, t->dense_end[l].sim));
        add_count(&t->it_real, classify(t, x, t->copy_end[x].real, t->dense_end[l].real));
        break;
    case MS_OP_EXPERT_CPU:
        t->it_sim.cpu++;
        t->it_real.cpu++;
        break;
    default:
        return;
    }
    t->layer_end[l].sim = fmax(t->layer_end[l].sim, end.sim);
    t->layer_end[l].real = fmax(t->layer_end[l].real, end.real);
    t->iter_end.sim = fmax(t->iter_end.sim, end.sim);
    t->iter_end.real = fmax(t->iter_end.real, end.real);
}

static void add_op_duration(tee *t, const tee_op *o)
{
    ms_validate_opsum *k = &t->res->kind[o->op.kind];
    k->n++;
    k->sim_s += o->s1 - o->s0;
    k->real_s += o->r1 - o->r0;
}

static void write_op_row(tee *t, const tee_op *o)
{
    const ms_op *op = &o->op;
    fprintf(t->ocsv, "%llu,%llu,%u,%lld,%s,%u,%d,%.9f,%.9f,%.9f,%.9f\n", (unsigned long long)t->res->ops,
            (unsigned long long)op->iteration, op->layer, op->kind == MS_OP_DENSE ? -1LL : (long long)op->expert,
            ms_op_kind_name(op->kind), op->tokens, op->demand, o->s0, o->s1, o->r0, o->r1);
}

/* Reads the real times of the first n window ops, in order, and drops them. */
static int read_ops(tee *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        tee_op *o = &t->w[i];
        if (ms_exec_wait(t->real, o->real_ev, &o->r0, &o->r1, t->err))
            return -1;
        account(t, o);
        add_op_duration(t, o);
        if (t->ocsv)
            write_op_row(t, o);
        t->res->ops++;
    }
    memmove(t->w, t->w + n, (t->wn - n) * sizeof *t->w);
    t->wn -= n;
    return 0;
}

/* Reads every op two iterations or more behind `iter`. */
static int catch_up(tee *t, uint64_t iter)
{
    if (iter < 2)
        return 0;
    size_t n = 0;
    while (n < t->wn && t->w[n].op.iteration <= iter - 2)
        n++;
    return n ? read_ops(t, n) : 0;
}

static int tee_submit(void *st, const ms_op *op, ms_event *out, ms_err *err)
{
    tee *t = st;
    t->err = err;
    if (op->iteration != UINT64_MAX && catch_up(t, op->iteration))
        return -1;
    ms_op real_op = *op;
    if (op->after != MS_NO_EVENT)
        real_op.after = real_event_of(t, op->after);
    else if (!is_compute_stream(op))
        real_op.after = issue_point(t, op->issue_s);
    tee_op o = {.op = *op};
    if (ms_exec_submit(&t->sim, op, &o.sim_ev, err) || ms_exec_wait(&t->sim, o.sim_ev, &o.s0, &o.s1, err) ||
        ms_exec_submit(t->real, &real_op, &o.real_ev, err))
        return -1;
    *out = o.sim_ev;
    if (op->iteration == UINT64_MAX) /* before the run: begin() waits for it */
        return 0;
    if (t->wn == t->wcap) {
        t->wcap = t->wcap ? 2 * t->wcap : 1024;
        t->w = realloc(t->w, t->wcap * sizeof *t->w);
        if (!t->w)
            abort();
    }
    t->w[t->wn++] = o;
    return 0;
}

static int tee_wait(void *st, ms_event ev, double *start_s, double *end_s, ms_err *err)
{
    tee *t = st;
    return ms_exec_wait(&t->sim, ev, start_s, end_s, err);
}

static int tee_release(void *st, uint32_t layer, uint32_t expert, ms_err *err)
{
    tee *t = st;
    return ms_exec_release(&t->sim, layer, expert, err) || ms_exec_release(t->real, layer, expert, err) ? -1 : 0;
}

static int tee_begin(void *st, ms_err *err)
{
    tee *t = st;
    return ms_exec_begin(&t->sim, err) || ms_exec_begin(t->real, err) ? -1 : 0;
}

static void tee_destroy(void *st)
{
    (void)st; /* ms_validate frees the tee after the run */
}

static const ms_exec_ops tee_ops = {
    .name = "tee",
    .submit = tee_submit,
    .wait = tee_wait,
    .release = tee_release,
    .begin = tee_begin,
    .destroy = tee_destroy,
};

static void tee_free(tee *t)
{
    ms_exec_destroy(&t->sim);
    void *arrays[] = {t->w, t->copy_end, t->copy_iter, t->copy_demand, t->dense_end, t->layer_end, t->layer_sum, t->errors.v};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        free(arrays[i]);
}

static int trace_shape(const char *path, uint32_t *L, uint32_t *J, ms_err *err)
{
    ms_trace_reader *rd = ms_reader_open(path, err);
    if (!rd)
        return -1;
    *L = ms_reader_meta(rd)->L;
    *J = ms_reader_meta(rd)->J;
    ms_reader_close(rd);
    return 0;
}

static void summarise_errors(tee *t, ms_validate_result *r)
{
    const ms_dvec *e = &t->errors;
    r->iterations = e->n;
    if (!e->n)
        return;
    gsl_sort(e->v, 1, e->n);
    r->err_median = gsl_stats_median_from_sorted_data(e->v, 1, e->n);
    r->err_p95 = gsl_stats_quantile_from_sorted_data(e->v, 1, e->n, 0.95);
    r->err_max = e->v[e->n - 1];
}

static int write_layers_csv(const tee *t, const ms_run_config *cfg, const char *path, ms_err *err)
{
    ms_out *o = ms_out_open("--layers-csv", path, err);
    if (!o)
        return -1;
    FILE *f = ms_out_fp(o);
    ms_report_provenance_line(f, cfg, NULL);
    fputs("layer,sim_mean_s,real_mean_s,difference\n", f);
    for (uint32_t l = 0; l < t->L; l++) {
        double s = t->res->layer_sim_s[l], r = t->res->layer_real_s[l];
        fprintf(f, "%u,%.9f,%.9f,%.6f\n", l, s, r, r > 0 ? (s - r) / r : 0.0);
    }
    return ms_out_commit(o, err);
}

static void finish(tee *t, ms_validate_result *r)
{
    if (t->open) {
        add_counts(&r->sim, &t->it_sim);
        add_counts(&r->real, &t->it_real);
    }
    close_iteration(t);
    summarise_errors(t, r);
    r->sim_total_s = t->prev_end.sim;
    r->real_total_s = t->prev_end.real;
    for (uint32_t l = 0; l < t->L; l++) {
        r->layer_sim_s[l] = r->iterations ? t->layer_sum[l].sim / (double)r->iterations : 0;
        r->layer_real_s[l] = r->iterations ? t->layer_sum[l].real / (double)r->iterations : 0;
    }
}

static int open_csv(ms_out **o, FILE **f, const char *what, const char *path, const ms_run_config *cfg,
                    const char *header, ms_err *err)
{
    if (!path)
        return 0;
    if (!(*o = ms_out_open(what, path, err)))
        return -1;
    *f = ms_out_fp(*o);
    ms_report_provenance_line(*f, cfg, NULL);
    fputs(header, *f);
    return 0;
}

/* Commits an output when rc is 0, else removes it; returns rc or -1. */
static int close_csv(ms_out *o, int rc, ms_err *err)
{
    if (!o)
        return rc;
    if (rc) {
        ms_out_abort(o);
        return rc;
    }
    return ms_out_commit(o, err);
}

static void tee_init(tee *t, uint32_t L, uint32_t J, ms_exec *real, ms_validate_result *r, ms_err *err)
{
    size_t nx = (size_t)L * J;
    t->real = real;
    t->L = L;
    t->J = J;
    t->err = err;
    t->res = r;
    t->copy_end = ms_xcalloc(nx, sizeof *t->copy_end);
    t->copy_iter = ms_xcalloc(nx, sizeof *t->copy_iter);
    for (size_t x = 0; x < nx; x++)
        t->copy_iter[x] = UINT64_MAX;
    t->copy_demand = ms_xcalloc(nx, 1);
    t->dense_end = ms_xcalloc(L, sizeof *t->dense_end);
    t->layer_end = ms_xcalloc(L, sizeof *t->layer_end);
    t->layer_sum = ms_xcalloc(L, sizeof *t->layer_sum);
    r->L = L;
    r->layer_sim_s = ms_xcalloc(L, sizeof *r->layer_sim_s);
    r->layer_real_s = ms_xcalloc(L, sizeof *r->layer_real_s);
}

int ms_validate(const ms_run_config *cfg, ms_exec *real, const ms_validate_csvs *csv, ms_validate_result *out,
                ms_metrics *m, ms_err *err)
{
    memset(out, 0, sizeof *out);
    memset(m, 0, sizeof *m);
    if (cfg->exec)
        return ms_fail(err, "validate: the run configuration already names an executor");
    uint32_t L, J;
    if (trace_shape(cfg->trace_path, &L, &J, err))
        return -1;
    tee t = {0};
    tee_init(&t, L, J, real, out, err);
    int rc = ms_exec_sim_create(cfg->platform, L, J, &t.sim, err) ||
             open_csv(&t.icsv_out, &t.icsv, "--iterations-csv", csv->iterations, cfg,
                      "iteration,sim_s,real_s,error,sim_hits,sim_late,sim_misses,real_hits,real_late,real_misses\n",
                      err) ||
             open_csv(&t.ocsv_out, &t.ocsv, "--ops-csv", csv->ops, cfg,
                      "op,iteration,layer,expert,kind,tokens,demand,sim_start_s,sim_end_s,real_start_s,real_end_s\n",
                      err);
    if (!rc) {
        ms_exec x = {&tee_ops, &t};
        ms_run_config run = *cfg;
        run.exec = &x;
        rc = ms_run(&run, m, err) || read_ops(&t, t.wn);
        if (!rc)
            finish(&t, out);
    }
    rc = close_csv(t.icsv_out, rc, err);
    rc = close_csv(t.ocsv_out, rc, err);
    if (!rc && csv->layers)
        rc = write_layers_csv(&t, cfg, csv->layers, err);
    tee_free(&t);
    if (rc) {
        ms_metrics_free(m);
        ms_validate_result_free(out);
        return -1;
    }
    return 0;
}

void ms_validate_result_free(ms_validate_result *r)
{
    free(r->layer_sim_s);
    free(r->layer_real_s);
    r->layer_sim_s = r->layer_real_s = NULL;
}
