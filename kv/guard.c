/* guard.c - the fault guard of a store opened with GKV_GUARD: a read of a
 * page that was overwritten (or cut off) under the open map fails the
 * request with GKV_ECORRUPT instead of killing the process.
 *
 * LMDB follows page numbers and offsets it reads from the map without
 * checks, so bytes changed in data.mdb under an open handle can make it
 * read outside the file (SIGBUS), outside the map or through a NULL or
 * wild pointer (SIGSEGV), or fail one of its assertions (abort()). An
 * entry point that reads the map through LMDB sets a guard (KV_GUARD_BEGIN
 * in kv_int.h) around its LMDB calls: sigsetjmp without the signal mask
 * (no system call), and the guard put on this thread's stack of guards.
 * The process-wide SIGSEGV and SIGBUS handler, installed when the first
 * guarded handle opens, jumps back to the innermost guard of the faulting
 * thread when the fault is a real read or access fault (raised by the
 * kernel, not sent by kill()) and either its address is inside that
 * store's map or at most 4 GiB past its end (LMDB and gkv read at most a
 * 32-bit size past a page of the map), or the faulting instruction is in
 * liblmdb's code (found once, at install). Any other fault goes to the
 * handler that was there before (a sanitizer's, say) as the kernel would
 * have run it, or, when that was the default, kills the process as it
 * would have. LMDB's assertion callback jumps the same way. The entry
 * point then aborts its transaction, releases what it took after the
 * guard, marks the handle damaged (writes refused) and returns
 * GKV_ECORRUPT; a write transaction is not aborted but left as it is
 * (kv__guard_caught_write: LMDB links cursors on the stack the jump left
 * into it), and with it the writer lock, until the process exits. Each
 * guarded open puts the handler back in front of one installed since, and
 * a fault that a later handler re-raise()d while a guard is set is let
 * fault again under this one.
 *
 * A guard cannot make every read of a changed page safe (a changed page
 * can send LMDB into a loop) nor any write through one (LMDB copies a
 * page it writes to by the sizes in its header, and frees a value's
 * overflow pages by the count in the first one, so a changed header can
 * overrun the heap or make it free billions of pages, without a fault).
 * So a transaction that begins after data.mdb changed first checks the
 * structure of its snapshot (kv__walk), unless newer commits explain the
 * change (kv__guard_check). */
#include <errno.h>
#include <inttypes.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <ucontext.h>
#include <unistd.h>
#include "kv/kv_int.h"

__thread kv_guard *kv__guard_top KV_TLS_IE;

/* the handlers that were there before ours (reinstalled: the one that
 * had displaced ours); under install_mu but in the handler */
static struct sigaction prev_segv, prev_bus;
static pthread_mutex_t install_mu = PTHREAD_MUTEX_INITIALIZER;
static int installed;
/* calls into a previous handler in progress (chain) */
static int chaining;
/* The faults being handed to the previous handler now, one slot a thread
 * that chains (no thread-local: libgkv keeps one, kv__guard_top): a
 * handler that calls the one it displaced (this) hands the same siginfo
 * back, and must not be called again for it. */
#define CHAIN_SLOTS 16
static siginfo_t *chain_si[CHAIN_SLOTS];
/* liblmdb's code, [lo, hi) (0, 0: not found, as when it is linked
 * statically into the program; then only faults in the map are caught) */
static uintptr_t lmdb_lo, lmdb_hi;

/* Whether address a lies where LMDB may read from the map of s. */
static int
in_map(const gkv_store *s, uintptr_t a)
{
    uintptr_t lo = __atomic_load_n(&s->st_map_lo, __ATOMIC_RELAXED);
    uintptr_t hi = __atomic_load_n(&s->st_map_hi, __ATOMIC_RELAXED);

    return lo != 0 && a >= lo && a - lo < hi - lo + (UINT64_C(1) << 32);
}

/* Whether a signal is a read or access fault raised by the kernel for an
 * instruction of this thread: not one sent (kill, raise, sigqueue:
 * si_code <= 0), nor another kind of fault. SI_KERNEL: a non-canonical
 * address on x86-64 (a wild pointer), whose si_addr reads 0. */
static int
is_access_fault(int sig, const siginfo_t *si)
{
    if (sig == SIGSEGV)
        return si->si_code == SEGV_MAPERR || si->si_code == SEGV_ACCERR ||
               si->si_code == SI_KERNEL;
    return si->si_code == BUS_ADRERR || si->si_code == BUS_OBJERR;
}

/* The faulting instruction's address, from the handler's context; 0 on
 * an architecture this does not know (then only the map's rule holds). */
static uintptr_t
fault_ip(const void *ctx)
{
    const ucontext_t *uc = ctx;

#if defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (uintptr_t)uc->uc_mcontext.pc;
#else
    (void)uc;
    return 0;
#endif
}

static void
set_default(int sig)
{
    struct sigaction dfl;

    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
}

/* Runs the handler that was there before, as the kernel would have run it
 * for this signal: its mask (and the signal itself unless SA_NODEFER)
 * blocked during the call, SA_RESETHAND honoured. SIG_IGN ignores a sent
 * signal; a fault cannot be ignored (the kernel kills for it). Under
 * SIG_DFL, or SIG_IGN and a fault, the default is restored: a fault
 * returns and its instruction faults again, killing the process with its
 * core dump as it would have; a sent signal is raised again (not blocked:
 * this handler runs with SA_NODEFER). */
static void
chain(int sig, siginfo_t *si, void *ctx)
{
    const struct sigaction *p = sig == SIGBUS ? &prev_bus : &prev_segv;
    int info = (p->sa_flags & SA_SIGINFO) != 0;
    void (*h)(int) = info ? (void (*)(int))(void *)p->sa_sigaction
                          : p->sa_handler;
    sigset_t mask, old;
    int slot;

    if (h == SIG_IGN && si->si_code <= 0)
        return;                         /* sent, and ignored before */
    if (si->si_code <= 0 && __atomic_load_n(&chaining, __ATOMIC_RELAXED) > 0)
        h = SIG_DFL;    /* raised again by the handler chained to (one that
                         * put this handler back and raise()s): default */
    if (h == SIG_DFL || h == SIG_IGN) {
        set_default(sig);
        if (si->si_code <= 0)
            raise(sig);
        return;
    }
    mask = p->sa_mask;
    if (!(p->sa_flags & SA_NODEFER))
        sigaddset(&mask, sig);
    if (p->sa_flags & SA_RESETHAND)
        set_default(sig);
    pthread_sigmask(SIG_BLOCK, &mask, &old);
    __atomic_add_fetch(&chaining, 1, __ATOMIC_RELAXED);
    for (slot = 0; slot < CHAIN_SLOTS; slot++) {
        siginfo_t *none = NULL;

        if (__atomic_compare_exchange_n(&chain_si[slot], &none, si, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            break;
    }
    if (info)
        p->sa_sigaction(sig, si, ctx);
    else
        h(sig);
    if (slot < CHAIN_SLOTS)
        __atomic_store_n(&chain_si[slot], NULL, __ATOMIC_RELEASE);
    __atomic_sub_fetch(&chaining, 1, __ATOMIC_RELAXED);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Whether fault si is one this handler is handing to the previous one
 * now (that handler called this one back). */
static int
chained_back(const siginfo_t *si)
{
    for (int i = 0; i < CHAIN_SLOTS; i++)
        if (__atomic_load_n(&chain_si[i], __ATOMIC_ACQUIRE) == si)
            return 1;
    return 0;
}

static void
on_fault(int sig, siginfo_t *si, void *ctx)
{
    kv_guard *g = kv__guard_top;
    int saved = errno;

    if (chained_back(si)) {
        /* the previous handler called this one for the fault handed to
         * it: the default for it (the instruction faults again and the
         * process dies as it would have), not another round */
        set_default(sig);
        errno = saved;
        return;
    }
    if (g != NULL && g->g_store != NULL && si->si_code == SI_TKILL &&
        si->si_pid == getpid() &&
        __atomic_load_n(&chaining, __ATOMIC_RELAXED) == 0) {
        /* raised by this process while this thread runs a guarded call:
         * a handler installed after this one (CPython's faulthandler, say)
         * met a fault first, put this handler back and raise()d. Returning
         * lets the faulting instruction run again, now under this
         * handler, which decides as for any fault */
        errno = saved;
        return;
    }
    if (g != NULL && g->g_store != NULL && is_access_fault(sig, si)) {
        uintptr_t ip = fault_ip(ctx);

        if (in_map(g->g_store, (uintptr_t)si->si_addr) ||
            ip - lmdb_lo < lmdb_hi - lmdb_lo) {
            g->g_sig = sig;
            g->g_addr = (uintptr_t)si->si_addr;
            g->g_ip = ip;
            siglongjmp(g->g_jb, 1);
        }
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
        g->g_addr = g->g_ip = 0;
        snprintf(g->g_what, sizeof g->g_what, "%s", msg);
        siglongjmp(g->g_jb, 1);
    }
    /* unguarded: LMDB aborts, as it would have */
}

/* dl_iterate_phdr: the executable segment of the loaded liblmdb. */
static int
find_lmdb(struct dl_phdr_info *info, size_t size, void *arg)
{
    const char *base;

    (void)size;
    (void)arg;
    if (info->dlpi_name == NULL ||
        (base = strrchr(info->dlpi_name, '/')) == NULL ||
        strncmp(base + 1, "liblmdb.so", 10) != 0)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            lmdb_lo = (uintptr_t)(info->dlpi_addr + ph->p_vaddr);
            lmdb_hi = lmdb_lo + (uintptr_t)ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

/* Installs on_fault for SIGSEGV and SIGBUS, the first time and whenever
 * another handler has displaced it since (one installed after a guarded
 * open that does not chain to it): that one becomes the previous handler,
 * which on_fault chains to. Under install_mu. 0 or an errno. */
static int
install(void)
{
    static const int sigs[2] = {SIGSEGV, SIGBUS};
    struct sigaction sa, cur;

    if (!KV_GUARD_SIGNALS)
        return 0;
    if (!installed)
        (void)dl_iterate_phdr(find_lmdb, NULL);
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 2; i++) {
        struct sigaction *prev = sigs[i] == SIGBUS ? &prev_bus : &prev_segv;

        if (sigaction(sigs[i], NULL, &cur) != 0)
            return errno;
        if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_fault)
            continue;
        /* the previous handler is read by on_fault: set before ours is */
        *prev = cur;
        if (sigaction(sigs[i], &sa, NULL) != 0)
            return errno;
    }
    installed = 1;
    return 0;
}

int
kv__guard_lmdb_code(uintptr_t *lo, uintptr_t *hi)
{
    *lo = lmdb_lo;
    *hi = lmdb_hi;
    return lmdb_hi > lmdb_lo;
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

/* Whether the watch holds events (not read); 1 without a watch. */
static int
watch_pending(gkv_store *s)
{
    int n = 0;

    return s->st_gfd < 0 || ioctl(s->st_gfd, FIONREAD, &n) != 0 || n > 0;
}

/* Whether nothing was written since the state last recorded (each record
 * drains the watch first), and that state is whole and settled (no drain
 * waits for its record): the fast test of a write and of a read through
 * a held snapshot. 0 without a watch. */
static int
watch_settled(gkv_store *s)
{
    return s->st_gfd >= 0 && !watch_pending(s) &&
           !__atomic_load_n(&s->st_gbad, __ATOMIC_ACQUIRE) &&
           !__atomic_load_n(&s->st_gunsure, __ATOMIC_ACQUIRE);
}

/* Reads the events the watch holds; 1 when there were any, 0 when none
 * or without a watch. */
static int
watch_drain(gkv_store *s)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    int any = 0;
    ssize_t n;

    if (s->st_gfd < 0)
        return 0;
    while ((n = read(s->st_gfd, buf, sizeof buf)) > 0)
        any = 1;
    if (n < 0 && errno != EAGAIN && errno != EINTR)
        any = 1;
    return any;
}

/* How long a read waits for a commit in flight before it walks, ms. */
#define COMMIT_WAIT_MS 20

/* Whether a commit newer than 'id' lands in data.mdb's header pages
 * within COMMIT_WAIT_MS (the header pages at their offsets of a 64-bit
 * LMDB: the transaction number 144 bytes into each). Another process's
 * commit writes its pages first (the file changes), syncs them, and only
 * then its header page: a read that begins in between sees the file
 * changed and no newer commit. Its snapshot is whole (a commit writes
 * no page the newest commit uses), so it waits for the header rather
 * than walk: a walk costs tens of milliseconds a store of a few hundred
 * MB, every time. */
static int
commit_lands(gkv_store *s, int fd, uint64_t id)
{
    for (int i = 0; i <= COMMIT_WAIT_MS; i++) {
        uint64_t t[2];

        /* a newer transaction in sound header pages (a header damaged
         * into a larger number is not a commit) */
        if (pread(fd, &t[0], 8, 144) == 8 &&
            pread(fd, &t[1], 8, (off_t)s->st_psize + 144) == 8 &&
            (t[0] > id || t[1] > id) &&
            kv__walk_meta(s->st_path, fd) == GKV_OK)
            return 1;
        if (i < COMMIT_WAIT_MS)
            usleep(1000);
    }
    return 0;
}

/* Records the state (mtime, size, txn) as checked: whole, or damaged
 * (bad) with the walk's message, which is s's message now. The caller
 * drained the watch BEFORE it took the observation it records (the walk,
 * the fstat): events that come after stay pending for the next write.
 * Under st_gmu (or at open). Bumps st_gseq last. */
static void
state_set(gkv_store *s, uint64_t mtime, uint64_t size, uint64_t txn, int bad)
{
    if (bad)
        snprintf(s->st_gbad_msg, sizeof s->st_gbad_msg, "%s",
                 gkv_store_errmsg(s));
    s->st_gsize = size;
    s->st_gtxn = txn;
    __atomic_store_n(&s->st_gbad, bad, __ATOMIC_RELEASE);
    __atomic_store_n(&s->st_gunsure, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&s->st_gmtime, mtime, __ATOMIC_RELEASE);
    __atomic_add_fetch(&s->st_gseq, 1, __ATOMIC_RELEASE);
}

gkv_err
kv__guard_check_slow(gkv_store *s, MDB_txn *txn, int write, uint64_t mtime,
                     uint64_t size, uint64_t seq)
{
    mdb_filehandle_t fd;
    uint64_t id;
    gkv_err rc = GKV_OK;
    int events, polled = 0;

    /* the fast path of a write (a read's is kv__guard_check, inline):
     * the watch holds no event, and the state last checked was whole and
     * settled (no walk that drained the watch has yet to record). The
     * watch also sees a change within one mtime tick */
    if (write && watch_settled(s))
        return GKV_OK;
    if (mdb_env_get_fd(s->st_env, &fd) != 0)
        return GKV_OK;
    /* the newest commit this snapshot sees (a write transaction's id is
     * the newest commit's plus one; holding the writer lock, no commit
     * can overwrite that snapshot's pages) */
    id = (uint64_t)mdb_txn_id(txn) - (write ? 1u : 0u);
again:
    pthread_mutex_lock(&s->st_gmu);
    /* not drained here: only a state recorded (state_set) takes the
     * events it explains; a snapshot older than the state last checked
     * leaves them to the next that records */
    events = s->st_gfd >= 0 && watch_pending(s);
    /* an older time is one taken before the state last checked only when
     * a state was recorded since it was taken (st_gseq moved); else the
     * time went back (a file written in place with its time set back, a
     * clock stepped back): looked at as any change */
    if (id <= s->st_gtxn && ((mtime < s->st_gmtime && seq != s->st_gseq) ||
                             (mtime == s->st_gmtime && !events))) {
        /* a state no newer than the one last checked (checked meanwhile,
         * or an fstat older than that check); or the state known damaged:
         * refused again without a walk */
        if (s->st_gbad) {
            __atomic_add_fetch(&s->st_grefused, 1, __ATOMIC_RELAXED);
            rc = kv__fail(s, GKV_ECORRUPT, "%s", s->st_gbad_msg);
        }
    } else if (!s->st_gbad && id > s->st_gtxn &&
               kv__walk_meta(s->st_path, fd) == GKV_OK) {
        /* newer commits (another handle's, another process's; this
         * handle's own record their state as they commit), with sound
         * header pages: no walk. The state recorded is the file's now,
         * not the fstat taken before this snapshot began: that one may
         * fall between the pages and the header of the commit it sees,
         * and the next read would find the same commit with a later
         * time */
        struct stat st;

        __atomic_add_fetch(&s->st_gcommits, 1, __ATOMIC_RELAXED);
        (void)watch_drain(s);       /* before the fstat it records */
        if (fstat(fd, &st) == 0) {
            mtime = kv__mtime_ns(&st);
            size = (uint64_t)st.st_size;
        }
        state_set(s, mtime, size, id, 0);
    } else if (id < s->st_gtxn) {
        /* a snapshot older than the state last checked (begun before that
         * check, or held across it): nothing newer to learn, and nothing
         * to record (only the newest state counts: a walk of this older,
         * perhaps whole, tree must not clear a newer state found
         * damaged, which still refuses it) */
        if (s->st_gbad) {
            __atomic_add_fetch(&s->st_grefused, 1, __ATOMIC_RELAXED);
            rc = kv__fail(s, GKV_ECORRUPT, "%s", s->st_gbad_msg);
        }
    } else if (!write && !s->st_gbad &&
               __atomic_load_n(&s->st_gcommitting, __ATOMIC_ACQUIRE) > 0) {
        /* this handle's own commit in flight (a thread of this process
         * writes): no walk and no wait; that commit records its state */
    } else if (!write && !s->st_gbad && !polled) {
        /* perhaps another process's commit in flight: wait for its header
         * without st_gmu (other reads go on meanwhile), then look again */
        pthread_mutex_unlock(&s->st_gmu);
        polled = 1;
        if (commit_lands(s, fd, id)) {
            /* this snapshot predates that commit and is whole; the next
             * read takes the commit without a walk */
            __atomic_add_fetch(&s->st_gcommits, 1, __ATOMIC_RELAXED);
            return GKV_OK;
        }
        goto again;
    } else {
        __atomic_add_fetch(&s->st_gwalks, 1, __ATOMIC_RELAXED);
        /* held reads take the slow path (and wait for st_gmu) until the
         * walk records its state: the events are drained before it */
        __atomic_store_n(&s->st_gunsure, 1, __ATOMIC_RELEASE);
        (void)watch_drain(s);       /* before the walk it records */
        rc = kv__walk(s, s->st_path, fd, id, NULL);
        if (rc == GKV_OK || rc == GKV_ECORRUPT)
            state_set(s, mtime, size, id, rc == GKV_ECORRUPT);
        if (rc == GKV_ECORRUPT)
            kv__damaged(s);
    }
    pthread_mutex_unlock(&s->st_gmu);
    return rc == GKV_EBUSY ? GKV_OK : rc;
}

gkv_err
kv__guard_held(gkv_txn *tx)
{
    gkv_store *s = tx->tx_store;
    mdb_filehandle_t fd;
    struct stat st;
    uint64_t seq;

    /* not in a child after fork() with its parent's handle: the watch's
     * descriptor is shared with the parent, whose events a drain here
     * would take */
    if (!tx->tx_held || !(s->st_flags & GKV_GUARD) || kv__forked(s))
        return GKV_OK;
    if (watch_settled(s))
        return GKV_OK;
    seq = __atomic_load_n(&s->st_gseq, __ATOMIC_ACQUIRE);  /* before */
    if (mdb_env_get_fd(s->st_env, &fd) != 0 || fstat(fd, &st) != 0)
        return GKV_OK;
    /* with the watch, also a write within the mtime tick of the state
     * last checked (a snapshot is often held from just before it) */
    if (s->st_gfd >= 0)
        return kv__guard_check_slow(s, tx->tx_txn, 0, kv__mtime_ns(&st),
                                    (uint64_t)st.st_size, seq);
    return kv__guard_check(s, tx->tx_txn, 0, kv__mtime_ns(&st),
                           (uint64_t)st.st_size, seq);
}

void
kv__guard_committed(gkv_store *s, uint64_t id)
{
    mdb_filehandle_t fd;
    struct stat st;

    if (!(s->st_flags & GKV_GUARD) || mdb_env_get_fd(s->st_env, &fd) != 0)
        return;
    pthread_mutex_lock(&s->st_gmu);
    /* a state found damaged stays so; an older commit does not go back:
     * then nothing is drained either (the events stay for the next
     * check). Held reads and writes take the slow path from the drain to
     * the record (state_set clears st_gunsure; a failed fstat leaves it
     * set, and the next check records) */
    if (!s->st_gbad && id >= s->st_gtxn) {
        __atomic_store_n(&s->st_gunsure, 1, __ATOMIC_RELEASE);
        (void)watch_drain(s);       /* before the fstat it records */
        if (fstat(fd, &st) == 0)
            state_set(s, kv__mtime_ns(&st), (uint64_t)st.st_size, id, 0);
    }
    pthread_mutex_unlock(&s->st_gmu);
}

gkv_err
kv__guard_open(gkv_store *s)
{
    mdb_filehandle_t fd;
    MDB_envinfo ei;
    struct stat st;
    char p[4200];
    int mrc, install_err;

    pthread_mutex_lock(&install_mu);
    install_err = install();
    pthread_mutex_unlock(&install_mu);
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
    /* the state the open's structure check sees (it runs after this: a
     * change in between is one it checks) */
    if (mdb_env_get_fd(s->st_env, &fd) == 0 && fstat(fd, &st) == 0 &&
        mdb_env_info(s->st_env, &ei) == 0)
        state_set(s, kv__mtime_ns(&st), (uint64_t)st.st_size,
                  (uint64_t)ei.me_last_txnid, 0);
    /* changes from now on */
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
    g->g_store = NULL;
    __atomic_add_fetch(&s->st_gcaught, 1, __ATOMIC_RELAXED);
    kv__damaged(s);
    if (g->g_sig == 0)
        return kv__fail(s, GKV_ECORRUPT, "store '%s' is damaged: data.mdb "
                        "changed under this handle (LMDB: %s); this handle "
                        "refuses writes until the store is repaired and "
                        "reopened", s->st_path, g->g_what);
    if (in_map(s, g->g_addr))
        return kv__fail(s, GKV_ECORRUPT, "store '%s' is damaged: data.mdb "
                        "changed under this handle (%s at map offset %#"
                        PRIxPTR "); this handle refuses writes until the "
                        "store is repaired and reopened", s->st_path,
                        g->g_sig == SIGBUS ? "SIGBUS" : "SIGSEGV",
                        g->g_addr - __atomic_load_n(&s->st_map_lo,
                                                    __ATOMIC_RELAXED));
    return kv__fail(s, GKV_ECORRUPT, "store '%s' is damaged: data.mdb "
                    "changed under this handle (%s in LMDB at address %#"
                    PRIxPTR ", outside the map); this handle refuses writes "
                    "until the store is repaired and reopened", s->st_path,
                    g->g_sig == SIGBUS ? "SIGBUS" : "SIGSEGV", g->g_addr);
}

gkv_err
kv__guard_caught_write(kv_guard *g)
{
    gkv_store *s = g->g_store;
    char msg[700];

    (void)kv__guard_caught(g);
    /* a fault in a commit: it is over (this thread holds the writer lock:
     * no other commit of the handle is in flight) */
    __atomic_store_n(&s->st_gcommitting, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&s->st_wheld, 1, __ATOMIC_RELEASE);
    snprintf(msg, sizeof msg, "%s", gkv_store_errmsg(s));
    return kv__fail(s, GKV_ECORRUPT, "%s; the fault was inside a write "
                    "transaction, which is left unended: this process holds "
                    "the store's writer lock until it exits", msg);
}

gkv_err
kv__guarded(gkv_store *s, MDB_txn *txn, kv_read_fn fn, void *arg)
{
    kv_guard g;
    gkv_err rc;

    KV_GUARD_INIT(&g);
    KV_GUARD_BEGIN(s, &g, caught);
    rc = fn(s, txn, arg);
    KV_GUARD_END(&g);
    return rc;
caught:
    return kv__guard_caught(&g);
}

gkv_err
kv__guard_txn_begin(gkv_store *s, unsigned flags, MDB_txn **out, int *mrc)
{
    kv_guard g;

    KV_GUARD_INIT(&g);
    KV_GUARD_BEGIN(s, &g, caught);
    *mrc = mdb_txn_begin(s->st_env, NULL, flags, out);
    KV_GUARD_END(&g);
    return GKV_OK;
caught:
    *out = NULL;
    *mrc = 0;
    /* a write's begin took the writer lock first */
    return (flags & MDB_RDONLY) ? kv__guard_caught(&g)
                                : kv__guard_caught_write(&g);
}
