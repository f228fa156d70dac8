/* Which requests of which trace files this process has checked, and with
 * which parts (trace.h ms_reader_select): a request checked once is not
 * checked again by a later pass over the same file (the next-use pre-pass,
 * a policy's training read, the runs of a sweep).  A file is the same when
 * its path, device, inode, size, mtime and content digest attribute are:
 * a rewritten file gets a new digest (the writer's), so its requests are
 * checked again.  v1 files have no digest: each reader keeps its own marks. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "traces/format/trace_h5_parts.h"

/* Files remembered at once; the least recently opened unused one goes first. */
#define CHECKED_MAX_FILES 16

struct checked_file {
    char *path;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    char digest[MS_DIGEST_HEX];
    uint64_t n;
    uint8_t *parts; /* [n] H5P_CHECKED | the MS_PART_* bits checked */
    int users;
    uint64_t last_use;
    checked_file *next;
};

static struct {
    checked_file *head;
    int n;
    uint64_t clock;
} reg;

static int same_file(const checked_file *f, const char *path, const struct stat *st, const ms_trace_meta *m)
{
    return !strcmp(f->path, path) && f->dev == st->st_dev && f->ino == st->st_ino && f->size == st->st_size &&
           f->mtime.tv_sec == st->st_mtim.tv_sec && f->mtime.tv_nsec == st->st_mtim.tv_nsec &&
           !strcmp(f->digest, m->content_sha256) && f->n == m->n_requests;
}

static void drop_oldest_unused(void)
{
    checked_file **victim = NULL;
    for (checked_file **p = &reg.head; *p; p = &(*p)->next)
        if (!(*p)->users && (!victim || (*p)->last_use < (*victim)->last_use))
            victim = p;
    if (!victim)
        return;
    checked_file *f = *victim;
    *victim = f->next;
    free(f->path);
    free(f->parts);
    free(f);
    reg.n--;
}

checked_file *h5p_checked_acquire(const char *path, const ms_trace_meta *m)
{
    struct stat st;
    if (m->version < 2 || !m->content_sha256[0] || stat(path, &st) != 0)
        return NULL;
    checked_file *f = reg.head;
    while (f && !same_file(f, path, &st, m))
        f = f->next;
    if (!f) {
        if (reg.n >= CHECKED_MAX_FILES)
            drop_oldest_unused();
        f = ms_xcalloc(1, sizeof *f);
        f->path = ms_xstrdup(path);
        f->dev = st.st_dev;
        f->ino = st.st_ino;
        f->size = st.st_size;
        f->mtime = st.st_mtim;
        memcpy(f->digest, m->content_sha256, sizeof f->digest);
        f->n = m->n_requests;
        f->parts = ms_xcalloc(f->n ? f->n : 1, 1);
        f->next = reg.head;
        reg.head = f;
        reg.n++;
    }
    f->users++;
    f->last_use = ++reg.clock;
    return f;
}

uint8_t *h5p_checked_marks(checked_file *f)
{
    return f->parts;
}

void h5p_checked_release(checked_file *f)
{
    if (f && f->users > 0)
        f->users--;
}
