#include "version.h"

#ifndef MS_VERSION
#define MS_VERSION "unknown"
#endif
#ifndef MS_COMMIT
#define MS_COMMIT "unknown"
#endif

const char *ms_version(void)
{
    return MS_VERSION;
}

const char *ms_commit(void)
{
    return MS_COMMIT;
}
