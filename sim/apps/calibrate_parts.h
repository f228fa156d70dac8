/* What the parts of calibration share (internal to sim/apps/calibrate*.c):
 * calibrate.c measures, calibrate_fit.c fits, calibrate_out.c writes. */
#ifndef MS_CALIBRATE_PARTS_H
#define MS_CALIBRATE_PARTS_H

/* together / alone, 0 when alone is not positive: how much a measured
 * duration grew beside other work. */
double ms_calib_slowdown(double together, double alone);

#endif
