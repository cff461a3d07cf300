/* guard.c - the fault guard of a store opened with GKV_GUARD: a read of a
 * page that was overwritten (or cut off) under the open map fails the
 * request with GKV_ECORRUPT instead of killing the process.
 *
 * LMDB follows page numbers and offsets it reads from the map without
 * checks, so bytes changed in data.mdb under an open handle can make it
 * read outside the file (SIGBUS) or outside the map (SIGSEGV), or fail
 * one of its assertions (abort()). An entry point that reads the map
 * through LMDB sets a guard (KV_GUARD_SET in kv_int.h) after it began its
 * transaction: sigsetjmp without the signal mask (no system call), and the
 * guard put on this thread's stack of guards. The process-wide SIGSEGV and
 * SIGBUS handler, installed when the first guarded handle opens, jumps
 * back to the innermost guard of the faulting thread when the address is
 * inside that store's map or at most 4 GiB past its end (LMDB reads at
 * most a 32-bit size past a page of the map); any other fault goes to the
 * handler that was there before (a sanitizer's, say), or, when that was
 * the default, kills the process as it would have. LMDB's assertion
 * callback jumps the same way. The entry point then aborts its
 * transaction, releases what it took after the guard, marks the handle
 * damaged (writes refused) and returns GKV_ECORRUPT.
 *
 * A guard cannot make a write through a changed page safe: LMDB copies a
 * page it writes to by the sizes in its header, and frees a value's
 * overflow pages by the count in the first one, so a changed header can
 * overrun the heap or make it free billions of pages, without a fault. So
 * a guarded handle watches data.mdb (inotify, IN_MODIFY): when the file
 * was written since this handle's last look, other than by its own
 * commits, a write transaction first checks the structure of the snapshot
 * it writes on (kv__walk, under LMDB's writer lock), and a damaged one
 * fails the write and marks the handle damaged. Where inotify is not to
 * be had, every write transaction checks. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/sysmacros.h>
#include "kv/kv_int.h"

__thread kv_guard *kv__guard_top;

static struct sigaction prev_segv, prev_bus;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static int install_err;

/* Whether address a lies where LMDB may read from the map of s. */
static int
in_map(const gkv_store *s, uintptr_t a)
{
    uintptr_t lo = __atomic_load_n(&s->st_map_lo, __ATOMIC_RELAXED);
    uintptr_t hi = __atomic_load_n(&s->st_map_hi, __ATOMIC_RELAXED);

    return lo != 0 && a >= lo && a - lo < hi - lo + (UINT64_C(1) << 32);
}

static void
chain(int sig, siginfo_t *si, void *ctx)
{
    const struct sigaction *p = sig == SIGBUS ? &prev_bus : &prev_segv;

    if ((p->sa_flags & SA_SIGINFO) && p->sa_sigaction != NULL) {
        p->sa_sigaction(sig, si, ctx);
    } else if (p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN) {
        p->sa_handler(sig);
    } else {
        /* the default: restore it and raise the signal again (not
         * blocked: SA_NODEFER), so the process dies of it, with its core
         * dump, as it would have; a signal sent by kill() too */
        struct sigaction dfl;

        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
        raise(sig);
    }
}

static void
on_fault(int sig, siginfo_t *si, void *ctx)
{
    kv_guard *g = kv__guard_top;
    int saved = errno;

    if (g != NULL && g->g_store != NULL &&
        in_map(g->g_store, (uintptr_t)si->si_addr)) {
        g->g_sig = sig;
        g->g_addr = (uintptr_t)si->si_addr;
        siglongjmp(g->g_jb, 1);
    }
    errno = saved;
    chain(sig, si, ctx);
}

static void
on_assert(MDB_env *env, const char *msg)
{
    kv_guard *g = kv__guard_top;

    if (g != NULL && g->g_store != NULL && g->g_store->st_env == env) {
        g->g_sig = 0;
        snprintf(g->g_what, sizeof g->g_what, "%s", msg);
        siglongjmp(g->g_jb, 1);
    }
    /* unguarded: LMDB aborts, as it would have */
}

static void
install(void)
{
    struct sigaction sa;

    if (!KV_GUARD_SIGNALS)
        return;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &prev_segv) != 0 ||
        sigaction(SIGBUS, &sa, &prev_bus) != 0)
        install_err = errno;
}

/* Where the map of data.mdb lies: LMDB tells it only with MDB_FIXEDMAP,
 * so from the process's mappings, by the file's inode. */
void
kv__guard_map(gkv_store *s)
{
    mdb_filehandle_t fd;
    struct stat st;
    char line[512];
    uintptr_t lo = 0, hi = 0;
    FILE *f;

    if (!(s->st_flags & GKV_GUARD) || mdb_env_get_fd(s->st_env, &fd) != 0 ||
        fstat(fd, &st) != 0 || (f = fopen("/proc/self/maps", "re")) == NULL)
        return;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long long a, b, off, ino;
        unsigned maj, mnr;

        if (sscanf(line, "%llx-%llx %*s %llx %x:%x %llu", &a, &b, &off, &maj,
                   &mnr, &ino) == 6 && ino == (unsigned long long)st.st_ino &&
            off == 0 && (dev_t)makedev(maj, mnr) == st.st_dev) {
            lo = (uintptr_t)a;
            hi = (uintptr_t)b;
        }
    }
    fclose(f);
    /* hi first: a handler never sees the new base with the old end */
    __atomic_store_n(&s->st_map_lo, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&s->st_map_hi, hi, __ATOMIC_RELEASE);
    __atomic_store_n(&s->st_map_lo, lo, __ATOMIC_RELEASE);
}

/* Reads the events the watch holds; 1 when there were any (or no
 * watch), 0 when none. */
static int
watch_drain(gkv_store *s)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    int any = 0;
    ssize_t n;

    if (s->st_gfd < 0)
        return 1;
    while ((n = read(s->st_gfd, buf, sizeof buf)) > 0)
        any = 1;
    if (n < 0 && errno != EAGAIN && errno != EINTR)
        any = 1;
    return any;
}

/* data.mdb's modification time, ns (0 when unknown). */
static uint64_t
file_mtime(gkv_store *s)
{
    mdb_filehandle_t fd;
    struct stat st;

    if (mdb_env_get_fd(s->st_env, &fd) != 0 || fstat(fd, &st) != 0)
        return 0;
    return (uint64_t)st.st_mtim.tv_sec * 1000000000u +
           (uint64_t)st.st_mtim.tv_nsec;
}

gkv_err
kv__guard_read_check(gkv_store *s, MDB_txn *txn, uint64_t now)
{
    mdb_filehandle_t fd;
    gkv_err rc = GKV_OK;

    if (!(s->st_flags & GKV_GUARD) ||
        now == __atomic_load_n(&s->st_gmtime, __ATOMIC_ACQUIRE) ||
        mdb_env_get_fd(s->st_env, &fd) != 0)
        return GKV_OK;
    pthread_mutex_lock(&s->st_gmu);
    if (now != __atomic_load_n(&s->st_gmtime, __ATOMIC_ACQUIRE)) {
        rc = kv__walk(s, s->st_path, fd, mdb_txn_id(txn), NULL);
        if (rc == GKV_OK)
            __atomic_store_n(&s->st_gmtime, now, __ATOMIC_RELEASE);
        else if (rc == GKV_ECORRUPT)
            kv__damaged(s);
    }
    pthread_mutex_unlock(&s->st_gmu);
    return rc == GKV_EBUSY ? GKV_OK : rc;
}

gkv_err
kv__guard_write_check(gkv_store *s, MDB_txn *txn)
{
    mdb_filehandle_t fd;
    gkv_err rc;

    if (!(s->st_flags & GKV_GUARD) || !watch_drain(s) ||
        mdb_env_get_fd(s->st_env, &fd) != 0)
        return GKV_OK;
    /* a write transaction's id is the newest commit's plus one; holding
     * the writer lock, no commit can overwrite that snapshot's pages */
    rc = kv__walk(s, s->st_path, fd, mdb_txn_id(txn) - 1, NULL);
    if (rc == GKV_ECORRUPT)
        kv__damaged(s);
    return rc == GKV_EBUSY ? GKV_OK : rc;
}

void
kv__guard_committed(gkv_store *s)
{
    if (!(s->st_flags & GKV_GUARD))
        return;
    if (s->st_gfd >= 0)
        (void)watch_drain(s);
    __atomic_store_n(&s->st_gmtime, file_mtime(s), __ATOMIC_RELEASE);
}

gkv_err
kv__guard_open(gkv_store *s)
{
    char p[4200];
    int mrc;

    pthread_once(&install_once, install);
    if (install_err != 0)
        return kv__fail(NULL, gkv__from_errno(install_err), "cannot open "
                        "store '%s' with GKV_GUARD: sigaction: %s",
                        s->st_path, strerror(install_err));
    if ((mrc = mdb_env_set_assert(s->st_env, on_assert)) != 0)
        return kv__fail(NULL, kv__from_mdb(mrc), "cannot open store '%s' "
                        "with GKV_GUARD: %s", s->st_path, mdb_strerror(mrc));
    kv__guard_map(s);
    if (__atomic_load_n(&s->st_map_lo, __ATOMIC_ACQUIRE) == 0)
        return kv__fail(NULL, GKV_EIO, "cannot open store '%s' with "
                        "GKV_GUARD: its map is not in /proc/self/maps",
                        s->st_path);
    __atomic_store_n(&s->st_gmtime, file_mtime(s), __ATOMIC_RELEASE);
    /* after the open's structure check: changes from now on */
    if ((size_t)snprintf(p, sizeof p, "%s/data.mdb", s->st_path) < sizeof p &&
        (s->st_gfd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) >= 0 &&
        inotify_add_watch(s->st_gfd, p, IN_MODIFY) < 0) {
        close(s->st_gfd);
        s->st_gfd = -1;
    }
    return GKV_OK;
}

gkv_err
kv__guard_caught(kv_guard *g)
{
    gkv_store *s = g->g_store;

    kv__guard_top = g->g_prev;
    kv__damaged(s);
    if (g->g_sig == 0)
        return kv__fail(s, GKV_ECORRUPT, "store '%s' is damaged: data.mdb "
                        "changed under this handle (LMDB: %s); this handle "
                        "refuses writes until the store is repaired and "
                        "reopened", s->st_path, g->g_what);
    return kv__fail(s, GKV_ECORRUPT, "store '%s' is damaged: data.mdb "
                    "changed under this handle (%s at map offset %#" PRIxPTR
                    "); this handle refuses writes until the store is "
                    "repaired and reopened", s->st_path,
                    g->g_sig == SIGBUS ? "SIGBUS" : "SIGSEGV",
                    g->g_addr - __atomic_load_n(&s->st_map_lo,
                                                __ATOMIC_RELAXED));
}

gkv_err
kv__guarded(gkv_store *s, MDB_txn *txn, kv_read_fn fn, void *arg)
{
    kv_guard g = {.g_store = NULL};
    gkv_err rc;

    KV_GUARD_BEGIN(s, &g, caught);
    rc = fn(s, txn, arg);
    KV_GUARD_END(&g);
    return rc;
caught:
    return kv__guard_caught(&g);
}
