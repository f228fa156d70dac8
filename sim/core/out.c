/* Safe outputs (out.h): input identity checks, temporaries beside the
 * target, checked writes, fsync + rename, clean-up on signals. */
#define _GNU_SOURCE /* fopencookie: the first failed write's errno is kept */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim/core/out.h"

/* ---- recorded inputs ---------------------------------------------------- */

typedef struct {
    dev_t dev;
    ino_t ino;
    char *path;
} input_id;

static input_id *inputs;
static size_t n_inputs;

void ms_out_input(const char *path)
{
    struct stat st;
    if (!path || !strcmp(path, "-") || stat(path, &st) != 0)
        return;
    for (size_t i = 0; i < n_inputs; i++)
        if (inputs[i].dev == st.st_dev && inputs[i].ino == st.st_ino)
            return;
    inputs = ms_xrealloc(inputs, n_inputs + 1, sizeof *inputs);
    inputs[n_inputs++] = (input_id){st.st_dev, st.st_ino, ms_xstrdup(path)};
}

void ms_out_inputs_clear(void)
{
    for (size_t i = 0; i < n_inputs; i++)
        free(inputs[i].path);
    free(inputs);
    inputs = NULL;
    n_inputs = 0;
}

/* ---- temporaries removed on a signal ------------------------------------ */

/* A fixed table, so the handler only reads memory that is never freed or
 * moved; a slot is in use while its first byte is not 0. */
#define MAX_TMPS 64
static char tmp_table[MAX_TMPS][PATH_MAX];
static volatile sig_atomic_t handlers_installed;

/* The lock files this process holds (ms_out_lock), in the same kind of
 * table; `owner` keeps a forked worker, which inherits the table but not the
 * locks, from removing its parent's lock files. */
typedef struct {
    char lock[PATH_MAX]; /* the lock file; the slot is in use while lock[0] != 0 */
    int fd;
    pid_t owner;
    dev_t dev;
    ino_t ino;
} held_lock;
static held_lock lock_table[MAX_TMPS];

static void on_signal(int sig)
{
    for (int i = 0; i < MAX_TMPS; i++)
        if (tmp_table[i][0])
            unlink(tmp_table[i]);
    for (int i = 0; i < MAX_TMPS; i++) /* scratch folders, once their files are gone */
        if (tmp_table[i][0])
            rmdir(tmp_table[i]);
    pid_t me = getpid();
    for (int i = 0; i < MAX_TMPS; i++)
        if (lock_table[i].lock[0] && lock_table[i].owner == me)
            unlink(lock_table[i].lock);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_handlers(void)
{
    if (handlers_installed)
        return;
    handlers_installed = 1;
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction old, sa = {.sa_handler = on_signal};
        sigemptyset(&sa.sa_mask);
        /* a signal the caller ignores (nohup, a shell's background job) stays ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

static int register_tmp(const char *tmp, ms_err *err)
{
    install_handlers();
    for (int i = 0; i < MAX_TMPS; i++)
        if (!tmp_table[i][0]) {
            /* write the bytes before the first one, which makes the slot live */
            size_t n = strlen(tmp);
            memcpy(tmp_table[i] + 1, tmp + 1, n);
            tmp_table[i][0] = tmp[0];
            return 0;
        }
    return ms_fail(err, "%s: more than %d outputs open at once", tmp, MAX_TMPS);
}

static void unregister_tmp(const char *tmp)
{
    for (int i = 0; i < MAX_TMPS; i++)
        if (tmp_table[i][0] && !strcmp(tmp_table[i], tmp))
            tmp_table[i][0] = '\0';
}

int ms_out_remove_on_signal(const char *path, ms_err *err)
{
    if (strlen(path) >= PATH_MAX)
        return ms_fail(err, "%.200s...: path too long", path);
    return register_tmp(path, err);
}

void ms_out_forget_on_signal(const char *path)
{
    unregister_tmp(path);
}

/* ---- locks against a second writer -------------------------------------- */

/* "<dir>/.<name>.lock" beside path. */
static int lock_file_name(const char *path, char *lock, size_t n)
{
    char dir[PATH_MAX];
    ms_out_dir_of(path, dir, sizeof dir);
    const char *slash = strrchr(path, '/');
    return snprintf(lock, n, "%s/.%s.lock", dir, slash ? slash + 1 : path) >= (int)n ? -1 : 0;
}

/* Opens and write-locks the lock file: its fd; -2 when another process
 * holds it (*holder: its pid, 0 when the kernel does not say); -1 on any
 * other failure (errno).  A file its holder removed while this process
 * locked it is not the lock any more: it opens the new one again. */
static int take_lock(const char *lock, pid_t *holder)
{
    for (int tries = 0; tries < 100; tries++) {
        int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            return -1;
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(fd, F_SETLK, &fl) != 0) {
            int e = errno;
            struct flock q = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
            int held = (e == EACCES || e == EAGAIN) && fcntl(fd, F_GETLK, &q) == 0 && q.l_type != F_UNLCK;
            close(fd);
            if (held) {
                *holder = q.l_pid;
                return -2;
            }
            if (e == EACCES || e == EAGAIN)
                continue; /* released meanwhile */
            errno = e;
            return -1;
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(lock, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
            return fd;
        close(fd);
    }
    errno = EAGAIN;
    return -1;
}

/* The slot of a lock this process holds on the file at `lock` (same device
 * and inode), else -1.  Checked before locking: a second fcntl lock of this
 * process would succeed, and closing it would drop the first. */
static int held_slot(const char *lock)
{
    struct stat st;
    if (stat(lock, &st) != 0)
        return -1;
    pid_t me = getpid();
    for (int i = 0; i < MAX_TMPS; i++)
        if (lock_table[i].lock[0] && lock_table[i].owner == me && lock_table[i].dev == st.st_dev &&
            lock_table[i].ino == st.st_ino)
            return i;
    return -1;
}

int ms_out_lock(const char *what, const char *path, ms_err *err)
{
    char lock[PATH_MAX];
    if (!path || !strcmp(path, "-"))
        return 0;
    if (lock_file_name(path, lock, sizeof lock))
        return ms_fail(err, "%s %s: path too long", what, path);
    if (held_slot(lock) >= 0)
        return ms_fail(err, "%s %s: is already an output of this command; give each output its own file", what,
                       path);
    int slot = -1;
    for (int i = 0; i < MAX_TMPS && slot < 0; i++)
        if (!lock_table[i].lock[0])
            slot = i;
    if (slot < 0)
        return ms_fail(err, "%s %s: more than %d outputs open at once", what, path, MAX_TMPS);
    install_handlers();
    pid_t holder = 0;
    int fd = take_lock(lock, &holder);
    if (fd == -2 && holder > 0)
        return ms_fail(err, "%s %s: is being written by process %ld (lock file %s); wait for it to end or stop it",
                       what, path, (long)holder, lock);
    if (fd == -2)
        return ms_fail(err, "%s %s: is being written by another process (lock file %s); wait for it to end", what,
                       path, lock);
    if (fd < 0)
        return ms_fail(err, "%s %s: cannot lock it (lock file %s): %s", what, path, lock, strerror(errno));
    struct stat st;
    held_lock *h = &lock_table[slot];
    h->fd = fd;
    h->owner = getpid();
    h->dev = fstat(fd, &st) == 0 ? st.st_dev : 0;
    h->ino = fstat(fd, &st) == 0 ? st.st_ino : 0;
    size_t n = strlen(lock); /* the first byte last: it makes the slot live */
    memcpy(h->lock + 1, lock + 1, n);
    h->lock[0] = lock[0];
    return 0;
}

void ms_out_unlock(const char *path)
{
    char lock[PATH_MAX];
    if (!path || !strcmp(path, "-") || lock_file_name(path, lock, sizeof lock))
        return;
    pid_t me = getpid();
    for (int i = 0; i < MAX_TMPS; i++) {
        held_lock *h = &lock_table[i];
        if (h->lock[0] && h->owner == me && !strcmp(h->lock, lock)) {
            unlink(h->lock); /* before the lock goes: a waiting process then locks a fresh file */
            h->lock[0] = '\0';
            close(h->fd);
            return;
        }
    }
}

/* ---- checks ------------------------------------------------------------- */

void ms_out_dir_of(const char *path, char *dir, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, n, ".");
    else if (slash == path)
        snprintf(dir, n, "/");
    else
        snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

static const char *kind_name(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISFIFO(m))
        return "a fifo";
    if (S_ISSOCK(m))
        return "a socket";
    return "not a regular file";
}

static int check_not_input(const char *what, const char *path, const struct stat *st, ms_err *err)
{
    for (size_t i = 0; i < n_inputs; i++)
        if (inputs[i].dev == st->st_dev && inputs[i].ino == st->st_ino)
            return ms_fail(err, "%s %s: is the input file %s; refusing to overwrite it", what, path,
                           inputs[i].path);
    return 0;
}

static int check_dir_writable(const char *what, const char *path, const char *dir, ms_err *err)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return ms_fail(err, "%s %s: folder %s: %s", what, path, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return ms_fail(err, "%s %s: %s is not a folder", what, path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return ms_fail(err, "%s %s: folder %s is not writable: %s", what, path, dir, strerror(errno));
    return 0;
}

int ms_out_check(const char *what, const char *path, ms_err *err)
{
    if (!path || !*path)
        return ms_fail(err, "%s: empty output path", what);
    if (!strcmp(path, "-"))
        return 0;
    if (strlen(path) + 16 >= PATH_MAX)
        return ms_fail(err, "%s %.200s...: path too long", what, path);
    size_t len = strlen(path);
    if (path[len - 1] == '/')
        return ms_fail(err, "%s %s: names a folder, not a file", what, path);
    struct stat st;
    if (stat(path, &st) == 0) {
        if (check_not_input(what, path, &st, err))
            return -1;
        if (!S_ISREG(st.st_mode))
            return ms_fail(err, "%s %s: is %s, not a regular file; refusing to write it", what, path,
                           kind_name(st.st_mode));
        if (access(path, W_OK) != 0)
            return ms_fail(err, "%s %s: not writable: %s", what, path, strerror(errno));
    } else if (errno != ENOENT) {
        return ms_fail(err, "%s %s: %s", what, path, strerror(errno));
    } else if (lstat(path, &st) == 0) {
        return ms_fail(err, "%s %s: is a dangling symbolic link", what, path);
    }
    char dir[PATH_MAX];
    ms_out_dir_of(path, dir, sizeof dir);
    return check_dir_writable(what, path, dir, err);
}

int ms_out_check_dir(const char *what, const char *path, ms_err *err)
{
    if (!path || !*path)
        return ms_fail(err, "%s: empty output folder", what);
    struct stat st;
    if (stat(path, &st) == 0) {
        if (check_not_input(what, path, &st, err))
            return -1;
        if (!S_ISDIR(st.st_mode))
            return ms_fail(err, "%s %s: is %s, not a folder", what, path,
                           S_ISREG(st.st_mode) ? "a regular file" : kind_name(st.st_mode));
        if (access(path, W_OK | X_OK) != 0)
            return ms_fail(err, "%s %s: folder not writable: %s", what, path, strerror(errno));
        return 0;
    }
    if (errno != ENOENT)
        return ms_fail(err, "%s %s: %s", what, path, strerror(errno));
    char trimmed[PATH_MAX], dir[PATH_MAX];
    snprintf(trimmed, sizeof trimmed, "%s", path);
    for (size_t n = strlen(trimmed); n > 1 && trimmed[n - 1] == '/'; n--)
        trimmed[n - 1] = '\0';
    ms_out_dir_of(trimmed, dir, sizeof dir);
    return check_dir_writable(what, path, dir, err);
}

/* ---- temporaries -------------------------------------------------------- */

/* A fresh file "<dir>/.<name>.tmp.XXXXXX" beside path; returns its fd. */
static int make_tmp(const char *what, const char *path, char *tmp, size_t n, ms_err *err)
{
    char dir[PATH_MAX];
    ms_out_dir_of(path, dir, sizeof dir);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (snprintf(tmp, n, "%s/.%s.tmp.XXXXXX", dir, base) >= (int)n)
        return ms_fail(err, "%s %s: path too long", what, path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return ms_fail(err, "%s %s: cannot create a temporary file beside it: %s", what, path, strerror(errno));
    if (register_tmp(tmp, err)) {
        close(fd);
        unlink(tmp);
        return -1;
    }
    return fd;
}

/* Gives the temporary the mode the target would get: an existing file's
 * mode, else 0666 less the umask (mkstemp makes 0600). */
static void set_mode(int fd, const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0) {
        (void)fchmod(fd, st.st_mode & 07777);
        return;
    }
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(fd, 0666 & ~mask);
}

/* Renames tmp over path after the caller synced and closed it. */
static int place(const char *tmp, const char *path, ms_err *err)
{
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        unregister_tmp(tmp);
        return ms_fail(err, "%s: cannot rename the temporary %s over it: %s", path, tmp, strerror(e));
    }
    unregister_tmp(tmp);
    return 0;
}

int ms_out_tmp_begin(const char *what, const char *path, char *tmp, size_t n, ms_err *err)
{
    if (ms_out_check(what, path, err))
        return -1;
    if (!strcmp(path, "-"))
        return ms_fail(err, "%s: cannot write this output to standard output", what);
    if (ms_out_lock(what, path, err))
        return -1;
    int fd = make_tmp(what, path, tmp, n, err);
    if (fd < 0) {
        ms_out_unlock(path);
        return -1;
    }
    set_mode(fd, path);
    close(fd);
    return 0;
}

static int tmp_finish(const char *tmp, const char *path, int ok, ms_err *err)
{
    if (!ok) {
        unlink(tmp);
        unregister_tmp(tmp);
        return 0;
    }
    int fd = open(tmp, O_RDONLY);
    if (fd < 0 || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        unlink(tmp);
        unregister_tmp(tmp);
        return ms_fail(err, "%s: cannot sync %s: %s", path, tmp, strerror(e));
    }
    close(fd);
    return place(tmp, path, err);
}

int ms_out_tmp_end(const char *tmp, const char *path, int ok, ms_err *err)
{
    int rc = tmp_finish(tmp, path, ok, err);
    ms_out_unlock(path);
    return rc;
}

/* ---- stream outputs ----------------------------------------------------- */

struct ms_out {
    FILE *fp;
    char *path;
    char tmp[PATH_MAX];
    int is_stdout;
    int fd;   /* the temporary's */
    int werr; /* errno of the first failed write, 0 while none failed */
};

/* The stream's writes: a failed write() keeps its errno (ENOSPC, not the EIO
 * a later check would guess) and no write is tried after it. */
static ssize_t cookie_write(void *c, const char *buf, size_t n)
{
    ms_out *o = c;
    size_t done = 0;
    while (!o->werr && done < n) {
        ssize_t w = write(o->fd, buf + done, n - done);
        if (w > 0)
            done += (size_t)w;
        else if (w < 0 && errno != EINTR)
            o->werr = errno;
        else if (w == 0)
            o->werr = EIO;
    }
    return o->werr ? 0 : (ssize_t)n;
}

static int cookie_close(void *c)
{
    (void)c; /* the fd is closed by ms_out_commit / _abort, after its fsync */
    return 0;
}

ms_out *ms_out_open(const char *what, const char *path, ms_err *err)
{
    if (ms_out_check(what, path, err))
        return NULL;
    ms_out *o = ms_xcalloc(1, sizeof *o);
    o->path = ms_xstrdup(path);
    if (!strcmp(path, "-")) {
        o->fp = stdout;
        o->is_stdout = 1;
        return o;
    }
    if (ms_out_lock(what, path, err)) {
        free(o->path);
        free(o);
        return NULL;
    }
    int fd = make_tmp(what, path, o->tmp, sizeof o->tmp, err);
    if (fd < 0) {
        ms_out_unlock(path);
        free(o->path);
        free(o);
        return NULL;
    }
    set_mode(fd, path);
    o->fd = fd;
    o->fp = fopencookie(o, "w", (cookie_io_functions_t){.write = cookie_write, .close = cookie_close});
    if (!o->fp) {
        ms_fail(err, "%s %s: %s", what, path, strerror(errno));
        close(fd);
        unlink(o->tmp);
        unregister_tmp(o->tmp);
        ms_out_unlock(path);
        free(o->path);
        free(o);
        return NULL;
    }
    return o;
}

FILE *ms_out_fp(ms_out *o)
{
    return o->fp;
}

const char *ms_out_path(const ms_out *o)
{
    return o->path;
}

int ms_out_check_writes(ms_out *o, ms_err *err)
{
    if (o->is_stdout)
        return ferror(stdout) ? ms_fail(err, "standard output: write failed") : 0;
    if (o->werr)
        return ms_fail(err, "%s: write failed: %s", o->path, strerror(o->werr));
    return ferror(o->fp) ? ms_fail(err, "%s: write failed", o->path) : 0;
}

int ms_out_commit(ms_out *o, ms_err *err)
{
    int rc = 0;
    if (o->is_stdout) {
        if (fflush(stdout) != 0 || ferror(stdout))
            rc = ms_fail(err, "standard output: %s", strerror(errno ? errno : EIO));
    } else {
        int bad = ferror(o->fp), e = 0;
        if (!bad && fflush(o->fp) != 0)
            bad = 1;
        if (!bad && fsync(o->fd) != 0)
            bad = 1, e = errno;
        if (fclose(o->fp) != 0 && !bad)
            bad = 1, e = errno;
        if (close(o->fd) != 0 && !bad)
            bad = 1, e = errno;
        if (o->werr) /* the first failed write says why */
            e = o->werr;
        if (bad) {
            unlink(o->tmp);
            unregister_tmp(o->tmp);
            rc = ms_fail(err, "%s: write failed: %s", o->path, strerror(e ? e : EIO));
        } else {
            rc = place(o->tmp, o->path, err);
        }
        ms_out_unlock(o->path);
    }
    free(o->path);
    free(o);
    return rc;
}

void ms_out_abort(ms_out *o)
{
    if (!o)
        return;
    if (!o->is_stdout) {
        fclose(o->fp);
        close(o->fd);
        unlink(o->tmp);
        unregister_tmp(o->tmp);
        ms_out_unlock(o->path);
    }
    free(o->path);
    free(o);
}

int ms_out_check_image(const char *tmp, const char *path, ms_err *err)
{
    static const unsigned char iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
    size_t n = strlen(path);
    int png = n > 4 && !strcmp(path + n - 4, ".png"), pdf = n > 4 && !strcmp(path + n - 4, ".pdf");
    if (!png && !pdf)
        return 0;
    FILE *f = fopen(tmp, "rb");
    unsigned char tail[32] = {0};
    long size = -1;
    size_t got = 0;
    if (f && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= (long)sizeof iend) {
        long from = size > (long)sizeof tail ? size - (long)sizeof tail : 0;
        if (fseek(f, from, SEEK_SET) == 0)
            got = fread(tail, 1, sizeof tail, f);
    }
    if (f)
        fclose(f);
    int ok = 0;
    if (png)
        ok = got >= sizeof iend && !memcmp(tail + got - sizeof iend, iend, sizeof iend);
    else
        for (size_t i = 0; i + 5 <= got && !ok; i++)
            ok = !memcmp(tail + i, "%%EOF", 5);
    if (!ok)
        return ms_fail(err, "%s: the plotting program left an incomplete %s (%ld bytes; is the disk full?)", path,
                       png ? "PNG" : "PDF", size < 0 ? 0 : size);
    return 0;
}

int ms_out_from_command(const char *what, const char *path, const char *cmd, ms_err *err)
{
    char tmp[PATH_MAX];
    if (ms_out_tmp_begin(what, path, tmp, sizeof tmp, err))
        return -1;
    size_t cap = strlen(cmd) + 1, tl = strlen(tmp);
    for (const char *p = strstr(cmd, "@OUT@"); p; p = strstr(p + 5, "@OUT@"))
        cap += tl;
    char *full = ms_xcalloc(cap, 1), *w = full;
    for (const char *p = cmd; *p;) {
        if (!strncmp(p, "@OUT@", 5)) {
            memcpy(w, tmp, tl);
            w += tl;
            p += 5;
        } else {
            *w++ = *p++;
        }
    }
    int status = system(full);
    free(full);
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        ms_out_tmp_end(tmp, path, 0, NULL);
        return ms_fail(err, "%s: %s: the command failed (%s %d)", what, path,
                       status != -1 && WIFEXITED(status) ? "exit" : "status", status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : status);
    }
    if (ms_out_check_image(tmp, path, err)) {
        ms_out_tmp_end(tmp, path, 0, NULL);
        return -1;
    }
    return ms_out_tmp_end(tmp, path, 1, err);
}

int ms_out_make_dir(const char *what, const char *path, ms_err *err)
{
    if (ms_out_check_dir(what, path, err))
        return -1;
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return ms_fail(err, "%s %s: cannot create the folder: %s", what, path, strerror(errno));
    return 0;
}

int ms_out_stdout_close(ms_err *err)
{
    errno = 0;
    int bad = ferror(stdout);
    if (fflush(stdout) != 0)
        bad = 1;
    int e = errno;
    if (fclose(stdout) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad)
        return ms_fail(err, "standard output: %s", strerror(e ? e : EIO));
    return 0;
}
