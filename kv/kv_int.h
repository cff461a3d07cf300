/* kv_int.h - private declarations shared by the files of kv/. Not
 * installed, and no other layer includes it: graph/, net/ and gpu/ use
 * kv/gkv_kv.h and base/base.h; the tests reach kv/'s internals through
 * kv/kv_test.h. */
#ifndef KV_INT_H
#define KV_INT_H

#include <pthread.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/types.h>
#include <sys/stat.h>
#include "base/base.h"
#include "kv/gkv_kv.h"

/* Allocation (gkv__malloc ...), the monotonic clock and the per-thread
 * error detail are base/base.h's, shared by every layer. */

/* ---- error detail about a store ----------------------------------------- */

/* gkv__fail() and gkv__clear() about store 's' (NULL: a failed open):
 * kv__fail records 'fmt' as this thread's message and returns 'rc', so a
 * call can say: return kv__fail(s, GKV_ERANGE, "tensor '%s': ...", ..);
 * kv__clear(s) is called at the start of each call on 's'. */
static inline const void *kv__about(const gkv_store *s) { return s; }
#define kv__fail(s, rc, ...) gkv__fail(kv__about(s), (rc), __VA_ARGS__)
#define kv__clear(s)         gkv__clear(kv__about(s))

/* ---- the counter-based generator used by initializers ----------------- */

/* A 64-bit hash of (seed, row, col): the same anywhere it is computed. */
uint64_t kv__mix3(uint64_t seed, uint64_t row, uint64_t col);
/* (A uniform double in [0, 1) from one: gkv_gen_unit(), base/gen.h.) */

/* ---- the store and its transactions ----------------------------------- */

#include <lmdb.h>
#include <pthread.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gkv's on-disk records are little-endian; port kv/ encode helpers first"
#endif

#define KV_FORMAT        1u       /* on-disk format version (doc/FORMAT.md) */
#define KV_CHUNK_HDR     16u      /* bytes before the rows of a chunk value */
#define KV_KEY_LEN       12u      /* data key: tid (u32 BE) + chunk (u64 BE) */
#define KV_CHUNK_MAGIC   0x31434b47u  /* "GKC1", last 4 bytes of a chunk header */
#define KV_ZERO_LEN      (64ull << 20) /* read-only zeros: rows of unwritten chunks */
/* A plain record in LMDB's main database (beside the named databases'
 * records): the number of the transaction that last wrote the store, u64
 * little-endian, put by every commit gkv makes. The header pages say
 * which commit is newest by their transaction number alone; a damaged
 * number in the older one makes LMDB read the commit before the last,
 * whose tree is whole, and only this record, written inside that tree,
 * shows that the number lies (kv__walk checks it). */
#define KV_TXN_KEY       "gkv.txn"

struct handler {
    struct handler *next;
    char name[64];
    gkv_push_fn fn;
    void *ctx;
};

struct gkv_store {
    MDB_env *st_env;
    MDB_dbi st_meta, st_cat, st_data;
    unsigned st_flags;            /* GKV_* open flags */
    char *st_path;
    dev_t st_dev;                 /* the directory, in the process's list */
    ino_t st_ino;                 /* of open stores (store.c, open_list) */
    struct gkv_store *st_open_next;
    pid_t st_pid;                 /* the process that opened it */
    unsigned st_fork_gen;         /* store.c's fork count then */
    /* the threads that began live snapshots (gkv_txn), under st_mu: one
     * waiting for a map growth would wait for itself. A fixed table, so
     * that a snapshot allocates nothing more; a thread past it waits as
     * any other. */
    struct kv_owner { pthread_t t; unsigned n; } st_owners[64];
    size_t st_nowners;
    int st_listed;
    size_t st_psize;              /* LMDB page size, bytes */
    /* set (__atomic) once this handle found the store damaged under it:
     * data.mdb cut short, or a verify's structure check failed; writes
     * are refused from then on, until the store is reopened */
    int st_damaged;
    uint64_t st_fsize;            /* data.mdb's largest size seen (__atomic) */
    int st_poked;                 /* the last sliced write ran slice_poke
                                   * (__atomic; a write of another thread
                                   * may clear it early: a missed or extra
                                   * slice_cover_tail does no harm) */
    /* with GKV_GUARD: where the map of data.mdb lies, [lo, hi) (__atomic;
     * guard.c, set at open and at each map resize) */
    uintptr_t st_map_lo, st_map_hi;
    int st_gfd;                   /* with GKV_GUARD: an inotify watch of
                                   * data.mdb (guard.c), or -1 */
    /* with GKV_GUARD, the state of data.mdb last checked (guard.c): its
     * mtime (ns; __atomic, the read path's fast test), size and newest
     * transaction; st_gbad (__atomic) when that state was found damaged,
     * with the walk's message. Under st_gmu but st_gmtime and st_gbad. */
    uint64_t st_gmtime, st_gsize, st_gtxn;
    uint64_t st_gseq;                 /* states recorded: bumped by each */
    int st_gbad;
    int st_gunsure;               /* __atomic: the watch was drained and no
                                   * state recorded since (a walk under
                                   * way, or disturbed: GKV_EBUSY; an own
                                   * commit's record pending, or skipped):
                                   * reads through held snapshots and
                                   * writes take the slow path */
    char st_gbad_msg[640];
    /* counts (__atomic), for the tests and gkv_store_stat: structure
     * walks the guard ran, changes it took for newer commits (no walk),
     * reads it refused from a state known damaged (no walk), faults and
     * LMDB assertions it caught */
    uint64_t st_gwalks, st_gcommits, st_grefused, st_gcaught;
    int st_gcommitting;           /* commits of this handle in flight
                                   * (__atomic; store.c, guard.c) */
    /* with GKV_GUARD (__atomic): a fault was caught inside a write
     * transaction of this handle. That transaction is left as it was, not
     * aborted (LMDB linked cursors on the jumped-over stack into it, and
     * mdb_txn_abort would free them), so this process holds the store's
     * writer lock until it exits (gkv_store_writer_held) */
    int st_wheld;
    pthread_mutex_t st_gmu;       /* one such check at a time */
    /* Map growth needs no live transaction in this process: every txn
     * counts itself in st_users; a grower waits for zero, with st_growing
     * set so no new txn starts meanwhile. */
    pthread_mutex_t st_mu;
    pthread_cond_t st_cv;
    unsigned st_users;
    int st_growing;
    /* CLOCK_MONOTONIC ms of the last sweep of LMDB's reader table for
     * slots of dead processes (reader_sweep in store.c; __atomic
     * builtins: this header is also read by nvcc's C++) */
    uint64_t st_swept_ms;
    /* write-back ownership across processes (wbown.c): the descriptor of
     * STORE/writeback.lock (-1 until needed) and whether this process
     * holds its lock */
    int st_wbo_fd;
    int st_wbo_held;
    struct handler *st_handlers;  /* under st_mu */
    /* Write-back mode (wb.c). st_wb_lock guards the list and the mirrors:
     * pulls take it shared, pushes exclusive. Plain pushes take it shared
     * too, so write-back cannot start under them. */
    pthread_rwlock_t st_wb_lock;
    struct kv_wb *st_wb;
    struct wb_stage *st_wb_fl;        /* the flush in progress, or NULL */
    /* A leaf lock: while a flush is in progress, a push holds it (inside
     * st_wb_lock) while it changes mirrors, and the flusher, inside its
     * LMDB transaction, while it copies one chunk out of a mirror. The
     * flusher cannot take st_wb_lock there: a thread holding that lock may
     * wait in kv__enter() for a map resize, which waits for the flush's
     * transaction to end. */
    pthread_mutex_t st_wb_copy_mu;
    pthread_mutex_t st_wb_flush_mu;   /* one flush at a time; guards: */
    unsigned char *st_wb_stage;       /* copies of pending chunks made by
                                       * pushes during a flush */
    size_t st_wb_stage_len;
    unsigned char *st_wb_undo;        /* a write-back push's undo log,
                                       * kept for the next (st_wb_lock
                                       * held for writing; kv/wb_rows.c) */
    size_t st_wb_undo_len;
    size_t st_wb_ndrop;               /* tensors flushes dropped (another
                                       * handle deleted them) since the last
                                       * report, and the first: */
    char st_wb_drop[GKV_NAME_MAX + 160];
    uint64_t st_wb_gen;               /* under st_wb_lock: write-back
                                       * resets that committed (a state
                                       * load installs its copies only if
                                       * none did since it began) */
    pthread_mutex_t st_wb_mu;         /* flusher thread state: */
    pthread_cond_t st_wb_cv;
    pthread_t st_wb_thread;
    int st_wb_running, st_wb_stop;
    void *st_zero;                /* KV_ZERO_LEN read-only zero bytes (an
                                   * anonymous mapping: costs no memory), the
                                   * row of every unwritten zeros chunk */
};

struct gkv_txn {
    gkv_store *tx_store;
    MDB_txn *tx_txn;
    pthread_t tx_owner;           /* the thread that began it */
    int tx_held;                  /* begun by gkv_txn_begin (reads through
                                   * it are checked: kv__guard_held), not
                                   * a wrapper of a transaction of gkv's */
};

/* A tensor as the catalog records it. */
typedef struct kv_rec {
    uint32_t tid;
    gkv_dtype dtype;
    unsigned ndim;
    unsigned flags;               /* GKV_TENSOR_* */
    uint32_t chunk_rows;
    uint64_t shape[GKV_MAX_DIMS];
    uint64_t lo, hi;
    gkv_init init;
    double a, b;
    uint64_t seed;
    /* derived, not stored */
    uint64_t row_elems;
    size_t row_bytes;
    uint64_t nchunks;
} kv_rec;

extern unsigned kv__grow_wait_ms;   /* see store.c */
/* The most bytes the store could ever hold: its data file's size plus the
 * room left on its file system (UINT64_MAX when unknown). A write of more
 * cannot succeed, however the map grows. */
uint64_t kv__room_bound(const gkv_store *s);
/* A write function's GKV_EMAPFULL that growing the map cannot cure:
 * kv__write returns GKV_EMAPFULL at once, with the function's message. */
#define KV_EMAPFULL_FINAL ((gkv_err)-1000)

/* Counts a txn user in; fails with GKV_EBUSY if a grow takes too long. */
gkv_err kv__enter(gkv_store *s);
void    kv__leave(gkv_store *s);

/* Begins an LMDB txn (read-only when 'rdonly'), adopting a map that another
 * process grew. The caller has done kv__enter(). GKV_ECORRUPT when
 * data.mdb is shorter than this handle saw it (cut short while open: a
 * read of a missing page would be SIGBUS), and for a write when the
 * handle found the store damaged (st_damaged). */
gkv_err kv__txn_begin(gkv_store *s, int rdonly, MDB_txn **out);

/* A read snapshot for one call: 'tx' if given, else a fresh one that
 * kv__snap_end() ends. */
typedef struct kv_snap { gkv_store *s; MDB_txn *txn; int own; } kv_snap;
gkv_err kv__snap_begin(gkv_store *s, gkv_txn *tx, kv_snap *sn);
/* The public description of tensor 'name' with record r. */
void    kv__rec_to_desc(const char *name, const kv_rec *r, gkv_tensor_desc *d);
void    kv__snap_end(kv_snap *sn);

/* Runs fn inside one write transaction and commits it; when the map fills,
 * aborts, grows the map (while the disk has room) and runs fn again, so fn
 * must be restartable. On any error the store is unchanged. */
typedef gkv_err (*kv_write_fn)(gkv_store *s, MDB_txn *txn, void *arg);
gkv_err kv__write(gkv_store *s, kv_write_fn fn, void *arg);
/* kv__write() of a write done in slices (kv__slice_begin) of *every
 * chunk values (fn reads *every; NULL or 0: no slices). When a step in
 * the parent finds LMDB's dirty list full (KV_ETXNFULL; kv__slice_retry),
 * runs fn once more with *every 0. */
gkv_err kv__write_sliced(gkv_store *s, kv_write_fn fn, void *arg,
                         size_t *every);
/* What kv__from_mdb() makes of MDB_TXN_FULL; kv__write returns GKV_EIO. */
#define KV_ETXNFULL ((gkv_err)-1001)
/* kv__write() of a write to tensors n1 and n2 (either may be NULL): inside
 * the transaction, under LMDB's writer lock, first kv__wb_foreign() of
 * each (wbown.c: where another process keeps them in write-back, the
 * write would be lost at its next flush). */
gkv_err kv__write_named(gkv_store *s, const char *n1, const char *n2,
                        kv_write_fn fn, void *arg);
/* The same, in slices of *every chunk values (kv__write_sliced). */
gkv_err kv__write_named_sliced(gkv_store *s, const char *n1, const char *n2,
                               kv_write_fn fn, void *arg, size_t *every);
/* Waits for LMDB's writer lock once (a write transaction begun and
 * aborted): every write transaction begun before has ended. */
gkv_err kv__writer_barrier(gkv_store *s);

/* A write transaction's work in slices: LMDB keeps a transaction's dirty
 * pages in one sorted array, and inserting a page number below the
 * largest one moves every entry above it. A write that dirties more than
 * a few thousand pages taken from a fragmented free list (every free-list
 * record merged during the write spans the whole file) spent most of its
 * time there: 74 % of a write-back flush of 170,000 one-page chunks
 * (doc/BENCHMARKS.md, "Write-back flush (issue 27)"). A slice is a
 * nested transaction of at most 'every' steps; its dirty list stays short,
 * and committing it merges that list into the parent's in one linear pass.
 * Only the parent's commit makes the write durable or visible (a slice's
 * spilled pages go to pages no committed state uses), so the write stays
 * one atomic transaction. kv__slice_begin begins the first slice (every
 * 0: no nesting, sl->txn is 'parent'; callers pass 0 for a write of one
 * slice or less, which nesting would only slow) with a cursor on st_data
 * (sl->cur);
 * kv__slice_step, called after each step, when no pointer into a page
 * of the slice is used any more, with the caller's position of the next
 * step ('next': an index of its own) and the chunk values the step wrote
 * ('values': each is one entry of LMDB's dirty list, a page or an
 * overflow value's run), commits the slice and begins the next once the
 * slice has written 'every' values or more; kv__slice_end commits the
 * last one (rc GKV_OK) or aborts it and returns rc.
 * Past LMDB's 131,072 dirty pages some must be spilled to disk, and LMDB
 * spills only pages of the transaction that needs room: a slice its own,
 * while the parent's full list stays full. So past 32,768 values,
 * kv__slice_step makes the parent spill between slices when its room is
 * low (store.c, slice_poke); a slice may still find too few pages of its
 * own to spill (MDB_TXN_FULL). So kv__slice_retry, given the rc of a
 * failed step:
 * when it is KV_ETXNFULL in a slice, aborts the slice and returns GKV_OK
 * with *pos the position of its first step (the 'next' it began at, 0 for
 * the first slice): the caller runs its steps again from there on sl->cur,
 * now in the parent, which spills as it needs; after as many steps as the
 * slice had run (and the failed one) kv__slice_step begins a slice again.
 * For any other rc, or a step in the parent, it returns rc, and
 * kv__write_sliced runs the whole write once more unsliced (correct, but
 * as slow as no slices). Before both, a write-back flush of 1.5-2 GB
 * (past the list) took 15-32 s, most of it LMDB sorting the spill lists of
 * slices that had next to no room, or running the write twice
 * (doc/BENCHMARKS.md, "Write-back: batches per flush"). */
typedef struct kv_slice {
    gkv_store *s;
    MDB_txn *parent, *txn;
    MDB_cursor *cur;
    size_t n, every;    /* steps in this slice; values a slice writes */
    size_t run;         /* values written in this slice */
    size_t mark;        /* the caller's position of this slice's first step */
    size_t in_parent;   /* steps still to run in the parent (retry) */
    size_t total;       /* values of the slices committed so far */
    size_t poked;       /* total at the last slice_poke */
} kv_slice;
gkv_err kv__slice_begin(gkv_store *s, MDB_txn *parent, size_t every,
                        kv_slice *sl);
gkv_err kv__slice_step(kv_slice *sl, size_t next, size_t values);
gkv_err kv__slice_retry(kv_slice *sl, gkv_err rc, size_t *pos);
/* Tests only: when set, the step of a sliced write that brings it to 0
 * fails as a full dirty list would (KV_ETXNFULL), after its work, and it
 * is set to kv__slice_full_again (then 0). 0 normally.
 * kv__slice_retries counts the slices kv__slice_retry ran again in the
 * parent, kv__slice_reruns the writes run again unsliced, kv__slice_pokes
 * the pokes done (store.c, slice_poke); kv__slice_poke_start and
 * kv__slice_poke_every are its thresholds in chunk values (32,768 and
 * 16,384). */
extern size_t kv__slice_full_at, kv__slice_full_again;
extern unsigned long kv__slice_retries, kv__slice_reruns, kv__slice_pokes;
extern size_t kv__slice_poke_start, kv__slice_poke_every;
gkv_err kv__slice_end(kv_slice *sl, gkv_err rc);

/* Marks s damaged (st_damaged): its writes are refused from now on. */
void    kv__damaged(gkv_store *s);

/* ---- the fault guard (guard.c) ----------------------------------------
 * An entry point that reads the map through LMDB, on a handle opened with
 * GKV_GUARD, sets a guard once its transaction has begun:
 *     kv_guard g;
 *     KV_GUARD_INIT(&g);
 *     ... begin the transaction ...
 *     KV_GUARD_BEGIN(s, &g, caught);
 *     ... the reads and writes through LMDB ...
 *     KV_GUARD_END(&g);          (on every path out, before the txn ends)
 *     ...
 *   caught:                      (reached only by a jump)
 *     rc = kv__guard_caught(&g);
 *     ... abort the transaction, release what was taken after the guard
 * While the guard is set, a fault (SIGSEGV, SIGBUS raised by the kernel,
 * not sent) at an address inside the store's map (or up to 4 GiB past
 * it), or at any address from an instruction of liblmdb (a NULL or wild
 * pointer read from a changed page), and an LMDB assertion jump to
 * 'caught'. Nothing between BEGIN and END
 * may hold a lock or own memory that the caught path does not release
 * (a jump leaves it held), and the locals it changes are not read after
 * the jump. Without GKV_GUARD, BEGIN and END cost a flag test. */
/* ThreadSanitizer does not follow a siglongjmp out of a signal handler:
 * its per-thread state stays "in a handler" and every later malloc is
 * reported (google/sanitizers#482, llvm-project#215833). Under it,
 * GKV_GUARD installs no fault handler (LMDB's assertions and the check
 * before writes still work); the tests that need one skip. */
#if defined(__SANITIZE_THREAD__)
#define KV_GUARD_SIGNALS 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KV_GUARD_SIGNALS 0
#endif
#endif
#ifndef KV_GUARD_SIGNALS
#define KV_GUARD_SIGNALS 1
#endif
/* A file's modification time in ns, as the guard records states. */
static inline uint64_t
kv__mtime_ns(const struct stat *st)
{
    return (uint64_t)st->st_mtim.tv_sec * 1000000000u +
           (uint64_t)st->st_mtim.tv_nsec;
}

/* Not zero-filled (KV_GUARD_INIT sets g_store only): a guard is set on
 * every pull; the handler fills g_addr, g_ip and g_sig before it jumps. */
typedef struct kv_guard {
    sigjmp_buf g_jb;
    gkv_store *g_store;          /* NULL: not set */
    struct kv_guard *g_prev;     /* the thread's enclosing guard */
    uintptr_t g_addr;            /* where it faulted */
    uintptr_t g_ip;              /* the faulting instruction (0: unknown) */
    int g_sig;                   /* SIGSEGV, SIGBUS; 0: an LMDB assertion
                                  * (its text in g_what) */
    char g_what[200];            /* an LMDB assertion's text */
} kv_guard;
/* initial-exec: the signal handler reads it, and a global-dynamic
 * thread-local in libgkv.so may be reached through __tls_get_addr, which
 * can call malloc (not async-signal-safe) on a thread's first use. One
 * initial-exec variable makes the module's whole TLS block static, which
 * a module loaded later by dlopen (libgkv.so, the Python extension) must
 * find room for in glibc's few hundred spare bytes: so this pointer is
 * the library's only thread-local (base/err.c keeps its messages through
 * a pthread key; tls_size_test checks the block's size). */
#define KV_TLS_IE __attribute__((tls_model("initial-exec")))
extern __thread kv_guard *kv__guard_top KV_TLS_IE;
#define KV_GUARD_INIT(g) ((g)->g_store = NULL)
#define KV_GUARD_BEGIN(s, g, caught)                                    \
    do {                                                                \
        if ((s)->st_flags & GKV_GUARD) {                                \
            if (sigsetjmp((g)->g_jb, 0) != 0)                           \
                goto caught;                                            \
            (g)->g_prev = kv__guard_top;                                \
            (g)->g_store = (s);                                         \
            __atomic_signal_fence(__ATOMIC_SEQ_CST);                    \
            kv__guard_top = (g);                                        \
            __atomic_signal_fence(__ATOMIC_SEQ_CST);                    \
        }                                                               \
    } while (0)
#define KV_GUARD_END(g)                                                 \
    do {                                                                \
        if ((g)->g_store != NULL) {                                     \
            __atomic_signal_fence(__ATOMIC_SEQ_CST);                    \
            kv__guard_top = (g)->g_prev;                                \
            __atomic_signal_fence(__ATOMIC_SEQ_CST);                    \
            (g)->g_store = NULL;                                        \
        }                                                               \
    } while (0)
/* At open with GKV_GUARD: installs the handlers (once per process), LMDB's
 * assertion callback, and finds the map. The message goes to the NULL
 * handle. */
gkv_err kv__guard_open(gkv_store *s);
/* In a transaction just begun (write: 1 for a write transaction), with
 * data.mdb's mtime 'mtime' (ns) and size 'size' from the size check's
 * fstat, taken before it began (a state no newer than the one last
 * checked, mtime <= and transaction <=, is one checked; newer commits
 * record the file's state as the check finds it): whether data.mdb
 * changed since the state last checked (a read: its mtime; a write: the
 * inotify watch, which sees a change within one mtime tick too). A
 * change explained by newer commits (the snapshot's transaction is newer
 * than the one last checked, and both header pages pass kv__walk_meta)
 * is taken without a walk; any other change (bytes written with no
 * commit, or after a state found damaged) checks the structure of the
 * snapshot (kv__walk) before LMDB follows any pointer, unless the
 * snapshot is older than the state last checked: that one is neither
 * walked nor recorded, and refused while that state is damaged.
 * A state found damaged is remembered (mtime, size, transaction): reads
 * that begin on it again fail at once, with the walk's message, without
 * a walk. GKV_ECORRUPT, the handle marked damaged, when damaged. No-op
 * without GKV_GUARD. */
gkv_err kv__guard_check_slow(gkv_store *s, MDB_txn *txn, int write,
                             uint64_t mtime, uint64_t size, uint64_t seq);
/* 'seq': st_gseq as loaded before the fstat that gave mtime. */
static inline gkv_err
kv__guard_check(gkv_store *s, MDB_txn *txn, int write, uint64_t mtime,
                uint64_t size, uint64_t seq)
{
    uint64_t gm;

    /* inline: a read of a store unchanged since its last check costs a few
     * loads and compares. An older time passes only when a state was
     * recorded after it was taken (else the time went back: slow path) */
    if (!(s->st_flags & GKV_GUARD))
        return GKV_OK;
    gm = __atomic_load_n(&s->st_gmtime, __ATOMIC_ACQUIRE);
    if (!write && !__atomic_load_n(&s->st_gbad, __ATOMIC_ACQUIRE) &&
        (mtime == gm ||
         (mtime < gm && seq != __atomic_load_n(&s->st_gseq, __ATOMIC_ACQUIRE))))
        return GKV_OK;
    return kv__guard_check_slow(s, txn, write, mtime, size, seq);
}
/* Before a read through tx, a snapshot the caller holds (tx_held; at
 * gkv_txn_begin too, which records a newer commit its begin saw): the
 * check of kv__guard_check_slow for that snapshot, run when the watch
 * holds an event (a write since the state last recorded, also within
 * one mtime tick), the state is known damaged, or the watch was drained
 * with no state recorded since (st_gunsure); without a watch, when the
 * file's mtime moved (kv__guard_check). A snapshot older than the state
 * last checked is neither walked nor recorded (only the newest state
 * counts): its reads meet only the fault guard, and are refused while
 * that state is damaged. One ioctl when nothing changed (an fstat
 * without the watch). No-op without GKV_GUARD, and for gkv's own
 * wrappers (tx_held 0). */
gkv_err kv__guard_held(gkv_txn *tx);
/* After this handle's commit of write transaction 'id' succeeded (before
 * st_gcommitting drops): records the state of data.mdb (an fstat now,
 * 'id') as checked and drains the watch, so that only changes made until
 * then are taken as that commit's; a later change with no newer commit
 * is walked. Under st_gmu, with st_gunsure set from the drain to the
 * record. Records and drains nothing when the state is known damaged or
 * a newer one was recorded meanwhile (the events stay for the next
 * check). No-op unguarded. */
void    kv__guard_committed(gkv_store *s, uint64_t id);
/* After a jump to 'caught' in a write transaction: as kv__guard_caught(),
 * and st_wheld set; the caller must NOT end the transaction (it is
 * leaked, with the writer lock: st_wheld above). GKV_ECORRUPT. */
gkv_err kv__guard_caught_write(kv_guard *g);
/* Records where the map lies now (after a resize); no-op unguarded. */
void    kv__guard_map(gkv_store *s);
/* After a jump to 'caught': unsets the guard, marks the handle damaged and
 * returns GKV_ECORRUPT with the message "store 'S' is damaged: ...". */
gkv_err kv__guard_caught(kv_guard *g);
/* mdb_txn_begin under a guard (a handle with GKV_GUARD; the caller tests
 * the flag). A fault there (the header pages, cut off)
 * returns GKV_ECORRUPT as kv__guard_caught() with *out NULL: what LMDB
 * had taken stays taken (a read's reader slot and its memory; a write's
 * writer lock, which this process then holds until it exits, and other
 * processes' writers wait for). 'mrc' gets LMDB's return code. */
gkv_err kv__guard_txn_begin(gkv_store *s, unsigned flags, MDB_txn **out,
                            int *mrc);
/* liblmdb's code as the handler knows it ([*lo, *hi)); 0 when not found
 * (liblmdb linked statically, or no handle opened with GKV_GUARD yet). */
int     kv__guard_lmdb_code(uintptr_t *lo, uintptr_t *hi);
/* fn(s, txn, arg) under a guard: GKV_ECORRUPT as kv__guard_caught() when
 * it faults in the map; what fn holds then must be reachable from arg (the
 * caller frees it), and fn takes no lock. Without GKV_GUARD, a call. */
typedef gkv_err (*kv_read_fn)(gkv_store *s, MDB_txn *txn, void *arg);
gkv_err kv__guarded(gkv_store *s, MDB_txn *txn, kv_read_fn fn, void *arg);

/* mdb_env_sync, with the message (no write-back flush first). */
gkv_err kv__env_sync(gkv_store *s);

/* Translates an LMDB or errno code (once, at the boundary): MDB_* codes
 * and ENOSPC (GKV_EMAPFULL) here, the rest by gkv__from_errno(). */
gkv_err kv__from_mdb(int rc);

/* ---- the structure of data.mdb (walk.c) -------------------------------- */

/* What a walk found: the snapshot's pages and how they are used, and the
 * first bad page (UINT64_MAX: the record of database bad_db). */
typedef struct kv_walk_info {
    uint64_t pages;           /* last page + 1 */
    uint32_t page_size;
    uint64_t tree_pages;      /* branch and leaf pages of every tree */
    uint64_t overflow_pages;  /* pages of values too big for a leaf */
    uint64_t free_pages;      /* page numbers on the free list */
    uint64_t bad_page;
    char bad_db[16];
} kv_walk_info;

/* Checks the two meta (header) pages of data.mdb, open at 'fd', before
 * LMDB reads them (LMDB divides by their page size and maps by their last
 * page). GKV_ECORRUPT, with "store 'path' is damaged: ..." as the message
 * of the NULL handle, when either is damaged; GKV_EVERSION only when both
 * are whole LMDB meta pages of another data version. */
gkv_err kv__walk_meta(const char *path, int fd);
/* Checks the structure of the snapshot of transaction 'txnid' (0: the
 * newest meta page's) with pread: every tree of it and the free list, as
 * walk.c describes, following no number before it is checked. The caller
 * holds a read transaction of 'txnid' (so no writer reuses its pages
 * meanwhile), or no writer can run. GKV_ECORRUPT with the first bad page,
 * its database and, for data pages, the tensor; GKV_EBUSY when 'txnid' is no longer on the meta pages.
 * 'info' may be NULL. Reads every tree page and the first page of every
 * overflow value. The message goes to handle 's' (NULL: a failed open). */
gkv_err kv__walk(gkv_store *s, const char *path, int fd, uint64_t txnid,
                 kv_walk_info *info);

/* ---- catalog (tensor.c) ------------------------------------------------ */

/* Checks a user-visible name; fills the message and returns GKV_EINVAL. */
gkv_err kv__name_check(gkv_store *s, const char *name, int allow_state);
/* Reads the record of 'name'. GKV_ENOTFOUND (with message) if absent. */
gkv_err kv__rec_get(gkv_store *s, MDB_txn *txn, const char *name, kv_rec *r);
/* Creates 'name' in 'txn' (no commit). */
gkv_err kv__rec_create(gkv_store *s, MDB_txn *txn, const char *name,
                       const gkv_tensor_spec *spec, kv_rec *out);
void    kv__rec_derive(kv_rec *r);

/* ---- chunks (init.c, chunk.c) ------------------------------------------ */

static inline void
kv__key(unsigned char k[KV_KEY_LEN], uint32_t tid, uint64_t chunk)
{
    for (int i = 0; i < 4; i++)
        k[i] = (unsigned char)(tid >> (24 - 8 * i));
    for (int i = 0; i < 8; i++)
        k[4 + i] = (unsigned char)(chunk >> (56 - 8 * i));
}

static inline uint32_t
kv__key_tid(const unsigned char *k)
{
    return ((uint32_t)k[0] << 24) | ((uint32_t)k[1] << 16) |
           ((uint32_t)k[2] << 8) | k[3];
}

static inline uint64_t
kv__key_chunk(const unsigned char *k)
{
    uint64_t c = 0;
    for (int i = 0; i < 8; i++)
        c = (c << 8) | k[4 + i];
    return c;
}

/* Rows in chunk c of r, and the bytes of its value. */
static inline uint64_t
kv__chunk_nrows(const kv_rec *r, uint64_t c)
{
    uint64_t first = c * r->chunk_rows, n = r->hi - r->lo - first;
    return n < r->chunk_rows ? n : r->chunk_rows;
}

/* The checksum of a chunk: XXH3 of its rows, seeded by where it belongs,
 * so a chunk copied to the wrong key fails too. */
uint64_t kv__chunk_sum(uint32_t tid, uint64_t c, const void *rows, size_t len);
/* Fills n rows starting at global row 'first' with r's initializer. */
void     kv__init_rows(const kv_rec *r, uint64_t first, uint64_t n, void *dst);
/* Writes every chunk of r with its initializer (not for zeros, which stay
 * unwritten: an absent chunk reads as zeros). */
gkv_err  kv__materialize(gkv_store *s, MDB_txn *txn, const kv_rec *r);
/* Deletes every chunk of tensor 'tid'. */
gkv_err  kv__chunks_delete(gkv_store *s, MDB_txn *txn, uint32_t tid);

/* Bytes of the value of chunk c of r. */
static inline size_t
kv__chunk_size(const kv_rec *r, uint64_t c)
{
    return KV_CHUNK_HDR + kv__chunk_nrows(r, c) * r->row_bytes;
}
/* Writes the header (checksum, nrows, magic) of a chunk whose rows are in
 * place after it. */
void     kv__chunk_seal(const kv_rec *r, uint64_t c, unsigned char *val);
/* The checksum stored in the header of chunk c of tensor 'tid', as seen by
 * 'txn' (*have 0 and *sum 0 when the chunk is absent: it reads as zeros).
 * Any write to the chunk's rows changes it (but for a 2^-64 chance), so a
 * reader caching what it derived from the rows compares this one lookup
 * instead of the rows (the server's edge-feature weights do). GKV_ECORRUPT
 * for a value shorter than a header. */
gkv_err  kv__chunk_stamp(gkv_store *s, MDB_txn *txn, uint32_t tid, uint64_t c,
                         uint64_t *sum, int *have);

/* ---- push (push.c, handler.c, opt_state.c), shared with wb.c ----------- */

enum kv_hkind { KV_H_ASSIGN, KV_H_ADD, KV_H_SGD, KV_H_ADAGRAD, KV_H_ADAM,
                KV_H_CUSTOM };

typedef struct kv_push {
    const char *name;
    const uint64_t *ids;
    size_t n;
    const unsigned char *rows;
    size_t rows_len;
    enum kv_hkind kind;
    double lr, eps, b1, b2;
    int dups_sum;             /* GKV_PUSH_DUPS_SUM: copies' gradients summed,
                               * else averaged */
    gkv_push_fn fn;
    void *ctx;
    size_t slice;             /* chunk values (the state's included) per
                               * nested transaction of a push to the
                               * store (kv__slice_begin; 0: none) */
} kv_push;
/* The slice of gkv_tensor_push (16384 chunk values; tests set others). */
extern size_t kv__push_slice;

/* Optimizer state companions of handler k: how many, and the i-th suffix
 * ("#adagrad_s", ...). */
size_t      kv__state_n(enum kv_hkind k);
const char *kv__state_suffix(enum kv_hkind k, size_t i);
/* 1 for the per-row step count (i64, one a row), 0 for row-shaped state. */
int         kv__state_is_step(enum kv_hkind k, size_t i);
/* Splits optimizer-state name "T#suffix" into T (base, GKV_NAME_MAX + 1
 * bytes) and its optimizer k and companion index *idx (kv__state_suffix(k,
 * *idx) is the suffix). GKV_EINVAL, with the message, for any other name
 * with a '#'. */
gkv_err kv__state_parse(gkv_store *s, const char *name, char *base,
                        enum kv_hkind *k, size_t *idx);
/* Bit of optimizer k in a 'kinds' mask (kv__state_drop, kv__wb_reset). */
#define KV_KIND_BIT(k) (1u << (unsigned)(k))
/* Deletes, in 'txn', the state companions of tensor 'name' that belong to
 * the optimizers in 'kinds' (records and chunks); missing ones are fine. */
gkv_err kv__state_drop(gkv_store *s, MDB_txn *txn, const char *name,
                       unsigned kinds);
/* Gets, creating zero-filled in 'txn' if missing, state companion 'suffix'
 * of tensor 'name' (record r). A companion already stored is returned as
 * it is: check it with kv__state_rec_same before using its rows. */
gkv_err kv__state_get(gkv_store *s, MDB_txn *txn, const char *name,
                      const kv_rec *r, const char *suffix, int is_step,
                      kv_rec *st);
/* The record a state companion of tensor r has (or gets), but its tid:
 * is_step for the step count (kv__state_is_step). */
void    kv__state_rec(const kv_rec *r, int is_step, kv_rec *st);
/* GKV_EINVAL, naming tensor 'name' and its companion 'sname', when record
 * st (from kv__state_rec) is over a tensor's row or chunk limit: the f32
 * state of an f16/bf16 tensor has twice its bytes, a step count 8 bytes
 * a row. */
gkv_err kv__state_fits(gkv_store *s, const char *name, const char *sname,
                       const kv_rec *st);
/* Whether s was opened before this process forked (its parent's handle),
 * and the error for calls on it. */
int     kv__forked(const gkv_store *s);
gkv_err kv__fork_refused(gkv_store *s);
/* A big buffer mapped directly, asked for huge pages (NULL, errno
 * ENOMEM, past the machine's memory) (kv/wb.c). */
void   *kv__big_alloc(size_t len);
/* Frees a write-back push's undo log (st_wb_undo); caller holds
 * st_wb_lock for writing, or is the only user (close). */
void    kv__wb_undo_drop(gkv_store *s);
/* Frees the write-back copies without writing them (a forked child). */
void    kv__wb_discard(gkv_store *s);
/* Tests: takes (1) or releases (0) the lock of the process's list of
 * open stores, as an open in another thread holds it. */
void kv__open_list_hold(int hold);
#define KV_MAX_CHUNK_BYTES (256ull << 20)   /* a chunk's rows */
#define KV_MAX_ROW_BYTES   (64ull << 20)    /* one row */
/* Whether companion record st has the rows kv__state_rec() gave 'want'
 * (dtype, row shape, ID range, chunking). */
int     kv__state_rec_same(const kv_rec *want, const kv_rec *st);
/* GKV_ECORRUPT, with the message: companion 'sname' (record st) does not
 * have the rows of tensor 'base' (want, from kv__state_rec). */
gkv_err kv__state_mismatch(gkv_store *s, const char *sname, const char *base,
                           const kv_rec *want, const kv_rec *st);
/* Creates, zero-filled, the missing state companions of optimizer k of
 * tensor 'name', in one write transaction of its own (for write-back
 * mode), only while 'name' is still the tensor with id 'tid'
 * (GKV_ENOTFOUND otherwise). */
gkv_err kv__state_create(gkv_store *s, const char *name, enum kv_hkind k,
                         uint32_t tid);
/* Stable order of ids by value (*out gkv__malloc'd). */
gkv_err kv__sort_order(const uint64_t *ids, size_t n, uint64_t lo,
                       uint64_t range, uint32_t **out);
/* Checks a push against r (lengths, ID range, dtype, and finite values
 * through add and the optimizers): the error it would
 * fail with, or GKV_OK. */
gkv_err kv__push_check(gkv_store *s, const kv_push *a, const kv_rec *r);
/* Applies the handler to the IDs a->ids[order[i..e)] (sorted). The row of
 * ID x is at base + (x - base_id) x row bytes; its state in companion k at
 * sbase[k] + (x - base_id) x st[k].row_bytes. 'g' has row_elems doubles
 * (optimizers); 'desc' describes the tensor (custom handlers). A step whose
 * result is not finite in the row or the state (add, optimizers on a float
 * dtype) fails it with GKV_EINVAL. 'undo' NULL, or room for e - i entries
 * of kv__undo_entry_bytes(): it then puts back what it changed when it
 * fails. */
gkv_err kv__apply_run(gkv_store *s, const kv_push *a, const kv_rec *r,
                      const gkv_tensor_desc *desc, const kv_rec *st,
                      size_t nst, const uint32_t *order, size_t i, size_t e,
                      uint64_t base_id, unsigned char *base,
                      unsigned char *const sbase[3], double *g,
                      unsigned char *undo);
/* The bytes of one entry of kv__apply_run's undo log: an ID, the row, and
 * the row of each of the nst state companions st. */
static inline size_t
kv__undo_entry_bytes(const kv_rec *r, const kv_rec *st, size_t nst)
{
    size_t ue = 8 + r->row_bytes;

    for (size_t k = 0; k < nst; k++)
        ue += st[k].row_bytes;
    return ue;
}

/* ---- rows: shared by init.c, chunk.c, pull.c, push.c, handler.c,
 * opt_state.c, write.c, wb_rows.c ------------------------------------------ */

/* Rows inside an LMDB value are only as aligned as LMDB places the value
 * (2 bytes for a small one): elements are moved with memcpy, which the
 * compiler turns into plain loads and stores. */
#define KV_LD(T) do { T x_; memcpy(&x_, (const unsigned char *)p + \
                                  i * sizeof x_, sizeof x_); \
                           return (double)x_; } while (0)
/* Element i of the row at p (dtype dt), as a double. */
static inline double
kv__elem_load(gkv_dtype dt, const void *p, uint64_t i)
{
    uint16_t h;

    switch (dt) {
    case GKV_F32:  KV_LD(float);
    case GKV_F64:  KV_LD(double);
    case GKV_F16:  memcpy(&h, (const unsigned char *)p + 2 * i, 2);
                   return gkv_f16_to_f32(h);
    case GKV_BF16: memcpy(&h, (const unsigned char *)p + 2 * i, 2);
                   return gkv_bf16_to_f32(h);
    case GKV_I8:   KV_LD(int8_t);
    case GKV_U8:   KV_LD(uint8_t);
    case GKV_I32:  KV_LD(int32_t);
    case GKV_I64:  KV_LD(int64_t);
    }
    return 0;
}
#undef KV_LD

/* v clamped to [lo, hi], NaN to 0 (kv__elem_store of an integer). */
static inline double
kv__clampd(double v, double lo, double hi)
{
    if (isnan(v))
        return 0;
    return v < lo ? lo : v > hi ? hi : v;
}

#define KV_ST(T, v) do { T x_ = (v); memcpy((unsigned char *)p + \
                                         i * sizeof x_, &x_, sizeof x_); \
                            } while (0)
/* Stores v as element i of the row at p (dtype dt): floats rounded,
 * integers truncated and saturated. */
static inline void
kv__elem_store(gkv_dtype dt, void *p, uint64_t i, double v)
{
    switch (dt) {
    case GKV_F32:  KV_ST(float, (float)v); break;
    case GKV_F64:  KV_ST(double, v); break;
    case GKV_F16:  KV_ST(uint16_t, gkv_f32_to_f16((float)v)); break;
    case GKV_BF16: KV_ST(uint16_t, gkv_f32_to_bf16((float)v)); break;
    case GKV_I8:   KV_ST(int8_t, (int8_t)kv__clampd(trunc(v), -128, 127)); break;
    case GKV_U8:   KV_ST(uint8_t, (uint8_t)kv__clampd(trunc(v), 0, 255)); break;
    case GKV_I32:  KV_ST(int32_t, (int32_t)kv__clampd(trunc(v), -2147483648.0,
                                                      2147483647.0)); break;
    case GKV_I64:  KV_ST(int64_t, (int64_t)kv__clampd(trunc(v),
                                                      -9.2233720368547758e18,
                                                      9.2233720368547748e18));
                   break;
    }
}

/* 1 for f32, f64, f16 and bf16. */
static inline int
kv__dtype_is_float(gkv_dtype dt)
{
    return dt == GKV_F32 || dt == GKV_F64 || dt == GKV_F16 || dt == GKV_BF16;
}

/* Row r (0-based inside the tensor) -> chunk index, without a division when
 * chunk_rows is a power of two. */
typedef struct kv_chunk_div { uint64_t cr; int shift; } kv_chunk_div;

static inline kv_chunk_div
kv__div_make(uint32_t cr)
{
    kv_chunk_div d = {cr, -1};
    if ((cr & (cr - 1)) == 0)
        d.shift = __builtin_ctz(cr);
    return d;
}

static inline uint64_t
kv__div_chunk(kv_chunk_div d, uint64_t r)
{
    return d.shift >= 0 ? r >> d.shift : r / d.cr;
}

/* The largest adam step count a row may hold: a restore refuses more
 * (steps_check), and an adam push refuses a row already there (its t + 1
 * would be INT64_MAX, which no restore takes back), so t + 1 never
 * overflows. */
#define KV_STEP_MAX (INT64_MAX - 1)

/* GKV_ERANGE, with the message: ID 'id' (at index i of the caller's list)
 * is outside tensor 'name' (record r). */
gkv_err kv__range_error(gkv_store *s, const char *name, const kv_rec *r,
                        uint64_t id, size_t i);
/* GKV_ESHAPE, with the message: 'len' bytes are not n rows of tensor
 * 'name' (record r). */
gkv_err kv__len_error(gkv_store *s, const char *name, const kv_rec *r,
                      uint64_t n, size_t len);
/* Makes chunk c of r writable through 'cur' (a cursor on st_data in a
 * write txn) and returns its value in *val, the current rows in place
 * (zeros for an unwritten chunk of a zeros tensor; GKV_ECORRUPT for any
 * other missing chunk or a wrong size). *val is valid until the next write
 * call in the txn; the caller seals it (kv__chunk_seal). */
gkv_err kv__chunk_cow(gkv_store *s, MDB_cursor *cur, const kv_rec *r,
                      const char *name, uint64_t c, unsigned char **val);

/* Applies push a (its handler set: kv__handler_find) inside write txn
 * 'txn' (a kv__write callback): checks it, creates the state companions
 * it needs, and changes each chunk touched once. */
gkv_err kv__push_fn(gkv_store *s, MDB_txn *txn, void *arg);
/* Sets a->kind from handler name h (a built-in), or a->kind KV_H_CUSTOM and
 * a->fn, a->ctx from the handlers registered on s. GKV_EHANDLER, naming
 * tensor a->name, when there is no such handler. Takes st_mu itself. */
gkv_err kv__handler_find(gkv_store *s, const char *h, kv_push *a);
/* The refusal of an adam push to ID 'id', whose step count t is
 * KV_STEP_MAX or more (GKV_EINVAL, with the message). */
gkv_err kv__step_full(gkv_store *s, const kv_push *a, uint64_t id, int64_t t);

/* A range write of rows [a, b) of tensor 'name' (kv__write_fn). */
struct kv_write_arg {
    const char *name;
    uint64_t a, b;
    const unsigned char *rows;
    size_t rows_len;
};
/* Checks a range write of rows [a, b), len bytes, against r: the error,
 * with the message, or GKV_OK. */
gkv_err kv__write_check(gkv_store *s, const char *name, const kv_rec *r,
                        uint64_t a, uint64_t b, size_t len);
/* Writes the rows of arg (a struct kv_write_arg) in write txn 'txn' (a
 * kv__write callback). */
gkv_err kv__write_fn(gkv_store *s, MDB_txn *txn, void *arg);
/* The write (push by ID: range 0, ids and n; range write: range 1, rows
 * [a, b)) of 'len' bytes of 'rows' into optimizer state companion 'name'
 * ("T#adam_m"), restoring saved state. Only handler "assign" (or NULL)
 * writes it. Goes to the companion's RAM copy when T is in write-back
 * mode. */
gkv_err kv__state_write(gkv_store *s, const char *name, int range,
                        const uint64_t *ids, size_t n, uint64_t a, uint64_t b,
                        const void *rows, size_t len, const char *handler);

/* Write-back RAM side (wb_rows.c). Each does nothing and sets *done = 0
 * when 'name' is not (or no longer) in write-back mode on s; else *done
 * = 1 and the result is the call's. Each takes st_wb_lock itself. */
/* Push a into the RAM copies of tensor a->name and its state. */
gkv_err kv__wb_push(gkv_store *s, const kv_push *a, int *done);
/* Pull (range 0: ids, n) or range read (range 1: rows [a, b)) of 'name',
 * a write-back tensor or a loaded state companion of one, into dst. */
gkv_err kv__wb_read(gkv_store *s, const char *name, int range,
                    const uint64_t *ids, size_t n, uint64_t a, uint64_t b,
                    void *dst, size_t len, int *done);
/* Range write of rows [a, b) into the RAM copy of tensor 'name'. */
gkv_err kv__wb_write(gkv_store *s, const char *name, uint64_t a, uint64_t b,
                     const void *rows, size_t len, int *done);
/* Marks dirty the chunks of mirror m that hold rows 'ids'. Caller holds
 * st_wb_lock exclusively. */
struct kv_mirror;
void    kv__mirror_dirty(struct kv_mirror *m, const uint64_t *ids, size_t n);
/* Before changing the rows 'ids' of m during a flush: saves those of them
 * the flush still has to write as they were, each row once a flush
 * (wb.c; same locks). */
void    kv__mirror_touch(gkv_store *s, struct kv_mirror *m,
                         const uint64_t *ids, size_t n);
/* The same for ids[order[0..n)], in ascending order (kv__sort_order). */
void    kv__mirror_touch_sorted(gkv_store *s, struct kv_mirror *m,
                                const uint64_t *ids, const uint32_t *order,
                                size_t n);
/* For a write to the store itself: takes st_wb_lock shared when 'name' is
 * not in write-back mode, so that no gkv_writeback_start of it runs until
 * the caller unlocks, and returns 1. Returns 0, holding nothing, when it
 * is in write-back mode: then the caller writes into the copy instead. */
int     kv__direct_lock(gkv_store *s, const char *name);

/* ---- write-back mode (wb.c) ------------------------------------------- */

/* The state of a mirror's chunk, one byte each (kv_mirror.dirty). */
enum {
    KV_WB_CLEAN,      /* as in the store, or being written there */
    KV_WB_DIRTY,      /* changed since the last flush began */
    KV_WB_PENDING     /* being flushed as it was when the flush began, and
                       * not changed since: the flusher reads it from the
                       * mirror, so a push must save it first */
};

/* One RAM copy of a tensor or of one of its state companions. */
typedef struct kv_mirror {
    char name[GKV_NAME_MAX + 1];
    kv_rec r;
    unsigned char *rows;   /* (hi - lo) x row_bytes */
    uint8_t *dirty;        /* per chunk: KV_WB_CLEAN, _DIRTY or _PENDING */
    size_t pend_lo, pend_n;   /* its pieces in the flush in progress */
    int gone;              /* the flush found it deleted or replaced by
                            * another handle (under st_wb_flush_mu) */
} kv_mirror;

/* A tensor in write-back mode: m[0] is the tensor, m[1..4] its state
 * companions #adagrad_s, #adam_m, #adam_v, #adam_t (rows NULL until used). */
typedef struct kv_wb {
    struct kv_wb *next;
    kv_mirror m[5];
    unsigned interval_ms;
} kv_wb;

/* Write-back ownership across processes (wbown.c). kv__wb_foreign: before
 * writing tensor 'name' (or a companion of it), GKV_EBUSY naming the
 * process when another process holds it in write-back mode. Publish: after
 * this handle's write-back list changed (caller holds st_wb_lock), takes
 * the store's write-back lock and lists the tensors, or, with none left,
 * releases it; GKV_EBUSY when another process holds it. Close: at the
 * handle's close. 'pending': a name to list too (a start about to load it:
 * listed before the load, so no other process's write falls between). */
gkv_err kv__wb_foreign(gkv_store *s, const char *name);
gkv_err kv__wb_own_publish(gkv_store *s, const char *pending);
void    kv__wb_own_close(gkv_store *s);

/* The write-back entry of 'name' or NULL. Caller holds st_wb_lock. */
kv_wb  *kv__wb_find(gkv_store *s, const char *name);
/* Mirror of state companion 'suffix' of w, or NULL if not loaded. */
kv_mirror *kv__wb_state(kv_wb *w, const char *suffix);
/* Loads (creating in the store if missing) the state companions that
 * handler k needs for write-back tensor 'name', all through one snapshot,
 * each checked to have the copy's rows; installs them unless a write-back
 * reset committed meanwhile (st_wb_gen), else loads them again. Takes
 * st_wb_lock itself. GKV_OK also when 'name' left write-back mode. */
gkv_err kv__wb_state_load(gkv_store *s, const char *name, enum kv_hkind k);
/* Saves chunk c of m (KV_WB_PENDING) for the flush in progress, which then
 * writes the copy, and marks it dirty. Caller holds st_wb_lock exclusively
 * and st_wb_copy_mu. */
void kv__wb_save(gkv_store *s, kv_mirror *m, uint64_t c);
/* Call before changing chunk c of m; same locks. */
static inline void
kv__wb_touch(gkv_store *s, kv_mirror *m, uint64_t c)
{
    if (m->dirty[c] == KV_WB_PENDING)
        kv__wb_save(s, m, c);
}
/* Tests only: called by a flush once it has marked its chunks pending,
 * before it writes them (no lock held). NULL normally. */
extern void (*kv__wb_flush_hook)(gkv_store *s);
/* Chunks a flush writes per nested transaction (kv__slice_begin; 0: no
 * nesting). 16384 by default; tests set other values. */
extern size_t kv__wb_slice;
/* Tests only: called by a load of a write-back copy (the tensor, at
 * gkv_writeback_start, or a state companion 'name') once it has read the
 * record of 'name', inside the snapshot it reads the rows from, before it
 * reads them; with 'name' "" when kv__wb_state_load has created missing
 * companions and not yet begun its snapshot; and with 'name' NULL when
 * kv__wb_state_load has installed
 * its copies, before the push or restore that asked for them takes
 * st_wb_lock again. gkv_writeback_start holds st_wb_lock exclusively
 * there; a state load for a push or a restore holds no lock, so the hook
 * may call into s as another thread would (but not grow the map while a
 * snapshot is open). NULL normally. */
extern void (*kv__wb_load_hook)(gkv_store *s, const char *name);
/* gkv_opt_reset of write-back tensor 'name' on this handle: in one
 * transaction, writes every dirty chunk of every write-back tensor (as a
 * flush) and deletes the companions of 'kinds'; then frees their mirrors.
 * Holds st_wb_flush_mu and st_wb_lock (exclusive) throughout, so the store
 * goes from the state after one push to that state with the optimizer
 * state dropped. *done = 0 when 'name' is not in write-back mode (nothing
 * was done). */
gkv_err kv__wb_reset(gkv_store *s, const char *name, unsigned kinds, int *done);
/* Stops the flusher, flushes and frees everything (store close). */
gkv_err kv__wb_close(gkv_store *s);
/* Whether any tensor of s is in write-back mode (a lock-free hint). */
static inline int
kv__wb_any(gkv_store *s)
{
    return __atomic_load_n(&s->st_wb, __ATOMIC_ACQUIRE) != NULL;
}

#endif /* KV_INT_H */
