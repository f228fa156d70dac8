/* moesim.claims: `moesim claims` (sim/apps/claims.h) from Python; the
 * results as the JSON array of `moesim claims --json`. */
#include "python/src/ext.h"

#include <stdlib.h>

#include "sim/apps/claims.h"
#include "sim/core/out.h"

/* claims(out_dir, write, trace, model, platform, only, requests, seed, sensitivity) -> JSON text */
PyObject *ms_py_claims(PyObject *self, PyObject *args)
{
    (void)self;
    ms_claims_opts o = {0};
    int write, sens;
    if (!PyArg_ParseTuple(args, "spzzzzIIp", &o.out_dir, &write, &o.trace, &o.model, &o.platform, &o.only,
                          &o.requests, &o.seed, &sens))
        return NULL;
    o.sensitivity = sens;
    ms_err err;
    if (ms_py_enter("moesim.claims"))
        return NULL;
    ms_py_busy = 0; /* claims run no Python policy: only a hook calling it is refused */
    ms_out_inputs_clear();
    if (o.trace)
        ms_out_input(o.trace);
    if (o.platform)
        ms_out_input(o.platform);
    if (ms_out_make_dir("claims: out_dir", o.out_dir, &err))
        return ms_py_raise(ms_py_Error, &err);
    ms_claim_result *r;
    size_t n;
    ms_py_signals sigs;
    ms_py_signals_save(&sigs);
    int rc = ms_claims_run(&o, &r, &n, &err);
    if (!rc && write && ms_claims_write(&o, r, n, &err)) {
        free(r);
        rc = -1;
    }
    ms_py_signals_restore(&sigs);
    if (rc)
        return ms_py_raise(ms_py_Error, &err);
    cJSON *j = ms_claims_json(r, n);
    free(r);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    PyObject *out = s ? PyUnicode_FromString(s) : PyErr_NoMemory();
    free(s);
    return out;
}
