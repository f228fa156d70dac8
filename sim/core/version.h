/* What built this binary: moesim's version (CMake's project VERSION) and the
 * git commit of the source tree at build time ("unknown" outside git; a
 * "-dirty" suffix when the tree had uncommitted changes).  Every JSON and CSV
 * result carries both (docs/safety.md). */
#ifndef MS_VERSION_H
#define MS_VERSION_H

const char *ms_version(void);
const char *ms_commit(void);

#endif
