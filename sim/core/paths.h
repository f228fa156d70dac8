/* Where moesim finds its data at run time.  No path is compiled in: a build
 * tree or an install (`cmake --install build --prefix P`) works wherever it
 * is moved.
 *
 * The data directory holds profiles/ (models, platforms, serverless), plots/
 * (the gnuplot scripts), tools/ (npy2trace.py) and record/ (the Python
 * recorder).  It is the first of, in this order:
 *
 *   1. $MOESIM_DATA_DIR, when set and non-empty.  It must then be a directory:
 *      there is no fall-back past an explicit setting.
 *   2. <exe_dir>/share/moesim: a build tree.  CMake makes
 *      <build>/share/moesim/{profiles,plots,tools,record} links to the sources.
 *   3. <exe_dir>/../share/moesim: an install (P/bin/moesim, P/share/moesim).
 *
 * that is a directory.  exe_dir is the folder of /proc/self/exe (symbolic
 * links resolved).  A test executable in <build>/tests/ finds <build>/share
 * through rule 3 as well.  When nothing is found, the error names every place
 * looked at.
 *
 * Every function that takes buf writes a path of at most cap - 1 bytes into
 * buf and returns 0, or returns -1 with one line in err (sim/core/err.h).  They
 * read the environment on every call (no cache) and are safe to call from
 * several threads as long as nobody changes the environment meanwhile. */
#ifndef MS_PATHS_H
#define MS_PATHS_H

#include <stddef.h>

#include "sim/core/err.h"

/* The data directory (above). */
int ms_path_data(char *buf, size_t cap, ms_err *err);

/* Profiles: $MOESIM_PROFILE_DIR when set and non-empty (as is, so it may lack
 * models/ or platforms/), else <data>/profiles, which must be a directory. */
int ms_path_profiles(char *buf, size_t cap, ms_err *err);

/* <data>/plots and <data>/tools; each must be a directory. */
int ms_path_plots(char *buf, size_t cap, ms_err *err);
int ms_path_tools(char *buf, size_t cap, ms_err *err);

/* The shared workloads folder (it holds azure-llm-2023/): $MOESIM_WORKLOAD_DIR,
 * which must be set, non-empty and a directory. */
int ms_path_workloads(char *buf, size_t cap, ms_err *err);

/* The Python that runs tools/ (never NULL): $MOESIM_PYTHON when set and
 * non-empty, else "python3" looked up on PATH. */
const char *ms_path_python(void);

#endif
