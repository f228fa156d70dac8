/* fmax and fmin inline, with glibc's results bit for bit.  GCC calls libm
 * for fmax/fmin at -O2 (their NaN rule stops it using maxsd alone), and the
 * engine takes several per op.  glibc on x86-64 returns the second operand
 * when the two compare equal (maxsd/minsd: +0 and -0 included) and the
 * other operand when one is NaN; so do these.  tests/unit/test_fminmax.c
 * compares them with libm's on signed zeros, infinities, NaNs and random
 * doubles. */
#ifndef MS_FMINMAX_H
#define MS_FMINMAX_H

static inline double ms_fmax(double a, double b)
{
    return a > b || b != b ? a : b;
}

static inline double ms_fmin(double a, double b)
{
    return a < b || b != b ? a : b;
}

#endif
