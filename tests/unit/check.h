/* Minimal assertion helpers for unit tests: a failed check prints the
 * expression, file and line, and the test exits 1 at the end. */
#ifndef MS_CHECK_H
#define MS_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ms_check_failures = 0;

#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); ms_check_failures++; } } while (0)
#define CHECK_EQ_INT(a, b) do { long long _a = (long long)(a), _b = (long long)(b); if (_a != _b) { fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__, __LINE__, #a, _a, #b, _b); ms_check_failures++; } } while (0)
#define CHECK_NEAR(a, b, tol) do { double _a = (double)(a), _b = (double)(b); if (!(fabs(_a - _b) <= (tol))) { fprintf(stderr, "%s:%d: %s == %.12g, expected %.12g (tol %g)\n", __FILE__, __LINE__, #a, _a, _b, (double)(tol)); ms_check_failures++; } } while (0)
#define CHECK_STR_CONTAINS(hay, needle) do { const char *_h = (hay); if (!_h || !strstr(_h, (needle))) { fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__, _h ? _h : "(null)", (needle)); ms_check_failures++; } } while (0)
#define CHECK_DONE() do { if (ms_check_failures) { fprintf(stderr, "%d check(s) failed\n", ms_check_failures); return 1; } printf("all checks passed\n"); return 0; } while (0)

#endif
