/* wbown.c - write-back ownership across processes.
 *
 * A handle in write-back mode keeps tensors in RAM and writes whole chunks
 * back at each flush: a write to such a tensor by another process (kvctl
 * put or import on the directory, a second server on the store) would be
 * overwritten by the next flush, or its rows mixed with the copy's. So the
 * process whose handle holds tensors in write-back says so in the file
 * STORE/writeback.lock: it holds a write lock (fcntl) on its first byte
 * and the file lists the tensors, one name a line. Every other process
 * checks that lock before writing a tensor by name and refuses
 * (GKV_EBUSY, naming the process) when the tensor is listed; a second
 * process cannot start write-back on the store at all. The kernel drops
 * the lock when the owner exits, however it exits, so a killed server's
 * list is ignored. A process checks the lock through the one descriptor
 * its handle keeps open: closing any descriptor of the file would drop the
 * process's own lock (fcntl semantics), and there is one handle per store
 * and process; a forked child that closes the handle it inherited leaves
 * that descriptor open (as LMDB's), for the child's own handle's sake.
 * The check runs inside the write's transaction, under LMDB's writer lock
 * (kv__write_named); a start lists the tensor, then waits for that lock
 * once before copying it, so a write that passed the check has committed
 * by then and is in the copy. Unlinking the file
 * defeats all this (a new one has no lock): do not. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "kv/kv_int.h"

#define LIST_MAX (16u << 20)       /* bytes of the list read back */

/* The handle's descriptor of the file (store.c opens it with a writable
 * handle: read-write, else read-only, which can still see the lock), or
 * -1. */
static int
own_fd(gkv_store *s)
{
    return s->st_wbo_fd;
}

/* Whether another process holds the file's lock; *pid gets it (0 when
 * the holder is outside this process's PID namespace: the kernel says 0,
 * and the lock counts all the same). */
static int
owned_elsewhere(int fd, pid_t *pid)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0,
                       .l_len = 1};

    *pid = 0;
    if (fcntl(fd, F_GETLK, &fl) != 0 || fl.l_type == F_UNLCK)
        return 0;
    *pid = fl.l_pid;
    return 1;
}

/* "process 123", or words for a holder whose pid is not visible here. */
static const char *
holder(pid_t pid, char *buf, size_t cap)
{
    if (pid > 0)
        snprintf(buf, cap, "process %ld", (long)pid);
    else
        snprintf(buf, cap, "a process of another PID namespace");
    return buf;
}

/* Whether 'name' (a companion counts as its tensor) is a line of the
 * owner's list; 1 too when the list cannot be read (safe side). */
static int
listed(int fd, const char *name)
{
    size_t nl = strcspn(name, "#");
    struct stat sb;
    char *buf, *line, *end;
    size_t cap;
    ssize_t n;
    int hit = 0;

    if (fstat(fd, &sb) != 0)
        return 1;
    cap = (size_t)sb.st_size < LIST_MAX ? (size_t)sb.st_size : LIST_MAX;
    if ((buf = gkv__malloc(cap + 1)) == NULL)
        return 1;
    if ((n = pread(fd, buf, cap, 0)) < 0) {
        gkv__free(buf);
        return 1;
    }
    buf[n] = '\0';
    for (line = buf; *line != '\0' && !hit; line = end + 1) {
        if ((end = strchr(line, '\n')) == NULL)
            end = line + strlen(line);
        hit = (size_t)(end - line) == nl && memcmp(line, name, nl) == 0;
        if (*end == '\0')
            break;
    }
    gkv__free(buf);
    return hit;
}

gkv_err
kv__wb_foreign(gkv_store *s, const char *name)
{
    char who[64];
    pid_t pid;
    int fd;

    if (s->st_flags & GKV_RDONLY)
        return GKV_OK;              /* refused as read-only anyway */
    if (__atomic_load_n(&s->st_wbo_held, __ATOMIC_ACQUIRE))
        return GKV_OK;              /* the owner is this process */
    if ((fd = own_fd(s)) < 0 || !owned_elsewhere(fd, &pid) || !listed(fd, name))
        return GKV_OK;
    return kv__fail(s, GKV_EBUSY, "tensor '%.*s' is kept in write-back mode "
                    "by %s (a gkv-server --writeback?): its copy in that "
                    "process's memory would overwrite this write at its next "
                    "flush; write through that process, or stop it first",
                    (int)strcspn(name, "#"), name, holder(pid, who, sizeof who));
}

/* Takes the store's write-back lock for this process. */
static gkv_err
wb_own_claim(gkv_store *s)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0,
                       .l_len = 1};
    int fd = own_fd(s);

    if (s->st_wbo_held)
        return GKV_OK;
    if (fd < 0)
        return kv__fail(s, GKV_EIO, "store '%s': cannot open writeback.lock",
                        s->st_path);
    if (fcntl(fd, F_SETLK, &fl) != 0) {
        char who[64];
        pid_t pid;

        if (errno == EBADF)         /* opened read-only: not ours to take */
            return kv__fail(s, GKV_EPERM, "store '%s': writeback.lock is not "
                            "writable by this process: it cannot keep "
                            "tensors in write-back", s->st_path);
        owned_elsewhere(fd, &pid);
        return kv__fail(s, GKV_EBUSY, "store '%s': tensors are kept in "
                        "write-back mode by %s already; one process at a time "
                        "may (each would overwrite the other's flushes)",
                        s->st_path, holder(pid, who, sizeof who));
    }
    __atomic_store_n(&s->st_wbo_held, 1, __ATOMIC_RELEASE);
    return GKV_OK;
}

gkv_err
kv__wb_own_publish(gkv_store *s, const char *pending)
{
    struct flock fl = {.l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    size_t len = 0, cap = 0;
    char *buf = NULL;
    gkv_err rc = GKV_OK;
    int fd = own_fd(s);

    if (s->st_wb == NULL && pending == NULL) {
        if (s->st_wbo_held && fd >= 0) {
            /* a list left without the lock would be ignored anyway */
            if (ftruncate(fd, 0) != 0)
                errno = 0;
            fl.l_type = F_UNLCK;
            (void)fcntl(fd, F_SETLK, &fl);
            __atomic_store_n(&s->st_wbo_held, 0, __ATOMIC_RELEASE);
        }
        return GKV_OK;
    }
    if ((rc = wb_own_claim(s)) != GKV_OK)
        return rc;
    for (kv_wb *w = s->st_wb; w != NULL; w = w->next)
        cap += strlen(w->m[0].name) + 1;
    cap += (pending != NULL ? strlen(pending) : 0) + 2;
    if ((buf = gkv__malloc(cap)) == NULL)
        return kv__fail(s, GKV_ENOMEM, "out of memory");
    if (pending != NULL)
        len += (size_t)snprintf(buf + len, cap - len, "%s\n", pending);
    for (kv_wb *w = s->st_wb; w != NULL; w = w->next)
        len += (size_t)snprintf(buf + len, cap - len, "%s\n", w->m[0].name);
    /* one write, then the length: a reader sees the old list or the new
     * one (at worst with the old one's tail: refused a moment longer) */
    if (pwrite(fd, buf, len, 0) != (ssize_t)len || ftruncate(fd, (off_t)len) != 0)
        rc = kv__fail(s, errno == ENOSPC || errno == EDQUOT ? GKV_EMAPFULL
                                                            : GKV_EIO,
                      "store '%s': writing writeback.lock: %s", s->st_path,
                      strerror(errno));
    gkv__free(buf);
    return rc;
}

void
kv__wb_own_close(gkv_store *s)
{
    if (s->st_wbo_fd >= 0) {
        if (s->st_wbo_held && ftruncate(s->st_wbo_fd, 0) != 0)
            errno = 0;
        s->st_wbo_held = 0;
        close(s->st_wbo_fd);        /* drops the lock */
        s->st_wbo_fd = -1;
    }
}
