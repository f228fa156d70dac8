/* sim/core/version.h: MS_VERSION and MS_COMMIT come from the header the build
 * regenerates on every build (cmake/build_info.cmake, target
 * moesim_build_info): the commit is the source tree's at build time, not at
 * configure time. */
#include "sim/core/version.h"

#include "moesim_build_info.h"

const char *ms_version(void)
{
    return MS_VERSION;
}

const char *ms_commit(void)
{
    return MS_COMMIT;
}
