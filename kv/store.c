/* store.c - opening a store, snapshots, write transactions, map growth. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include "kv/kv_int.h"

#define DEFAULT_MAP   (1ull << 30)   /* virtual: the file grows as pages are used */
#define DEFAULT_READERS 512u

/* How long a map resize waits for this process's transactions to end, and
 * a new transaction waits for a resize; tests shorten it. */
unsigned kv__grow_wait_ms = 10000;

gkv_err
kv__from_mdb(int rc)
{
    switch (rc) {
    case MDB_SUCCESS:          return GKV_OK;
    case MDB_NOTFOUND:         return GKV_ENOTFOUND;
    case MDB_MAP_FULL:         return GKV_EMAPFULL;
    case ENOSPC:               return GKV_EMAPFULL;
    case MDB_VERSION_MISMATCH: return GKV_EVERSION;
    /* "not an LMDB file": for a store's data.mdb, a damaged header (the
     * structure check at open says which page) */
    case MDB_INVALID:
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:    return GKV_ECORRUPT;
    case MDB_READERS_FULL:     return GKV_EBUSY;
    case MDB_TXN_FULL:         return KV_ETXNFULL;   /* kv__write: GKV_EIO */
    default:                   return gkv__from_errno(rc);
    }
}

/* ---- txn users and map growth ------------------------------------------ */

/* Bumped in a forked child (pthread_atfork, registered at the first
 * open): a handle opened before the fork is its parent's, whose LMDB
 * environment, locks and write-back copies the child must not use. */
static unsigned fork_gen;

int
kv__forked(const gkv_store *s)
{
    return s != NULL && s->st_fork_gen != fork_gen;
}

gkv_err
kv__fork_refused(gkv_store *s)
{
    return kv__fail(s, GKV_EINVAL, "store '%s' was opened by process %ld, "
                    "before a fork(): a child opens the store itself",
                    s->st_path, (long)s->st_pid);
}

/* Whether thread 't' holds a snapshot (gkv_txn) of s: its entry in
 * st_owners, the threads that began the live ones. Caller holds st_mu. */
static struct kv_owner *
snap_owner(gkv_store *s, pthread_t t)
{
    for (size_t i = 0; i < s->st_nowners; i++)
        if (pthread_equal(s->st_owners[i].t, t))
            return &s->st_owners[i];
    return NULL;
}

/* Counts a snapshot of the thread that began it (ended by any thread);
 * a thread the table has no room for waits for growth as before. */
static void
snap_owner_add(gkv_store *s, pthread_t t, int d)
{
    struct kv_owner *o;

    pthread_mutex_lock(&s->st_mu);
    if ((o = snap_owner(s, t)) != NULL) {
        o->n += d;
        if (o->n == 0)                  /* the last one: drop the entry */
            *o = s->st_owners[--s->st_nowners];
    } else if (d > 0 && s->st_nowners < sizeof s->st_owners /
                                          sizeof s->st_owners[0]) {
        s->st_owners[s->st_nowners++] = (struct kv_owner){t, (unsigned)d};
    }
    pthread_mutex_unlock(&s->st_mu);
}

gkv_err
kv__enter(gkv_store *s)
{
    struct timespec dl;
    gkv_err rc = GKV_OK;

    if (s->st_fork_gen != fork_gen)
        return kv__fork_refused(s);
    gkv__mono_deadline(&dl, kv__grow_wait_ms);   /* st_cv: monotonic */
    pthread_mutex_lock(&s->st_mu);
    /* A grower waits for every txn to end, new ones waiting for it. A
     * thread that holds a snapshot would wait for a growth that waits for
     * its snapshot: it goes in (safe: the resize runs only once no txn is
     * live, under st_mu); the grower gives up at its deadline. */
    while (s->st_growing && rc == GKV_OK &&
           snap_owner(s, pthread_self()) == NULL)
        if (pthread_cond_timedwait(&s->st_cv, &s->st_mu, &dl) == ETIMEDOUT)
            rc = GKV_EBUSY;
    if (rc == GKV_OK)
        s->st_users++;
    pthread_mutex_unlock(&s->st_mu);
    if (rc != GKV_OK)
        return kv__fail(s, rc, "store '%s': map resize in progress",
                        s->st_path);
    return GKV_OK;
}

void
kv__leave(gkv_store *s)
{
    pthread_mutex_lock(&s->st_mu);
    if (--s->st_users == 0)
        pthread_cond_broadcast(&s->st_cv);
    pthread_mutex_unlock(&s->st_mu);
}

/* Frees the reader-table slots of dead processes (a reader killed by
 * SIGKILL keeps its slot, and with it the pages of its snapshot: every
 * later write then takes fresh pages and the file grows without bound).
 * At most once a second unless 'now' is set; LMDB checks each slot's
 * process with a lock probe, so not on every transaction. */
static void
reader_sweep(gkv_store *s, int now)
{
    uint64_t t, last;
    int dead = 0;

    t = gkv__now_ms();
    last = __atomic_load_n(&s->st_swept_ms, __ATOMIC_RELAXED);
    if (!now && (t - last < 1000 ||
                 !__atomic_compare_exchange_n(&s->st_swept_ms, &last, t, 0,
                                              __ATOMIC_RELAXED,
                                              __ATOMIC_RELAXED)))
        return;
    __atomic_store_n(&s->st_swept_ms, t, __ATOMIC_RELAXED);
    (void)mdb_reader_check(s->st_env, &dead);
}

/* Waits until no txn of this process is live, then runs mdb_env_set_mapsize
 * with 'size' (0: adopt the size another process set). */
static gkv_err
map_resize(gkv_store *s, size_t size)
{
    struct timespec dl;
    gkv_err rc = GKV_OK;
    int mrc;

    pthread_mutex_lock(&s->st_mu);
    if (snap_owner(s, pthread_self()) != NULL)
        rc = GKV_EBUSY;             /* our own snapshot: waiting cannot help */
    pthread_mutex_unlock(&s->st_mu);
    if (rc != GKV_OK)
        return rc;
    gkv__mono_deadline(&dl, kv__grow_wait_ms);   /* st_cv: monotonic */
    pthread_mutex_lock(&s->st_mu);
    while (s->st_growing && rc == GKV_OK)
        if (pthread_cond_timedwait(&s->st_cv, &s->st_mu, &dl) == ETIMEDOUT)
            rc = GKV_EBUSY;
    if (rc != GKV_OK) {
        pthread_mutex_unlock(&s->st_mu);
        return rc;
    }
    s->st_growing = 1;
    while (s->st_users > 0 && rc == GKV_OK)
        if (pthread_cond_timedwait(&s->st_cv, &s->st_mu, &dl) == ETIMEDOUT)
            rc = GKV_EBUSY;
    if (rc == GKV_OK && (mrc = mdb_env_set_mapsize(s->st_env, size)) != 0)
        rc = kv__from_mdb(mrc);
    if (rc == GKV_OK)
        kv__guard_map(s);           /* moved, maybe */
    s->st_growing = 0;
    pthread_cond_broadcast(&s->st_cv);
    pthread_mutex_unlock(&s->st_mu);
    return rc;
}

/* The file system of the store's data file: by its descriptor, so that a
 * relative store path and a chdir() since the open do not matter. */
static int
store_statvfs(const gkv_store *s, struct statvfs *vf)
{
    mdb_filehandle_t fd;

    if (mdb_env_get_fd(s->st_env, &fd) == 0)
        return fstatvfs(fd, vf);
    return statvfs(s->st_path, vf);
}

uint64_t
kv__room_bound(const gkv_store *s)
{
    struct statvfs vf;
    struct stat st;
    mdb_filehandle_t fd;
    uint64_t room, size = 0;

    if (store_statvfs(s, &vf) != 0)
        return UINT64_MAX;
    room = (uint64_t)vf.f_bavail * vf.f_frsize;
    if (mdb_env_get_fd(s->st_env, &fd) == 0 && fstat(fd, &st) == 0)
        size = (uint64_t)st.st_size;
    return room > UINT64_MAX - size ? UINT64_MAX : room + size;
}

/* Where the pages of ei's newest commit end, in bytes. */
static uint64_t
pages_end(const gkv_store *s, const MDB_envinfo *ei)
{
    return (uint64_t)(ei->me_last_pgno + 1) * s->st_psize;
}

/* Grows the map after MDB_MAP_FULL: doubles it (at least +64 MiB) while the
 * filesystem has room for the pages the new size could hold. */
static gkv_err
map_grow(gkv_store *s)
{
    MDB_envinfo ei;
    struct statvfs vf;
    uint64_t used, want, room;
    gkv_err rc;

    /* a dead reader's pinned pages are reused by the next write; the map
     * still grows now (this write needs room) but not again for them */
    reader_sweep(s, 1);
    mdb_env_info(s->st_env, &ei);
    used = pages_end(s, &ei);
    want = ei.me_mapsize * 2;
    if (want < ei.me_mapsize + (64ull << 20))
        want = ei.me_mapsize + (64ull << 20);
    if (store_statvfs(s, &vf) == 0) {
        room = (uint64_t)vf.f_bavail * vf.f_frsize;
        /* the file can reach used + room bytes at most; keep 1 % spare */
        if (want > used + room - room / 100)
            want = used + room - room / 100;
    }
    want -= want % s->st_psize;
    if (want <= ei.me_mapsize)
        return kv__fail(s, GKV_EMAPFULL, "store '%s' is full (%llu MiB) and the "
                        "disk has no room to grow it", s->st_path,
                        (unsigned long long)(ei.me_mapsize >> 20));
    if ((rc = map_resize(s, (size_t)want)) == GKV_EBUSY)
        return kv__fail(s, GKV_EMAPFULL, "store '%s' is full (%llu MiB): could "
                        "not grow it while read snapshots stay open in this "
                        "process", s->st_path,
                        (unsigned long long)(ei.me_mapsize >> 20));
    return rc;
}

/* How far the newest header page's last page may reach past the end of
 * a sound data.mdb: a commit leaves pages it allocated and freed again at
 * the end unwritten (LMDB's own copy stops at the file's end), gkv's
 * slice_poke 8 MiB at most. A file shorter by more was cut short. */
#define KV_TAIL_SLACK (64ull << 20)

/* Whether a data.mdb of 'size' bytes ends more than KV_TAIL_SLACK before
 * the last page of ei's newest commit: cut short. */
static int
cut_past_slack(const gkv_store *s, uint64_t size, const MDB_envinfo *ei)
{
    return size + KV_TAIL_SLACK < pages_end(s, ei);
}

/* Adopts a map another process grew. The caller holds one use; step out
 * while resizing, then take it back unconditionally so the caller's
 * kv__leave() stays balanced. */
static gkv_err
adopt_map(gkv_store *s)
{
    mdb_filehandle_t fd;
    MDB_envinfo ei;
    struct stat st;
    gkv_err rc;

    /* LMDB maps as far as the newest header page's last page says: one
     * changed under this handle (a stray write) would make it map
     * petabytes, fail, and leave the environment without a map. Check
     * the header pages, and the last page against the file (which may
     * end up to KV_TAIL_SLACK before it), first, as the open does */
    if (mdb_env_get_fd(s->st_env, &fd) == 0) {
        if ((rc = kv__walk_meta(s->st_path, fd)) != GKV_OK) {
            char msg[640];

            snprintf(msg, sizeof msg, "%s", gkv_store_errmsg(NULL));
            kv__damaged(s);
            return kv__fail(s, rc, "%s (changed while open); this handle "
                            "refuses writes until the store is repaired and "
                            "reopened", msg);
        }
        if (mdb_env_info(s->st_env, &ei) == 0 && fstat(fd, &st) == 0 &&
            cut_past_slack(s, (uint64_t)st.st_size, &ei)) {
            kv__damaged(s);
            return kv__fail(s, GKV_ECORRUPT, "store '%s' is damaged: its "
                            "header says its pages reach %llu bytes, but "
                            "data.mdb is %llu (changed while open); this "
                            "handle refuses writes until the store is "
                            "repaired and reopened", s->st_path,
                            (unsigned long long)pages_end(s, &ei),
                            (unsigned long long)st.st_size);
        }
    }
    kv__leave(s);
    rc = map_resize(s, 0);
    pthread_mutex_lock(&s->st_mu);
    s->st_users++;
    pthread_mutex_unlock(&s->st_mu);
    if (rc != GKV_OK)
        return kv__fail(s, rc, "store '%s': cannot adopt the map size "
                        "another process set", s->st_path);
    return GKV_OK;
}

/* Whether a fresh read snapshot is older than the newest meta page.
 * LMDB 0.9 writes a commit's meta page before it publishes the new txn id
 * to other processes' snapshots; a writer killed between the two leaves
 * every later snapshot one commit behind the disk until the next write
 * (the commit shows up "late"). A write txn brings the published id up to
 * date. A read-only handle cannot write, and may lag so until a writer
 * comes. */
static int
snapshot_lags(gkv_store *s, MDB_txn *txn)
{
    MDB_envinfo ei;

    return !(s->st_flags & GKV_RDONLY) && mdb_env_info(s->st_env, &ei) == 0 &&
           ei.me_last_txnid > mdb_txn_id(txn);
}

void
kv__damaged(gkv_store *s)
{
    __atomic_store_n(&s->st_damaged, 1, __ATOMIC_RELEASE);
}

/* data.mdb's size against the largest this handle has seen: LMDB never
 * makes the file shorter, so a shorter one was cut short under this
 * process, and a read of a missing page would fault (SIGBUS). The request
 * fails instead, and the handle writes no more. (Not against the newest
 * meta page's last page: a commit leaves the pages it allocated and freed
 * again at the end unwritten, so a sound file may end before it.) */
static gkv_err
size_check(gkv_store *s, uint64_t *mtime, uint64_t *size)
{
    mdb_filehandle_t fd;
    struct stat st;
    /* read before the fstat: a size another thread saw after ours was
     * taken may be larger than ours, and no sign of a cut */
    uint64_t seen = __atomic_load_n(&s->st_fsize, __ATOMIC_ACQUIRE), cur;

    *mtime = *size = 0;
    if (mdb_env_get_fd(s->st_env, &fd) != 0 || fstat(fd, &st) != 0)
        return GKV_OK;
    *mtime = kv__mtime_ns(&st);
    *size = (uint64_t)st.st_size;
    if ((uint64_t)st.st_size >= seen) {
        cur = seen;                 /* raise it to ours, if still larger */
        while ((uint64_t)st.st_size > cur &&
               !__atomic_compare_exchange_n(&s->st_fsize, &cur,
                                            (uint64_t)st.st_size, 0,
                                            __ATOMIC_RELEASE,
                                            __ATOMIC_ACQUIRE))
            ;
        return GKV_OK;
    }
    kv__damaged(s);
    return kv__fail(s, GKV_ECORRUPT, "store '%s' is damaged: its data.mdb "
                    "is now %llu bytes, but was %llu (cut short while open); "
                    "this handle refuses writes until the store is repaired "
                    "and reopened", s->st_path, (unsigned long long)st.st_size,
                    (unsigned long long)seen);
}

gkv_err
kv__txn_begin(gkv_store *s, int rdonly, MDB_txn **out)
{
    uint64_t mtime, size, seq;
    int mrc = 0, repaired = 0;
    gkv_err rc;

    *out = NULL;
    if (!rdonly && __atomic_load_n(&s->st_damaged, __ATOMIC_ACQUIRE))
        return kv__fail(s, GKV_ECORRUPT, "store '%s' is damaged (found so "
                        "while open): writes are refused until it is repaired "
                        "and reopened", s->st_path);
    /* first: LMDB's begin reads the header pages (a file cut short would
     * fault there, and a write's begin takes the writer lock first) */
    seq = __atomic_load_n(&s->st_gseq, __ATOMIC_ACQUIRE);  /* before */
    if ((rc = size_check(s, &mtime, &size)) != GKV_OK)
        return rc;
    if (!rdonly)
        reader_sweep(s, 0);
    for (int attempt = 0; attempt < 8; attempt++) {
        /* guarded: it reads the header pages */
        if (!(s->st_flags & GKV_GUARD))
            mrc = mdb_txn_begin(s->st_env, NULL, rdonly ? MDB_RDONLY : 0,
                                out);
        else if ((rc = kv__guard_txn_begin(s, rdonly ? MDB_RDONLY : 0, out,
                                           &mrc)) != GKV_OK)
            return rc;
        /* not on a handle found damaged: the writer lock may be held by
         * this process's unended write (st_wheld) */
        if (mrc == 0 && rdonly && !repaired &&
            !__atomic_load_n(&s->st_damaged, __ATOMIC_ACQUIRE) &&
            snapshot_lags(s, *out)) {
            MDB_txn *w;

            mdb_txn_abort(*out);
            *out = NULL;
            repaired = 1;
            if ((mrc = mdb_txn_begin(s->st_env, NULL, 0, &w)) == 0) {
                mdb_txn_abort(w);
                continue;
            }
        }
        if (mrc != MDB_MAP_RESIZED)
            break;
        *out = NULL;
        if ((rc = adopt_map(s)) != GKV_OK)
            return rc;
    }
    if (mrc != 0) {
        *out = NULL;
        return kv__fail(s, kv__from_mdb(mrc), "store '%s': cannot begin a "
                        "transaction: %s", s->st_path, mdb_strerror(mrc));
    }
    if ((rc = kv__guard_check(s, *out, !rdonly, mtime, size, seq)) !=
        GKV_OK) {
        mdb_txn_abort(*out);
        *out = NULL;
        return rc;
    }
    return GKV_OK;
}

/* Whether the file system holding the store has (next to) no room left:
 * under 1 MiB for an unprivileged writer. */
static int
disk_full(const gkv_store *s)
{
    struct statvfs vf;

    return store_statvfs(s, &vf) == 0 &&
           (uint64_t)vf.f_bavail * vf.f_frsize < (1u << 20);
}

/* Puts KV_TXN_KEY: this transaction's number. 0 or an LMDB error. */
static int
txn_stamp(MDB_txn *txn)
{
    uint64_t id = (uint64_t)mdb_txn_id(txn);
    MDB_val k = {sizeof KV_TXN_KEY - 1, KV_TXN_KEY}, d = {8, &id};
    MDB_dbi main;
    int mrc = mdb_dbi_open(txn, NULL, 0, &main);

    return mrc != 0 ? mrc : mdb_put(txn, main, &k, &d, 0);
}

/* mdb_txn_commit of write transaction txn (freed either way) under guard
 * g, which it unsets after; mdb_txn_commit's result. Readers meanwhile see
 * the file changed before the commit's header (kv__guard_check): the
 * state after the commit is recorded (kv__guard_committed) before they
 * stop skipping. */
static int
commit_guarded(gkv_store *s, MDB_txn *txn, kv_guard *g)
{
    uint64_t id = (uint64_t)mdb_txn_id(txn);
    int mrc;

    __atomic_add_fetch(&s->st_gcommitting, 1, __ATOMIC_ACQ_REL);
    mrc = mdb_txn_commit(txn);
    KV_GUARD_END(g);
    if (mrc == 0)
        kv__guard_committed(s, id);
    __atomic_sub_fetch(&s->st_gcommitting, 1, __ATOMIC_ACQ_REL);
    return mrc;
}

/* Commits a transaction that rewrites one meta value unchanged. LMDB does
 * not reuse the pages the last commit freed (a torn next commit must find
 * that one's tree whole), so on a full disk a write right after a delete
 * fails although the delete freed room; one more commit makes that room
 * usable. 0 when it committed. */
static int
touch_commit(gkv_store *s)
{
    MDB_val k = {8, "next_tid"}, d;
    MDB_txn *txn = NULL;
    kv_guard g;
    uint32_t v;
    int mrc;

    KV_GUARD_INIT(&g);
    if (kv__enter(s) != GKV_OK)
        return -1;
    if (kv__txn_begin(s, 0, &txn) != GKV_OK) {
        kv__leave(s);
        return -1;
    }
    KV_GUARD_BEGIN(s, &g, caught);
    if ((mrc = mdb_get(txn, s->st_meta, &k, &d)) == 0 && d.mv_size == 4) {
        memcpy(&v, d.mv_data, 4);
        d.mv_data = &v;
        mrc = mdb_put(txn, s->st_meta, &k, &d, 0);
    } else if (mrc == 0) {
        mrc = -1;
    }
    if (mrc == 0 && (mrc = txn_stamp(txn)) == 0) {
        mrc = commit_guarded(s, txn, &g);
    } else {
        KV_GUARD_END(&g);
        mdb_txn_abort(txn);
    }
    kv__leave(s);
    return mrc;
caught:
    /* its message stays on s; txn is left unended (kv__guard_caught_write) */
    (void)kv__guard_caught_write(&g);
    kv__leave(s);
    return -1;
}

static gkv_err
write_loop(gkv_store *s, kv_write_fn fn, void *arg)
{
    gkv_err rc;
    volatile int touched = 0;       /* volatile: write_loop has a guard */

    if (s->st_flags & GKV_RDONLY)
        return kv__fail(s, GKV_ERDONLY, "store '%s' is open read-only",
                        s->st_path);
    for (int attempt = 0;; attempt++) {
        MDB_txn *txn = NULL;
        int mrc;

        if ((rc = kv__enter(s)) != GKV_OK)
            return rc;
        if ((rc = kv__txn_begin(s, 0, &txn)) == GKV_OK) {
            kv_guard g;

            KV_GUARD_INIT(&g);
            /* fn takes no lock it holds while it reads the map (the
             * write-back flush copies out of a mirror under st_wb_copy_mu,
             * into a page of its own); its callers' locks are released
             * by them after the return */
            KV_GUARD_BEGIN(s, &g, caught);
            rc = fn(s, txn, arg);
            if (rc == GKV_OK && (mrc = txn_stamp(txn)) != 0)
                rc = kv__fail(s, kv__from_mdb(mrc), "store '%s': %s",
                              s->st_path, mdb_strerror(mrc));
            if (0) {
            caught:
                /* txn is left unended: LMDB may have linked a cursor of
                 * the stack jumped over into it, which mdb_txn_abort
                 * would free (kv__guard_caught_write) */
                rc = kv__guard_caught_write(&g);
                txn = NULL;
            }
            if (rc == GKV_OK) {
                mrc = commit_guarded(s, txn, &g);
                if (mrc == EIO && disk_full(s)) {
                    /* LMDB reports a short write (ENOSPC) as EIO. The
                     * last commit's freed pages become usable after one
                     * more commit: try that once, then this again */
                    kv__leave(s);
                    if (!touched++ && touch_commit(s) == 0) {
                        kv__clear(s);
                        continue;
                    }
                    return kv__fail(s, GKV_EMAPFULL, "store '%s': commit "
                                    "failed: the disk holding it is full",
                                    s->st_path);
                }
                if (mrc != 0)
                    rc = kv__fail(s, kv__from_mdb(mrc), "store '%s': commit "
                                  "failed: %s", s->st_path, mdb_strerror(mrc));
            } else {
                KV_GUARD_END(&g);
                if (txn != NULL)
                    mdb_txn_abort(txn);
            }
        }
        kv__leave(s);
        if (rc == KV_EMAPFULL_FINAL)
            return GKV_EMAPFULL;
        if (rc != GKV_EMAPFULL || attempt >= 40)
            return rc;
        if ((rc = map_grow(s)) != GKV_OK) {
            /* no room to grow: the last commit's freed pages become
             * usable after one more commit; try that once */
            if (touched++ || touch_commit(s) != 0)
                return rc;
        }
        kv__clear(s);
    }
}

/* A write's dirty list may near LMDB's 131,072 entries once its slices
 * have written this many chunk values (one entry each: a page, or an
 * overflow value's run of pages; a push's step writes its chunk and up
 * to 3 state chunks): from then on slice_poke runs between slices, at
 * most once every KV_SLICE_POKE_EVERY values. */
#define KV_SLICE_POKE_START 32768
#define KV_SLICE_POKE_EVERY 16384
/* The value slice_poke reserves (2,049 pages with its header): LMDB
 * spills when its room is at most twice that (about 4,100 pages), and
 * then 16,384 pages. So a slice begins with room for 4,100 pages or
 * more, and spills its own pages a few times per slice at most. */
#define KV_SLICE_POKE_BYTES (8u << 20)

/* The map room a sliced write wants beyond the last page: slice_poke
 * needs a free run of KV_SLICE_POKE_BYTES, maybe at the end. */
#define KV_SLICE_SPARE (4ull * KV_SLICE_POKE_BYTES)

/* Whether ei's map has less than KV_SLICE_SPARE past its last page. */
static int
spare_low(const gkv_store *s, const MDB_envinfo *ei)
{
    return ei->me_mapsize < pages_end(s, ei) + KV_SLICE_SPARE;
}

/* data.mdb's descriptor and fstat, when the file holds both header
 * pages and is no shorter than this handle has seen it: then the map's
 * header pages (mdb_env_info) can be read without a fault. */
static int
file_whole(gkv_store *s, mdb_filehandle_t *fd, struct stat *st)
{
    return mdb_env_get_fd(s->st_env, fd) == 0 && fstat(*fd, st) == 0 &&
           (uint64_t)st->st_size >= 2ull * s->st_psize &&
           (uint64_t)st->st_size >= __atomic_load_n(&s->st_fsize,
                                                    __ATOMIC_ACQUIRE);
}

/* Before a sliced write: a map with less than KV_SLICE_SPARE to spare past
 * its last page is grown, so that the write's pokes are not skipped
 * (slice_poke). Only where it costs no wait (no transaction of this
 * process is live: map_resize would wait for them, and every write would
 * wait again while the map stays small), and only where the file and its
 * header pages look sound, read with fstat and pread first (the map's
 * header pages fault in a file cut short under this handle; a header
 * changed under it must not size the map: the write's own transaction
 * then reports the damage, as before). Where it does not grow, the write
 * goes on as it is. */
static void
slice_pregrow(gkv_store *s)
{
    mdb_filehandle_t fd;
    MDB_envinfo ei;
    struct stat st;
    int idle;

    /* the header pages read with pread only where the map is to grow:
     * not at every write */
    if ((s->st_flags & GKV_RDONLY) ||
        __atomic_load_n(&s->st_damaged, __ATOMIC_ACQUIRE) ||
        !file_whole(s, &fd, &st) || mdb_env_info(s->st_env, &ei) != 0 ||
        !spare_low(s, &ei) || kv__walk_meta(s->st_path, fd) != GKV_OK ||
        cut_past_slack(s, (uint64_t)st.st_size, &ei)) {
        kv__clear(NULL);
        return;
    }
    pthread_mutex_lock(&s->st_mu);
    idle = s->st_users == 0 && !s->st_growing;
    pthread_mutex_unlock(&s->st_mu);
    if (idle)
        (void)map_grow(s);
    kv__clear(s);
}

/* After a sliced write that poked: its run of pages may lie past the end
 * of data.mdb, unwritten. The file is extended over them (fallocate never
 * shrinks a file, whatever another writer did meanwhile), so that such
 * runs do not add up past KV_TAIL_SLACK over many commits (a reader that
 * pins the free list makes each poke take a new run at the end). Where it
 * cannot (no room, no support), the open's walk still tells. */
static void
slice_cover_tail(gkv_store *s)
{
    mdb_filehandle_t fd;
    MDB_envinfo ei;
    struct stat st;
    uint64_t end, size;

    if (!file_whole(s, &fd, &st) || mdb_env_info(s->st_env, &ei) != 0)
        return;
    end = pages_end(s, &ei);
    size = (uint64_t)st.st_size;
    if (size < end && end - size <= KV_TAIL_SLACK)
        (void)posix_fallocate(fd, (off_t)size, (off_t)(end - size));
}

gkv_err
kv__write_sliced(gkv_store *s, kv_write_fn fn, void *arg, size_t *every)
{
    size_t want = every != NULL ? *every : 0;
    gkv_err rc;

    if (want > 0)
        slice_pregrow(s);
    __atomic_store_n(&s->st_poked, 0, __ATOMIC_RELAXED);
    rc = write_loop(s, fn, arg);

    if (rc == KV_ETXNFULL && want > 0) {
        /* a step in the parent found LMDB's dirty list full too
         * (kv__slice_retry): once more, unsliced */
        __atomic_add_fetch(&kv__slice_reruns, 1, __ATOMIC_RELAXED);
        kv__clear(s);
        *every = 0;
        rc = write_loop(s, fn, arg);
        *every = want;
    }
    if (rc == GKV_OK && __atomic_load_n(&s->st_poked, __ATOMIC_RELAXED))
        slice_cover_tail(s);
    return rc == KV_ETXNFULL ? GKV_EIO : rc;   /* as before slices */
}

gkv_err
kv__write(gkv_store *s, kv_write_fn fn, void *arg)
{
    return kv__write_sliced(s, fn, arg, NULL);
}

struct named_arg {
    const char *n1, *n2;
    kv_write_fn fn;
    void *arg;
};

static gkv_err
named_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    struct named_arg *a = arg;
    gkv_err rc;

    if ((a->n1 != NULL && (rc = kv__wb_foreign(s, a->n1)) != GKV_OK) ||
        (a->n2 != NULL && (rc = kv__wb_foreign(s, a->n2)) != GKV_OK))
        return rc;
    return a->fn(s, txn, a->arg);
}

gkv_err
kv__write_named_sliced(gkv_store *s, const char *n1, const char *n2,
                       kv_write_fn fn, void *arg, size_t *every)
{
    struct named_arg a = {n1, n2, fn, arg};

    return kv__write_sliced(s, named_fn, &a, every);
}

gkv_err
kv__write_named(gkv_store *s, const char *n1, const char *n2, kv_write_fn fn,
                void *arg)
{
    return kv__write_named_sliced(s, n1, n2, fn, arg, NULL);
}

/* ---- a write in slices (nested transactions) ---------------------------- */

/* Makes sl->txn the next slice (nested: a transaction in sl->parent) or
 * the parent itself, with a cursor on st_data. */
static gkv_err
slice_open(kv_slice *sl, int nested)
{
    gkv_store *s = sl->s;
    int mrc;

    sl->txn = sl->parent;
    sl->cur = NULL;
    sl->n = sl->run = 0;
    if (nested && (mrc = mdb_txn_begin(s->st_env, sl->parent, 0, &sl->txn)) != 0) {
        sl->txn = NULL;
        return kv__fail(s, kv__from_mdb(mrc), "store '%s': cannot begin a "
                        "nested transaction: %s", s->st_path, mdb_strerror(mrc));
    }
    if ((mrc = mdb_cursor_open(sl->txn, s->st_data, &sl->cur)) != 0) {
        sl->cur = NULL;
        return kv__fail(s, kv__from_mdb(mrc), "store '%s': %s", s->st_path,
                        mdb_strerror(mrc));
    }
    return GKV_OK;
}

gkv_err
kv__slice_begin(gkv_store *s, MDB_txn *parent, size_t every, kv_slice *sl)
{
    sl->s = s;
    sl->parent = parent;
    sl->every = every;
    sl->mark = 0;
    sl->in_parent = 0;
    sl->total = sl->poked = 0;
    return slice_open(sl, every > 0);
}

/* Makes the parent spill part of its dirty list when its room is low.
 * LMDB spills only pages of the transaction that needs room, and a slice
 * begins with the room its parent has left: once the parent is nearly
 * full, every slice spilled its own few pages again and again (each time
 * sorting its spill list), and the room it left to the next slice only
 * shrank. A flush of 1.5-2 GB of one-page chunks took 15-32 s, most of it
 * in LMDB's mdb_midl_sort. A put checks the room before it writes
 * anything, against an estimate that grows with the value's size, and
 * spills at least 16,384 pages when the room is below it: so a put of a
 * large reserved value in the parent, deleted at once, leaves the next
 * slice room, and changes nothing in the store (the key, one byte, is no
 * key of a tensor). No API of LMDB says how full the list is or spills.
 * What it costs: the put and the delete, and 2,049 contiguous pages: from
 * the free list when it has such a run, else at the end of the file. When
 * the transaction has loaded LMDB's free list (it took a page from it),
 * the run goes back to it at once and is never written: the file may then
 * end before its last page (gkv_store_open and adopt_map allow
 * KV_TAIL_SLACK); otherwise LMDB writes the freed run at the commit (8
 * MiB, zeroed here so that no stale memory reaches the file) and lists
 * it as free. The poke is skipped where the map has not 4 runs to spare
 * (KV_SLICE_SPARE), so that it never makes a write fail for room;
 * kv__write_sliced grows such a map before the write begins. */
static gkv_err
slice_poke(kv_slice *sl)
{
    unsigned char kz = 0;
    MDB_val k = {1, &kz}, d = {KV_SLICE_POKE_BYTES, NULL};
    MDB_envinfo ei;
    MDB_cursor *c;
    int mrc;

    if (mdb_env_info(sl->s->st_env, &ei) != 0 || spare_low(sl->s, &ei))
        return GKV_OK;
    if ((mrc = mdb_cursor_open(sl->parent, sl->s->st_data, &c)) == 0) {
        if ((mrc = mdb_cursor_put(c, &k, &d, MDB_RESERVE)) == 0) {
            memset(d.mv_data, 0, d.mv_size);
            mrc = mdb_cursor_del(c, 0);
            __atomic_store_n(&sl->s->st_poked, 1, __ATOMIC_RELAXED);
            __atomic_add_fetch(&kv__slice_pokes, 1, __ATOMIC_RELAXED);
        }
        mdb_cursor_close(c);
    }
    if (mrc != 0)
        return kv__fail(sl->s, kv__from_mdb(mrc), "store '%s': %s",
                        sl->s->st_path, mdb_strerror(mrc));
    return GKV_OK;
}

size_t kv__slice_full_at, kv__slice_full_again;
unsigned long kv__slice_retries, kv__slice_reruns, kv__slice_pokes;
size_t kv__slice_poke_start = KV_SLICE_POKE_START;
size_t kv__slice_poke_every = KV_SLICE_POKE_EVERY;

gkv_err
kv__slice_step(kv_slice *sl, size_t next, size_t values)
{
    gkv_err rc;

    if (sl->every > 0 && kv__slice_full_at > 0 && --kv__slice_full_at == 0) {
        kv__slice_full_at = kv__slice_full_again;
        kv__slice_full_again = 0;
        return kv__fail(sl->s, KV_ETXNFULL, "store '%s': %s (test)",
                        sl->s->st_path, mdb_strerror(MDB_TXN_FULL));
    }
    if (sl->every == 0)
        return GKV_OK;
    sl->run += values;
    if (sl->in_parent > 0 ? --sl->in_parent > 0
                          : (++sl->n, sl->run < sl->every))
        return GKV_OK;
    /* the slice is whole, or the steps kv__slice_retry ran in the parent
     * are done: the next slice */
    if ((rc = kv__slice_end(sl, GKV_OK)) != GKV_OK)
        return rc;
    sl->total += sl->run;
    if (sl->total >= kv__slice_poke_start &&
        sl->total - sl->poked >= kv__slice_poke_every) {
        if ((rc = slice_poke(sl)) != GKV_OK)
            return rc;
        sl->poked = sl->total;
    }
    sl->mark = next;
    return slice_open(sl, 1);
}

gkv_err
kv__slice_retry(kv_slice *sl, gkv_err rc, size_t *pos)
{
    if (rc != KV_ETXNFULL || sl->every == 0 || sl->txn == NULL ||
        sl->txn == sl->parent)
        return rc;
    /* the slice's steps again, in the parent: it spills as it needs, as
     * the slice could not (it needed the room they took, so the parent
     * runs out of room, and spills, within as many steps) */
    kv__slice_end(sl, rc);
    sl->in_parent = sl->n + 1;
    if ((rc = slice_open(sl, 0)) != GKV_OK)
        return rc;
    __atomic_add_fetch(&kv__slice_retries, 1, __ATOMIC_RELAXED);
    kv__clear(sl->s);
    *pos = sl->mark;
    return GKV_OK;
}

gkv_err
kv__slice_end(kv_slice *sl, gkv_err rc)
{
    int mrc;

    if (sl->cur != NULL)
        mdb_cursor_close(sl->cur);
    sl->cur = NULL;
    if (sl->txn == NULL || sl->txn == sl->parent)
        return rc;
    if (rc != GKV_OK)
        mdb_txn_abort(sl->txn);
    else if ((mrc = mdb_txn_commit(sl->txn)) != 0)   /* frees it either way */
        rc = kv__fail(sl->s, kv__from_mdb(mrc), "store '%s': cannot commit a "
                      "nested transaction: %s", sl->s->st_path, mdb_strerror(mrc));
    sl->txn = NULL;
    return rc;
}

gkv_err
kv__writer_barrier(gkv_store *s)
{
    MDB_txn *txn = NULL;
    gkv_err rc;

    if ((rc = kv__enter(s)) != GKV_OK)
        return rc;
    if ((rc = kv__txn_begin(s, 0, &txn)) == GKV_OK)
        mdb_txn_abort(txn);
    kv__leave(s);
    return rc;
}

/* ---- snapshots ------------------------------------------------------- */

gkv_err
kv__snap_begin(gkv_store *s, gkv_txn *tx, kv_snap *sn)
{
    gkv_err rc;

    sn->s = s;
    if (tx != NULL) {
        if (tx->tx_store != s)
            return kv__fail(s, GKV_EINVAL, "transaction belongs to another store");
        sn->txn = tx->tx_txn;
        sn->own = 0;
        return kv__guard_held(tx);
    }
    sn->own = 1;
    if ((rc = kv__enter(s)) != GKV_OK)
        return rc;
    if ((rc = kv__txn_begin(s, 1, &sn->txn)) != GKV_OK)
        kv__leave(s);
    return rc;
}

void
kv__snap_end(kv_snap *sn)
{
    if (sn->own && sn->txn != NULL) {
        mdb_txn_abort(sn->txn);
        kv__leave(sn->s);
    }
    sn->txn = NULL;
}

gkv_err
gkv_txn_begin(gkv_store *s, gkv_txn **out)
{
    gkv_txn *tx;
    gkv_err rc;

    *out = NULL;
    kv__clear(s);
    if ((tx = gkv__calloc(1, sizeof *tx)) == NULL)
        return kv__fail(s, GKV_ENOMEM, "out of memory for a transaction");
    tx->tx_store = s;
    if ((rc = kv__enter(s)) != GKV_OK) {
        gkv__free(tx);
        return rc;
    }
    if ((rc = kv__txn_begin(s, 1, &tx->tx_txn)) != GKV_OK) {
        kv__leave(s);
        gkv__free(tx);
        return rc;
    }
    tx->tx_owner = pthread_self();
    snap_owner_add(s, tx->tx_owner, 1);
    tx->tx_held = 1;
    /* a newer commit its begin took without recording it (one that
     * landed between the begin's fstat and LMDB's begin): recorded now,
     * so that a change after it is not taken for that commit */
    if ((rc = kv__guard_held(tx)) != GKV_OK) {
        gkv_txn_end(tx);
        return rc;
    }
    *out = tx;
    return GKV_OK;
}

void
gkv_txn_end(gkv_txn *tx)
{
    if (tx == NULL)
        return;
    /* the count of the thread that began it, whichever ends it */
    snap_owner_add(tx->tx_store, tx->tx_owner, -1);
    if (tx->tx_store->st_fork_gen == fork_gen)
        mdb_txn_abort(tx->tx_txn);
    kv__leave(tx->tx_store);
    gkv__free(tx);
}

/* ---- open and close ---------------------------------------------------- */

/* ---- one handle per store per process ------------------------------
 * LMDB's locks belong to the process, not to the environment: a second
 * environment on the same directory in one process finds the lock file
 * "unused", resets the reader table and so lets writers reuse the pages
 * the first handle's snapshots still read; closing either drops the
 * other's locks. So a process holds one gkv_store per directory (it is
 * thread-safe: share it), and a second open is refused. The list is keyed
 * by the directory's device and inode, so other paths to it count too. */
static pthread_mutex_t open_mu = PTHREAD_MUTEX_INITIALIZER;
static gkv_store *open_list;
static pthread_once_t open_once = PTHREAD_ONCE_INIT;

/* fork() while another thread holds open_mu would leave it locked in the
 * child for good: hold it across the fork, release it on both sides */
static void open_fork_prepare(void) { pthread_mutex_lock(&open_mu); }
static void open_fork_after(void) { pthread_mutex_unlock(&open_mu); }
static void open_fork_child(void) { fork_gen++; pthread_mutex_unlock(&open_mu); }

static void
open_once_init(void)
{
    (void)pthread_atfork(open_fork_prepare, open_fork_after, open_fork_child);
}

void
kv__open_list_hold(int hold)
{
    pthread_once(&open_once, open_once_init);
    if (hold)
        pthread_mutex_lock(&open_mu);
    else
        pthread_mutex_unlock(&open_mu);
}

/* Puts s (st_dev, st_ino set) on the list; GKV_EBUSY when its directory is
 * there already. */
static gkv_err
open_list_add(gkv_store *s, const char *path)
{
    char other[4096];
    gkv_store *o;
    int held = 0;

    s->st_pid = getpid();
    pthread_once(&open_once, open_once_init);
    pthread_mutex_lock(&open_mu);
    s->st_fork_gen = fork_gen;
    /* a handle inherited across fork() is the parent's, not this
     * process's: LMDB's locks were not inherited with it */
    for (o = open_list; o != NULL; o = o->st_open_next)
        if (o->st_dev == s->st_dev && o->st_ino == s->st_ino &&
            o->st_pid == s->st_pid)
            break;
    if (o == NULL) {
        s->st_open_next = open_list;
        open_list = s;
        s->st_listed = 1;
    } else {                        /* o may be closed once we unlock */
        snprintf(other, sizeof other, "%s", o->st_path);
        held = __atomic_load_n(&o->st_wheld, __ATOMIC_ACQUIRE);
    }
    pthread_mutex_unlock(&open_mu);
    if (held)
        return kv__fail(NULL, GKV_ECORRUPT, "store '%s' is damaged: a fault "
                        "inside a write of this process's handle (as '%s') "
                        "left it holding the store's writer lock until it "
                        "exits; open the store in a new process once it is "
                        "repaired", path, other);
    if (o != NULL)
        return kv__fail(NULL, GKV_EBUSY, "store '%s' is open already in this "
                        "process (as '%s'): LMDB allows one handle per store "
                        "and process; share that one (it is thread-safe)",
                        path, other);
    return GKV_OK;
}

static void
open_list_remove(gkv_store *s)
{
    pthread_mutex_lock(&open_mu);
    for (gkv_store **pp = &open_list; *pp != NULL; pp = &(*pp)->st_open_next)
        if (*pp == s) {
            *pp = s->st_open_next;
            break;
        }
    s->st_listed = 0;
    pthread_mutex_unlock(&open_mu);
}

static void
store_destroy(gkv_store *s)
{
    struct handler *h, *next;

    if (s == NULL)
        return;
    if (s->st_fork_gen != fork_gen) {
        /* the parent's handle, closed in a forked child: its flusher
         * thread is not here, its write-back copies are as old as the
         * fork (writing them would undo the parent's newer commits), and
         * mdb_env_close would clear the parent's reader slots (they carry
         * its pid). The copies and the rest of the memory go; the
         * environment's map and descriptors stay until the child exits. */
        kv__wb_discard(s);
        /* st_wbo_fd stays open: closing it would drop the write-back lock
         * of a handle the child opened itself (fcntl drops all of a
         * process's locks on a file at any close of it) */
        if (s->st_listed)
            open_list_remove(s);
        for (h = s->st_handlers; h != NULL; h = next) {
            next = h->next;
            gkv__free(h);
        }
        if (s->st_zero != NULL)
            munmap(s->st_zero, KV_ZERO_LEN);
        gkv__free(s->st_path);
        gkv__free(s);
        return;
    }
    kv__wb_close(s);   /* flushes write-back tensors */
    kv__wb_own_close(s);
    if (__atomic_load_n(&s->st_wheld, __ATOMIC_ACQUIRE)) {
        /* a write transaction left unended (st_wheld): the environment,
         * its map and the writer lock stay until the process exits, and
         * the handle stays listed, so that a reopen here is refused
         * (open_list_add) rather than wait for that lock forever */
        if (s->st_gfd >= 0)
            close(s->st_gfd);
        s->st_gfd = -1;
        return;
    }
    if (s->st_env != NULL)
        mdb_env_close(s->st_env);
    /* only once the environment is closed may another handle open it */
    if (s->st_listed)
        open_list_remove(s);
    for (h = s->st_handlers; h != NULL; h = next) {
        next = h->next;
        gkv__free(h);
    }
    if (s->st_gfd >= 0)
        close(s->st_gfd);
    pthread_mutex_destroy(&s->st_gmu);
    pthread_cond_destroy(&s->st_cv);
    pthread_mutex_destroy(&s->st_mu);
    pthread_rwlock_destroy(&s->st_wb_lock);
    pthread_mutex_destroy(&s->st_wb_flush_mu);
    pthread_mutex_destroy(&s->st_wb_copy_mu);
    pthread_mutex_destroy(&s->st_wb_mu);
    pthread_cond_destroy(&s->st_wb_cv);
    if (s->st_zero != NULL)
        munmap(s->st_zero, KV_ZERO_LEN);
    gkv__free(s->st_path);
    gkv__free(s);
}

static gkv_err
meta_get_u32(MDB_txn *txn, MDB_dbi dbi, const char *key, uint32_t *v)
{
    MDB_val k = {strlen(key), (void *)key}, d;
    int mrc = mdb_get(txn, dbi, &k, &d);

    if (mrc != 0)
        return kv__from_mdb(mrc);
    if (d.mv_size != 4)
        return GKV_ECORRUPT;
    memcpy(v, d.mv_data, 4);
    return GKV_OK;
}

static int
meta_put_u32(MDB_txn *txn, MDB_dbi dbi, const char *key, uint32_t v)
{
    MDB_val k = {strlen(key), (void *)key}, d = {4, &v};
    return mdb_put(txn, dbi, &k, &d, 0);
}

/* Opens the three databases, creating them and the format record in a new
 * store (GKV_CREATE only: an LMDB file without them, such as one a failed
 * create left, or another program's, is "no gkv store" to a plain open,
 * never made into one); checks the format of an existing one. */
static gkv_err
store_init(gkv_store *s)
{
    int rdonly = (s->st_flags & GKV_RDONLY) != 0, mrc;
    int create = (s->st_flags & GKV_CREATE) != 0;
    unsigned cf = create ? MDB_CREATE : 0;
    MDB_txn *txn = NULL;
    uint32_t fmt = 0;
    gkv_err rc;

    mrc = mdb_txn_begin(s->st_env, NULL, rdonly ? MDB_RDONLY : 0, &txn);
    if (mrc == MDB_MAP_RESIZED) {
        /* another process grew the map since ours was set: adopt its size
         * (no other thread can use this handle yet) */
        if ((mrc = mdb_env_set_mapsize(s->st_env, 0)) == 0)
            mrc = mdb_txn_begin(s->st_env, NULL, rdonly ? MDB_RDONLY : 0, &txn);
    }
    if (mrc != 0)
        return kv__fail(s, kv__from_mdb(mrc), "store '%s': %s", s->st_path,
                        mdb_strerror(mrc));
    if ((mrc = mdb_dbi_open(txn, "meta", cf, &s->st_meta)) != 0) {
        rc = mrc == MDB_NOTFOUND
             ? kv__fail(s, GKV_ENOENT, "'%s' holds no gkv store", s->st_path)
             : kv__fail(s, kv__from_mdb(mrc), "store '%s': %s", s->st_path,
                        mdb_strerror(mrc));
        goto out;
    }
    rc = meta_get_u32(txn, s->st_meta, "format", &fmt);
    if (rc == GKV_ENOTFOUND && create) {
        fmt = KV_FORMAT;
        if ((mrc = meta_put_u32(txn, s->st_meta, "format", KV_FORMAT)) != 0 ||
            (mrc = meta_put_u32(txn, s->st_meta, "next_tid", 1)) != 0 ||
            (mrc = txn_stamp(txn)) != 0) {
            rc = kv__fail(s, kv__from_mdb(mrc), "store '%s': cannot initialise: "
                          "%s", s->st_path, mdb_strerror(mrc));
            goto out;
        }
    } else if (rc == GKV_ENOTFOUND) {
        rc = kv__fail(s, GKV_ENOENT, "'%s' holds no gkv store", s->st_path);
        goto out;
    } else if (rc != GKV_OK) {
        rc = kv__fail(s, rc, "store '%s': bad format record", s->st_path);
        goto out;
    }
    if (fmt > KV_FORMAT + 1000u) {
        /* no gkv will write that many formats: a damaged record */
        rc = kv__fail(s, GKV_ECORRUPT, "store '%s' is damaged: its format "
                      "record reads %u", s->st_path, fmt);
        goto out;
    }
    if (fmt > KV_FORMAT) {
        rc = kv__fail(s, GKV_EVERSION, "store '%s' has on-disk format %u; this "
                      "gkv (%s) reads format %u and older", s->st_path, fmt,
                      GKV_VERSION_STRING, KV_FORMAT);
        goto out;
    }
    if ((mrc = mdb_dbi_open(txn, "catalog", cf, &s->st_cat)) != 0 ||
        (mrc = mdb_dbi_open(txn, "data", cf, &s->st_data)) != 0) {
        rc = kv__fail(s, mrc == MDB_NOTFOUND ? GKV_ECORRUPT : kv__from_mdb(mrc),
                      "store '%s': missing database: %s", s->st_path,
                      mdb_strerror(mrc));
        goto out;
    }
    mrc = mdb_txn_commit(txn);
    txn = NULL;
    rc = mrc ? kv__fail(s, kv__from_mdb(mrc), "store '%s': %s", s->st_path,
                        mdb_strerror(mrc)) : GKV_OK;
out:
    if (txn != NULL)
        mdb_txn_abort(txn);
    return rc;
}

/* Makes DIR/lock.mdb when it is missing, with its blocks allocated.
 * LMDB sizes the file with ftruncate and maps it: on a full disk the
 * first touch of a page it could not get is SIGBUS, not an error. The
 * size is what LMDB asks for (a 192-byte header and 64 bytes per reader
 * beyond the first: MDB_txninfo and MDB_reader, padded to cache lines),
 * so it neither truncates the file nor grows its reader table. An
 * existing file is left to LMDB (another process may hold it). */
static gkv_err
lock_prealloc(const char *dir, unsigned readers, mode_t mode)
{
    char p[4096];
    int fd, e;

    if ((size_t)snprintf(p, sizeof p, "%s/lock.mdb", dir) >= sizeof p)
        return GKV_OK;                      /* LMDB will say what is wrong */
    if ((fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode)) < 0)
        return GKV_OK;
    /* a group-shared store's readers must write it: not the umask's say */
    (void)fchmod(fd, mode);
    e = posix_fallocate(fd, 0, (off_t)readers * 64 + 128);
    close(fd);
    if (e == 0 || e == EOPNOTSUPP || e == EINVAL)
        return GKV_OK;
    unlink(p);
    return kv__fail(NULL, kv__from_mdb(e), "cannot open store '%s': no room "
                    "for its lock file: %s", dir, strerror(e));
}

#define OPEN_FLAGS (GKV_CREATE | GKV_RDONLY | GKV_NOSYNC | GKV_SHARE_GROUP | \
                    GKV_NOCHECK | GKV_GUARD)

/* kv__walk_meta of DIR/data.mdb ('data'). A commit writing a header page
 * while it is read can look like damage: a fault is believed when it
 * stays over a few reads. */
static gkv_err
header_check(const char *path, const char *data)
{
    gkv_err rc = GKV_OK;
    int fd;

    if ((fd = open(data, O_RDONLY | O_CLOEXEC)) < 0)
        return GKV_OK;                  /* LMDB will say what is wrong */
    for (int i = 0; i < 4; i++) {
        if ((rc = kv__walk_meta(path, fd)) != GKV_ECORRUPT)
            break;
        usleep(20000);
    }
    close(fd);
    return rc;
}

/* kv__walk of the newest snapshot while no writer can free its pages: a
 * writable handle holds LMDB's writer lock (a write transaction begun and
 * aborted: it reads no page), so the newest meta page stays too; a
 * read-only one pins a snapshot with a read transaction, and a writer in
 * another process may overwrite that snapshot's meta page (two commits):
 * then it tries again, and after 8 tries opens unchecked (a store written
 * so busily by another process is one that process reads whole). The
 * message goes to the NULL handle (a failed open). */
static gkv_err
structure_check(gkv_store *s)
{
    int rdonly = (s->st_flags & GKV_RDONLY) != 0;
    MDB_txn *txn = NULL;
    mdb_filehandle_t fd;
    gkv_err rc = GKV_EBUSY;
    int mrc;

    if (mdb_env_get_fd(s->st_env, &fd) != 0)
        return GKV_OK;
    for (int i = 0; i < 8 && rc == GKV_EBUSY; i++) {
        mrc = mdb_txn_begin(s->st_env, NULL, rdonly ? MDB_RDONLY : 0, &txn);
        if (mrc == MDB_MAP_RESIZED &&
            (mrc = mdb_env_set_mapsize(s->st_env, 0)) == 0)
            mrc = mdb_txn_begin(s->st_env, NULL, rdonly ? MDB_RDONLY : 0,
                                &txn);
        if (mrc != 0)
            return kv__fail(NULL, kv__from_mdb(mrc), "store '%s': %s",
                            s->st_path, mdb_strerror(mrc));
        /* a write transaction's id is the newest commit's plus one */
        rc = kv__walk(NULL, s->st_path, fd, mdb_txn_id(txn) - !rdonly, NULL);
        mdb_txn_abort(txn);
    }
    return rc == GKV_EBUSY ? GKV_OK : rc;
}

gkv_err
gkv_store_open(gkv_store **out, const char *path, unsigned flags,
               const gkv_open_opts *opts)
{
    gkv_store *s = NULL;
    struct stat sb;
    char *data = NULL;
    unsigned ef = MDB_NOTLS | MDB_NORDAHEAD;
    /* private unless GKV_SHARE_GROUP: a store holds a job's data, and
     * its lock file lets whoever writes it stall the store's writers */
    int share = (flags & GKV_SHARE_GROUP) != 0;
    mode_t dmode = share ? 0750 : 0700, fmode = share ? 0640 : 0600;
    mode_t lmode = share ? 0660 : 0600;
    gkv_err rc;
    int mrc, walked = 0;

    *out = NULL;
    kv__clear(NULL);
    if (path == NULL || *path == '\0')
        return kv__fail(NULL, GKV_EINVAL, "empty store path");
    if ((flags & GKV_CREATE) && (flags & GKV_RDONLY))
        return kv__fail(NULL, GKV_EINVAL, "GKV_CREATE and GKV_RDONLY together");
    if (flags & ~OPEN_FLAGS)
        return kv__fail(NULL, GKV_EINVAL, "store '%s': unknown open flags 0x%x",
                        path, flags & ~OPEN_FLAGS);
    if ((s = gkv__calloc(1, sizeof *s)) == NULL)
        return GKV_ENOMEM;
    s->st_wbo_fd = -1;
    s->st_gfd = -1;
    pthread_mutex_init(&s->st_gmu, NULL);
    pthread_mutex_init(&s->st_mu, NULL);
    gkv__cond_init_mono(&s->st_cv);
    pthread_rwlock_init(&s->st_wb_lock, NULL);
    pthread_mutex_init(&s->st_wb_flush_mu, NULL);
    pthread_mutex_init(&s->st_wb_copy_mu, NULL);
    pthread_mutex_init(&s->st_wb_mu, NULL);
    gkv__cond_init_mono(&s->st_wb_cv);
    s->st_flags = flags;
    s->st_zero = mmap(NULL, KV_ZERO_LEN, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
    if (s->st_zero == MAP_FAILED) {
        s->st_zero = NULL;
        rc = GKV_ENOMEM;
        goto fail;
    }
    if ((s->st_path = gkv__strdup(path)) == NULL) {
        rc = GKV_ENOMEM;
        goto fail;
    }
    if (stat(path, &sb) != 0) {
        if (errno != ENOENT || !(flags & GKV_CREATE)) {
            rc = kv__fail(NULL, errno == ENOENT ? GKV_ENOENT : kv__from_mdb(errno),
                          "store '%s': %s", path, strerror(errno));
            goto fail;
        }
        /* another process creating the same store may win the race */
        if (mkdir(path, dmode) != 0 &&
            !(errno == EEXIST && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))) {
            rc = kv__fail(NULL, kv__from_mdb(errno), "cannot create store "
                          "directory '%s': %s", path, strerror(errno));
            goto fail;
        }
    } else if (!S_ISDIR(sb.st_mode)) {
        rc = kv__fail(NULL, GKV_ENOENT, "store '%s' is not a directory", path);
        goto fail;
    }
    if (stat(path, &sb) != 0) {
        rc = kv__fail(NULL, kv__from_mdb(errno), "store '%s': %s", path,
                      strerror(errno));
        goto fail;
    }
    s->st_dev = sb.st_dev;
    s->st_ino = sb.st_ino;
    if ((rc = open_list_add(s, path)) != GKV_OK)
        goto fail;
    if (asprintf(&data, "%s/data.mdb", path) < 0) {
        data = NULL;
        rc = GKV_ENOMEM;
        goto fail;
    }
    if (!(flags & GKV_CREATE) && (stat(data, &sb) != 0 || sb.st_size == 0)) {
        /* an empty data.mdb is what a create that failed early leaves;
         * LMDB would fail on it with EBADF, read-only, and make a lock
         * file in a directory a reader should not change */
        rc = kv__fail(NULL, GKV_ENOENT, "'%s' holds no gkv store (%s)", path,
                      access(data, F_OK) == 0 ? "data.mdb is empty" :
                      "no data.mdb");
        goto fail;
    }
    /* LMDB trusts the header pages: their page size divides, their last
     * page sizes the map */
    if (stat(data, &sb) == 0 && sb.st_size > 0 &&
        (rc = header_check(path, data)) != GKV_OK)
        goto fail;
    if (!(flags & GKV_RDONLY) &&
        (rc = lock_prealloc(path, opts && opts->max_readers ?
                            opts->max_readers : DEFAULT_READERS,
                            lmode)) != GKV_OK)
        goto fail;
    if (flags & GKV_RDONLY)
        ef |= MDB_RDONLY;
    if (flags & GKV_NOSYNC)
        ef |= MDB_NOSYNC;
    if ((mrc = mdb_env_create(&s->st_env)) != 0 ||
        (mrc = mdb_env_set_maxdbs(s->st_env, 4)) != 0 ||
        (mrc = mdb_env_set_maxreaders(s->st_env, opts && opts->max_readers
                                      ? opts->max_readers : DEFAULT_READERS)) != 0 ||
        (mrc = mdb_env_set_mapsize(s->st_env, opts && opts->map_size
                                   ? opts->map_size : DEFAULT_MAP)) != 0 ||
        (mrc = mdb_env_open(s->st_env, path, ef, fmode)) != 0) {
        char lock[4200];
        int lock_ro = (mrc == EACCES || mrc == EROFS || mrc == EPERM) &&
                      (size_t)snprintf(lock, sizeof lock, "%s/lock.mdb",
                                       path) < sizeof lock &&
                      access(lock, W_OK) != 0;

        rc = kv__fail(NULL, kv__from_mdb(mrc), "cannot open store '%s': %s%s",
                      path, mdb_strerror(mrc), mrc == ENOMEM && opts != NULL &&
                      opts->map_size != 0 ? " (is opts.map_size, the most "
                      "address space the store may map, larger than this "
                      "process may reserve?)" : lock_ro ? " (its lock file "
                      "lock.mdb cannot be made or written: LMDB records every "
                      "reader there, so even a read-only open needs it "
                      "writable)" : "");
        goto fail;
    }
    {
        MDB_stat ms;
        mdb_filehandle_t fd;
        mdb_env_stat(s->st_env, &ms);
        s->st_psize = ms.ms_psize;
        /* LMDB opens data.mdb without close-on-exec: a program this
         * process starts would keep the file open */
        if (mdb_env_get_fd(s->st_env, &fd) == 0)
            (void)fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
    }
    reader_sweep(s, 1);             /* slots left by killed readers */
    if ((flags & GKV_GUARD) && (rc = kv__guard_open(s)) != GKV_OK)
        goto fail;
    if (!(flags & GKV_RDONLY)) {
        /* write-back ownership (wbown.c); without it, writes go unchecked
         * as before it */
        char wl[4200];
        if ((size_t)snprintf(wl, sizeof wl, "%s/writeback.lock", path) < sizeof wl &&
            (s->st_wbo_fd = open(wl, O_RDWR | O_CREAT | O_CLOEXEC, fmode)) < 0)
            /* another user's file: read-only still sees the lock */
            s->st_wbo_fd = open(wl, O_RDONLY | O_CLOEXEC);
    }
    {
        /* a file cut short (a partial copy, a disk that filled while
         * copying) would fault (SIGBUS) on the first read of a missing
         * page: refuse it here. But a sound one may end up to
         * KV_TAIL_SLACK before its last page. So a file that ends early
         * by less is walked (kv__walk reads with pread, so a missing page
         * is an error, not a fault), with GKV_NOCHECK too: sound if every
         * page in use is in the file */
        MDB_envinfo ei;
        mdb_filehandle_t fd;
        struct stat fst;

        if (mdb_env_info(s->st_env, &ei) == 0 &&
            mdb_env_get_fd(s->st_env, &fd) == 0 && fstat(fd, &fst) == 0 &&
            (uint64_t)fst.st_size < pages_end(s, &ei)) {
            int cut = cut_past_slack(s, (uint64_t)fst.st_size, &ei);

            rc = cut ? GKV_ECORRUPT : structure_check(s);
            if (rc == GKV_ECORRUPT) {
                char why[520] = "";

                if (!cut)       /* what the walk found missing */
                    snprintf(why, sizeof why, ": %s", gkv_store_errmsg(NULL));
                rc = kv__fail(NULL, GKV_ECORRUPT, "cannot open store '%s': "
                              "its data.mdb is %llu bytes, but its pages "
                              "reach %llu bytes: the file was cut short (a "
                              "partial copy, or a disk that filled while "
                              "copying it)%s", path,
                              (unsigned long long)fst.st_size,
                              (unsigned long long)pages_end(s, &ei), why);
            }
            if (rc != GKV_OK)
                goto fail;
            walked = 1;
        }
    }
    if (!(flags & GKV_NOCHECK) && !walked && (rc = structure_check(s)) != GKV_OK)
        goto fail;
    {
        uint64_t mt, sz;

        (void)size_check(s, &mt, &sz);  /* the size it starts from */
    }
    if ((rc = store_init(s)) != GKV_OK) {
        /* move the message from the store handle to the NULL handle */
        char msg[640];
        snprintf(msg, sizeof msg, "%s", gkv_store_errmsg(s));
        kv__fail(NULL, rc, "%s", msg);
        goto fail;
    }
    free(data);
    *out = s;
    return GKV_OK;
fail:
    free(data);
    store_destroy(s);
    return rc;
}

void
gkv_store_close(gkv_store *s)
{
    store_destroy(s);
}

gkv_err
kv__env_sync(gkv_store *s)
{
    int mrc;

    if (s->st_flags & GKV_RDONLY)
        return GKV_OK;
    if ((mrc = mdb_env_sync(s->st_env, 1)) != 0)
        return kv__fail(s, kv__from_mdb(mrc), "store '%s': sync failed: %s",
                        s->st_path, mdb_strerror(mrc));
    return GKV_OK;
}

gkv_err
gkv_store_sync(gkv_store *s)
{
    kv__clear(s);
    if (s->st_flags & GKV_RDONLY)
        return GKV_OK;
    if (kv__wb_any(s)) {
        gkv_err rc = gkv_writeback_flush(s);
        if (rc != GKV_OK)
            return rc;
    }
    return kv__env_sync(s);
}

const char *
gkv_store_path(const gkv_store *s)
{
    return s->st_path;
}

int
gkv_store_writer_held(const gkv_store *s)
{
    return s != NULL && __atomic_load_n(&s->st_wheld, __ATOMIC_ACQUIRE);
}

/* Touches the pages of [p, p + len): one madvise for large ranges, a read
 * per page for small ones (cheaper than the system call). */
static void
touch(const unsigned char *p, size_t len, size_t psize)
{
    volatile unsigned char sink = 0;
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(psize - 1);

#ifdef MADV_POPULATE_READ
    if (len >= 16 * psize &&
        madvise((void *)a, (size_t)((uintptr_t)p + len - a), MADV_POPULATE_READ) == 0)
        return;
#endif
    for (size_t off = 0; off < len; off += psize)
        sink ^= p[off];
    sink ^= p[len - 1];
    (void)sink;
}

/* Touches every value of the data tree; *cur is the caller's to close. */
static gkv_err
prefault_walk(gkv_store *s, MDB_txn *txn, MDB_cursor **cur)
{
    MDB_val k, d;
    int mrc;

    if ((mrc = mdb_cursor_open(txn, s->st_data, cur)) != 0) {
        *cur = NULL;
        return kv__fail(s, kv__from_mdb(mrc), "store '%s': %s", s->st_path,
                        mdb_strerror(mrc));
    }
    while ((mrc = mdb_cursor_get(*cur, &k, &d, MDB_NEXT)) == 0)
        if (d.mv_size > 0)
            touch(d.mv_data, d.mv_size, s->st_psize);
    if (mrc != MDB_NOTFOUND)
        return kv__fail(s, kv__from_mdb(mrc), "store '%s': %s", s->st_path,
                        mdb_strerror(mrc));
    return GKV_OK;
}

gkv_err
gkv_store_prefault(gkv_store *s)
{
    kv_guard g;
    MDB_cursor *cur = NULL;
    kv_snap sn;
    gkv_err rc;

    /* LMDB does not tell where the map is (me_mapaddr is only set with
     * MDB_FIXEDMAP), so walk every value: this touches the B-tree pages and
     * every chunk's pages, which is what later pulls read. */
    kv__clear(s);
    KV_GUARD_INIT(&g);
    if ((rc = kv__snap_begin(s, NULL, &sn)) != GKV_OK)
        return rc;
    KV_GUARD_BEGIN(s, &g, caught);
    rc = prefault_walk(s, sn.txn, &cur);
out:
    KV_GUARD_END(&g);
    if (cur != NULL)
        mdb_cursor_close(cur);
    kv__snap_end(&sn);
    return rc;
caught:
    rc = kv__guard_caught(&g);
    goto out;
}

/* A range over most of [0, 2^64) times its row bytes, or a few such
 * tensors summed, passes 2^64; a wrapped total would print as a small,
 * plausible and wrong size. */
static uint64_t
mul_sat(uint64_t a, uint64_t b)
{
    return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

static uint64_t
add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* gkv_store_stat_get's reads, under a guard (kv__guarded); *arg is the
 * cursor it leaves open (the caller closes it) and the stat. */
struct stat_arg { gkv_store_stat *st; MDB_cursor *cur; };

static gkv_err
stat_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    struct stat_arg *a = arg;
    gkv_store_stat *st = a->st;
    MDB_stat ms;
    MDB_val k, d;
    int mrc;

    st->format = KV_FORMAT;
    meta_get_u32(txn, s->st_meta, "format", &st->format);
    if (mdb_stat(txn, s->st_data, &ms) == 0)
        st->nchunks = ms.ms_entries;
    /* the free list (database 0): each value counts its page numbers
     * first (an MDB_IDL) */
    if ((mrc = mdb_cursor_open(txn, 0, &a->cur)) == 0) {
        while ((mrc = mdb_cursor_get(a->cur, &k, &d, MDB_NEXT)) == 0)
            if (d.mv_size >= sizeof(size_t)) {
                size_t np;
                memcpy(&np, d.mv_data, sizeof np);
                st->free_bytes += (uint64_t)np * s->st_psize;
            }
        mdb_cursor_close(a->cur);
    }
    a->cur = NULL;
    if (mrc != MDB_NOTFOUND)
        return kv__fail(s, kv__from_mdb(mrc), "store '%s': its free list: "
                        "%s", s->st_path, mdb_strerror(mrc));
    if ((mrc = mdb_cursor_open(txn, s->st_cat, &a->cur)) != 0) {
        a->cur = NULL;
        return kv__fail(s, kv__from_mdb(mrc), "store '%s': %s", s->st_path,
                        mdb_strerror(mrc));
    }
    while ((mrc = mdb_cursor_get(a->cur, &k, &d, MDB_NEXT)) == 0) {
        char name[GKV_NAME_MAX + 1];
        kv_rec r;
        size_t kl = k.mv_size < GKV_NAME_MAX ? k.mv_size : GKV_NAME_MAX;

        memcpy(name, k.mv_data, kl);
        name[kl] = '\0';
        if (kv__rec_get(s, txn, name, &r) != GKV_OK)
            continue;
        if (strchr(name, '#') == NULL)
            st->ntensors++;
        st->data_bytes = add_sat(st->data_bytes,
                                 mul_sat(r.hi - r.lo, r.row_bytes));
    }
    if (mrc != MDB_NOTFOUND)
        return kv__fail(s, kv__from_mdb(mrc), "store '%s': its catalog: %s",
                        s->st_path, mdb_strerror(mrc));
    kv__clear(s);
    return GKV_OK;
}

gkv_err
gkv_store_stat_get(gkv_store *s, gkv_store_stat *st)
{
    struct stat_arg a = {st, NULL};
    MDB_envinfo ei;
    kv_snap sn;
    gkv_err rc;

    kv__clear(s);
    memset(st, 0, sizeof *st);
    if ((rc = kv__snap_begin(s, NULL, &sn)) != GKV_OK)
        return rc;
    mdb_env_info(s->st_env, &ei);
    st->map_size = ei.me_mapsize;
    st->page_size = s->st_psize;
    st->used_bytes = pages_end(s, &ei);
    st->readers = ei.me_numreaders;
    st->max_readers = ei.me_maxreaders;
    rc = kv__guarded(s, sn.txn, stat_fn, &a);
    if (a.cur != NULL)
        mdb_cursor_close(a.cur);
    kv__snap_end(&sn);
    return rc;
}
