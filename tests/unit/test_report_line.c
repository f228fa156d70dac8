/* The start of every CSV's provenance line (sim/engine/report.h
 * ms_report_provenance_line_head), shared by the engine's CSVs, figures,
 * demo and serverless: a v2 trace is named by its stored content digest, a
 * file that cannot be read by "sha256 unknown" (the JSON's null), and the
 * line ends without a newline so each caller appends its own inputs. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "sim/core/version.h"
#include "sim/engine/report.h"
#include "traces/format/trace.h"
#include "traces/synth/gen.h"

/* What the head writes for path, in buf. */
static const char *head_of(const char *path, char *buf, size_t n)
{
    FILE *f = tmpfile();
    CHECK(f != NULL);
    ms_report_provenance_line_head(f, path);
    long len = ftell(f);
    rewind(f);
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    CHECK_EQ_INT((long)got, len);
    fclose(f);
    return buf;
}

int main(void)
{
    char got[512], want[512];
    snprintf(want, sizeof want, "# moesim %s commit %s; trace no/such/trace.h5 sha256 unknown", ms_version(),
             ms_commit());
    CHECK(!strcmp(head_of("no/such/trace.h5", got, sizeof got), want));

    ms_model model;
    ms_err err = {{0}};
    CHECK_EQ_INT(ms_model_load("mixtral-8x7b", &model, &err), 0);
    ms_gen_params p;
    ms_gen_defaults(&p);
    p.requests = 1;
    p.prompt_min = p.prompt_max = 8;
    p.output_min = p.output_max = 4;
    unlink("report_line.h5");
    CHECK_EQ_INT(ms_gen_write(&p, &model, "report_line.h5", NULL, &err), 0);
    ms_trace_digest d;
    CHECK_EQ_INT(ms_trace_digest_of("report_line.h5", &d, &err), 0);
    CHECK_EQ_INT(d.content, 1);
    snprintf(want, sizeof want, "# moesim %s commit %s; trace report_line.h5 content_sha256 %s (stored, unverified)", ms_version(),
             ms_commit(), d.hex);
    CHECK(!strcmp(head_of("report_line.h5", got, sizeof got), want));
    CHECK(!strchr(got, '\n'));
    unlink("report_line.h5");
    CHECK_DONE();
}
