/* Safe outputs: every file moesim writes goes through this module.
 *
 * The promise (docs/safety.md): moesim never overwrites one of its
 * inputs, never writes through a device, fifo or directory, writes every file
 * to a temporary beside it and renames it into place only when every write,
 * flush, fsync and close succeeded, and removes the temporary on failure and
 * on SIGINT / SIGTERM / SIGHUP.
 *
 * Use:
 *   1. while parsing flags, name every input file:  ms_out_input(path)
 *   2. before any work, check every output:          ms_out_check("--events", path, err)
 *   3. write:  ms_out *o = ms_out_open("--events", path, err);  fprintf(ms_out_fp(o), ...);
 *              ms_out_commit(o, err)  (or ms_out_abort(o) on an error path)
 * "-" is standard output (no temporary, no rename; its writes are checked by
 * ms_out_stdout_close at exit).  Writers that create their own file (HDF5)
 * take a registered temporary path from ms_out_tmp_begin and end with
 * ms_out_tmp_end.
 *
 * Locks: a process writing an output holds a lock on it (an fcntl write
 * lock on ".NAME.lock" beside it, removed when the output is committed or
 * aborted, and on a signal), so that a second process writing the same
 * output ends at once with one line naming the holder's pid.  ms_out_open
 * and ms_out_tmp_begin take it (ms_out_commit / _abort / ms_out_tmp_end
 * release it); a writer that appends in place (the sweep CSV) takes it with
 * ms_out_lock. */
#ifndef MS_OUT_H
#define MS_OUT_H

#include <stddef.h>
#include <stdio.h>

#include "sim/core/err.h"

/* Records an input file of this process (trace, profile, spec, dump, ...);
 * later checks refuse an output that is the same file (same device and
 * inode, through symlinks and hard links).  A path that does not exist, "-"
 * and NULL are ignored (the reader reports those). */
void ms_out_input(const char *path);
/* Forgets every recorded input (tests, and a sweep worker between points). */
void ms_out_inputs_clear(void);

/* The folder part of path ("." when there is none, "/" for "/x") into dir. */
void ms_out_dir_of(const char *path, char *dir, size_t n);

/* Checks an output path before any work.  `what` names it in messages (the
 * flag, e.g. "--events").  Refuses, with one line naming `what`, the path and
 * why: the same file as a recorded input; an existing directory, device,
 * fifo or socket; a folder that does not exist or is not writable; an
 * existing file that is not writable.  "-" passes. */
int ms_out_check(const char *what, const char *path, ms_err *err);
/* The same for an output folder (figures, demo): it may exist (a
 * directory, writable) or be creatable in a writable parent. */
int ms_out_check_dir(const char *what, const char *path, ms_err *err);

typedef struct ms_out ms_out;

/* Checks (as ms_out_check) and opens a temporary file in the path's folder,
 * registered for removal on a signal; "-" gives standard output.  NULL with
 * err on failure. */
ms_out *ms_out_open(const char *what, const char *path, ms_err *err);
FILE *ms_out_fp(ms_out *o);
const char *ms_out_path(const ms_out *o);
/* -1 with one line ("PATH: write failed: No space left on device", the
 * errno of the first write that failed) once a write to o failed, else 0.
 * No write is tried after the first failure: a long writer calls this now
 * and then (the engine: after every iteration) to stop at once. */
int ms_out_check_writes(ms_out *o, ms_err *err);
/* Flushes, checks every earlier write (ferror), fsyncs, closes and renames
 * the temporary over the path (keeping an existing file's mode).  -1 with
 * one line on any failure, the temporary removed and the path untouched.
 * Frees o either way.  For "-": flushes and checks standard output. */
int ms_out_commit(ms_out *o, ms_err *err);
/* Removes the temporary and frees o (NULL is a no-op).  For error paths. */
void ms_out_abort(ms_out *o);

/* For writers that create the file themselves (HDF5): after the checks,
 * writes into tmp (size n) a fresh temporary path beside `path`, registered
 * for removal on a signal.  ms_out_tmp_end renames it over path when ok
 * (after an fsync of the file), else removes it; either way unregisters it.
 * Both return 0, or -1 with one line. */
int ms_out_tmp_begin(const char *what, const char *path, char *tmp, size_t n, ms_err *err);
int ms_out_tmp_end(const char *tmp, const char *path, int ok, ms_err *err);

/* Registers a file or folder this process made and does not keep (a
 * command's scratch files) for removal on SIGINT / SIGTERM / SIGHUP, as the
 * temporaries are: files first, then folders (which must then be empty).
 * It may not exist yet.  ms_out_forget_on_signal unregisters it (after the
 * caller removed it itself).  -1 with one line when too many are open. */
int ms_out_remove_on_signal(const char *path, ms_err *err);
void ms_out_forget_on_signal(const char *path);

/* Locks path against other processes (above): 0, or -1 with one line
 * "<what> <path>: is being written by process PID (lock file L); ..." when
 * another process holds it, or when this process already writes it.  "-"
 * is not locked.  ms_out_unlock releases the lock and removes the lock file
 * (a path this process does not hold is a no-op). */
int ms_out_lock(const char *what, const char *path, ms_err *err);
void ms_out_unlock(const char *path);

/* For an image another program wrote into a temporary (gnuplot, which may
 * exit 0 after a failed write): 0 when tmp is a whole PNG (it ends with the
 * IEND chunk) or PDF (its last bytes hold %%EOF), chosen by path's
 * extension; else -1 with one line naming path. */
int ms_out_check_image(const char *tmp, const char *path, ms_err *err);

/* Runs a shell command that writes the file `path` (gnuplot): every
 * "@OUT@" in cmd is replaced by a temporary beside path, which is renamed
 * over path when the command exits 0 and left a whole image
 * (ms_out_check_image).  -1 with one line otherwise (the command's own
 * failure: "<what>: <path>: the command failed (exit N)"). */
int ms_out_from_command(const char *what, const char *path, const char *cmd, ms_err *err);

/* Creates the output folder of a command (figures, demo) when missing,
 * after ms_out_check_dir. */
int ms_out_make_dir(const char *what, const char *path, ms_err *err);

/* Flushes and closes standard output; -1 with one line ("standard output:
 * No space left on device") when any write to it failed.  main() calls it
 * before exiting, so `moesim run --json > /dev/full` exits non-zero. */
int ms_out_stdout_close(ms_err *err);

#endif
