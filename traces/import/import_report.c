/* The import report (traces/import/import.h): one human line of what an
 * importer did, plus the notes an importer added (layers renumbered,
 * columns ignored, request keys, prompt lengths it could not see). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "traces/import/import.h"

void ms_import_note(ms_import_report *rep, const char *fmt, ...)
{
    size_t n = strlen(rep->notes);
    if (n + 3 >= sizeof rep->notes)
        return;
    if (n)
        n += (size_t)snprintf(rep->notes + n, sizeof rep->notes - n, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rep->notes + n, sizeof rep->notes - n, fmt, ap);
    va_end(ap);
}

void ms_import_report_format(const ms_import_report *rep, char *buf, size_t cap)
{
    size_t n = 0;
#define APPEND(...)                                                                 \
    do {                                                                            \
        int w_ = snprintf(buf + n, n < cap ? cap - n : 0, __VA_ARGS__);             \
        if (w_ > 0)                                                                 \
            n += (size_t)w_;                                                        \
    } while (0)
    if (!cap)
        return;
    APPEND("imported %s: %llu request%s, %llu prefill iteration%s (%llu token rows) + %llu decode iterations, "
           "%llu %s; ",
           rep->input, (unsigned long long)rep->requests, rep->requests == 1 ? "" : "s",
           (unsigned long long)rep->prefill_iters, rep->prefill_iters == 1 ? "" : "s",
           (unsigned long long)rep->prefill_rows, (unsigned long long)rep->decode_iters,
           (unsigned long long)rep->rows, rep->row_unit[0] ? rep->row_unit : "CSV rows");
    uint64_t missing = rep->missing_prefill + rep->missing_decode;
    if (!missing) {
        APPEND("no missing cells");
    } else {
    APPEND("%llu missing cells (%.1f %% of prefill cells", (unsigned long long)missing,
           rep->prefill_cells ? 100.0 * (double)rep->missing_prefill / (double)rep->prefill_cells : 0.0);
    if (rep->missing_decode)
        APPEND(", %.1f %% of decode cells",
               rep->decode_cells ? 100.0 * (double)rep->missing_decode / (double)rep->decode_cells : 0.0);
    APPEND("), first:");
    for (uint32_t i = 0; i < rep->n_listed; i++) {
        const ms_missing_cell *c = &rep->first_missing[i];
        APPEND("%s", i ? "," : "");
        if (rep->requests > 1)
            APPEND(" %s %llu", rep->row_unit[0] ? "request" : "turn", (unsigned long long)c->turn);
        APPEND(" step %u layer %u slot %u", c->step, c->layer, c->slot);
    }
    if (missing > rep->n_listed)
        APPEND(", ...");
    }
    if (rep->notes[0])
        APPEND("\n  %s", rep->notes);
#undef APPEND
}
