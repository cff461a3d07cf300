/* kv_wb_edge_test.c - edge cases of write-back mode around the two-step
 * flush (kv/wb.c: chunks marked pending under the lock, written from the
 * mirrors without it; pushes save a pending chunk before they change it).
 *
 * Every check compares bytes with a reference: the same operations, in the
 * same order, on a direct (not write-back) tensor of another store. What a
 * store must hold after a flush is the reference at the push boundary the
 * flush began at; after a later flush, the reference after every push.
 *
 * Deadlock tests run under a watchdog (alarm): a hang fails the program
 * with a message instead of running into the harness's time limit. */
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "gkvt.h"
#include "gkvt_wb.h"
#include "kv/kv_test.h"     /* kv__wb_flush_hook, kv__wb_find, kv_mirror */

#define LO 100u

typedef struct geo {
    uint64_t n, w;      /* rows, f32 elements per row */
    uint32_t cr;        /* rows per chunk */
    int zeros;          /* zeros: no chunk is written at create, so the
                         * map stays small until a flush fills it */
} geo;

static gkv_tensor_spec
mkspec(geo g)
{
    gkv_tensor_spec sp;

    memset(&sp, 0, sizeof sp);
    sp.dtype = GKV_F32;
    sp.ndim = 1;
    sp.shape[0] = g.w;
    sp.lo = LO;
    sp.hi = LO + g.n;
    sp.chunk_rows = g.cr;
    sp.init = g.zeros ? GKV_INIT_ZEROS : GKV_INIT_UNIFORM;
    sp.a = g.zeros ? 0 : -1;
    sp.b = g.zeros ? 0 : 1;
    sp.seed = 7;
    return sp;
}

/* ---- watchdog -------------------------------------------------------------- */

static const char *volatile wd_what = "";

static void
wd_fire(int sig)
{
    static const char m[] = "\n!! watchdog: no progress (deadlock?) in ";
    (void)sig;
    if (write(2, m, sizeof m - 1) < 0 ||
        write(2, wd_what, strlen(wd_what)) < 0 || write(2, "\n", 1) < 0)
        _exit(98);
    _exit(99);
}

static void
wd_arm(const char *what, unsigned secs)
{
    wd_what = what;
    signal(SIGALRM, wd_fire);
    alarm(secs);
}

static void
wd_disarm(void)
{
    alarm(0);
}

/* ---- reading and comparing stores ------------------------------------------ */

static int
all_zero(const unsigned char *b, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (b[i] != 0)
            return 0;
    return 1;
}

static const char *const family[] = {
    "", "#adagrad_s", "#adam_m", "#adam_v", "#adam_t"
};

/* Tensor 'name' and its state companions in snapshot tx of 'got' against
 * 'want' (NULL: a fresh snapshot of it). A companion the reference lacks
 * must be missing or zeros in 'got'. Fails naming the first difference. */
static void
family_equal(gkv_store *got, gkv_txn *tx, gkv_store *want, const char *name,
             const char *what)
{
    gkv_txn *wt;

    GKVT_OK(gkv_txn_begin(want, &wt));
    for (size_t i = 0; i < sizeof family / sizeof *family; i++) {
        char nm[GKV_NAME_MAX + 1];
        size_t lg = 0, lw = 0;
        unsigned char *g, *w;

        snprintf(nm, sizeof nm, "%s%s", name, family[i]);
        g = gkvt_tensor_dump(got, tx, nm, &lg);
        w = gkvt_tensor_dump(want, wt, nm, &lw);
        if (w == NULL) {
            if (g != NULL && !all_zero(g, lg))
                fail_msg("%s: '%s' holds state the reference does not have",
                         what, nm);
        } else if (g == NULL) {
            fail_msg("%s: '%s' is missing", what, nm);
        } else if (lg != lw) {
            fail_msg("%s: '%s' has %zu bytes, the reference %zu", what, nm,
                     lg, lw);
        } else if (memcmp(g, w, lw) != 0) {
            size_t k = 0;
            while (g[k] == w[k])
                k++;
            fail_msg("%s: '%s' differs from the reference first at byte %zu "
                     "(of %zu)", what, nm, k, lw);
        }
        free(g);
        free(w);
    }
    gkv_txn_end(wt);
}

/* The store of 'got' (a fresh snapshot) against the reference. */
static void
store_equal(gkv_store *got, gkv_store *want, const char *name, const char *what)
{
    gkv_txn *tx;

    GKVT_OK(gkv_txn_begin(got, &tx));
    family_equal(got, tx, want, name, what);
    gkv_txn_end(tx);
}

/* The mirror (pull, tx NULL) of 'name' against the reference's store. */
static void
mirror_equal(gkv_store *got, gkv_store *want, const char *name, const char *what)
{
    size_t lg = 0, lw = 0;
    unsigned char *g = gkvt_tensor_dump(got, NULL, name, &lg);
    unsigned char *w = gkvt_tensor_dump(want, NULL, name, &lw);

    assert_non_null(g);
    assert_non_null(w);
    assert_int_equal(lg, lw);
    if (memcmp(g, w, lw) != 0)
        fail_msg("%s: a read of '%s' without a snapshot differs from the reference",
                 what, name);
    free(g);
    free(w);
}

static uint64_t
fnv(uint64_t h, const unsigned char *b, size_t len)
{
    for (size_t i = 0; i < len; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* A hash of tensor 'name' and its companions in snapshot tx. */
static uint64_t
family_hash(gkv_store *s, gkv_txn *tx, const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < sizeof family / sizeof *family; i++) {
        char nm[GKV_NAME_MAX + 1];
        size_t len = 0;
        unsigned char *b;

        snprintf(nm, sizeof nm, "%s%s", name, family[i]);
        b = gkvt_tensor_dump(s, tx, nm, &len);
        h = fnv(h, (const unsigned char *)nm, strlen(nm) + 1);
        if (b != NULL && !all_zero(b, len))
            h = fnv(h, b, len);
        free(b);
    }
    return h;
}

static int in_writeback(gkv_store *s, const char *name);

/* ---- operations ------------------------------------------------------------ */

/* Custom handlers: "mul" (r = r / 2 + x) and "failing" (writes the row,
 * then fails at its fail_at-th row: the push must change nothing). */
struct failctx {
    int count, fail_at;
};

static gkv_err
h_fail(void *ctx, const gkv_tensor_desc *d, uint64_t id, void *row, const void *in)
{
    struct failctx *f = ctx;

    (void)id;
    memcpy(row, in, d->row_bytes);
    return ++f->count == f->fail_at ? GKV_EINVAL : GKV_OK;
}

enum {
    OP_ASSIGN, OP_ADD, OP_SGD, OP_ADAGRAD, OP_ADAM, OP_MUL, OP_FAIL,
    OP_WRITE, OP_WRITE_TAIL, OP_NKINDS
};

static const char *const op_handler[] = {
    "assign", "add", "sgd", "adagrad", "adam", "mul", "failing", NULL, NULL
};

/* Handlers are registered with a per-store context. */
static void
register_handlers(gkv_store *s, struct failctx *f)
{
    GKVT_OK(gkv_handler_register(s, "mul", gkvt_h_mul, NULL));
    GKVT_OK(gkv_handler_register(s, "failing", h_fail, f));
}

/* Operation 'kind' on tensor 'name' of s, its random inputs drawn from *rs
 * (so the same calls with the same seed do the same thing anywhere). Up to
 * 'maxn' rows; IDs may repeat. A push that gets GKV_EBUSY (a write-back
 * start or stop raced it; nothing was done) is tried again. */
static void
do_op(gkv_store *s, struct failctx *f, const char *name, geo g, int kind,
      uint64_t *rs, size_t maxn)
{
    size_t n = 1 + tools__splitmix64(rs) % maxn;
    uint64_t *ids = malloc((n + 1) * sizeof *ids);
    float *rows = malloc((n + 1) * g.w * sizeof *rows + g.n * g.w * 4);
    gkv_err rc;

    for (size_t i = 0; i < n; i++)
        ids[i] = LO + tools__splitmix64(rs) % g.n;
    if (n > 2)
        ids[n - 1] = ids[0];                           /* a duplicate */
    for (size_t i = 0; i < n * g.w; i++)
        rows[i] = (float)((int)(tools__splitmix64(rs) % 2001) - 1000) / 1000.0f;
    if (kind == OP_WRITE || kind == OP_WRITE_TAIL) {
        /* a range across chunk boundaries; _TAIL: up to the last row */
        uint64_t len = 1 + tools__splitmix64(rs) % (3 * (uint64_t)g.cr + 2);
        uint64_t a, b;

        if (len > g.n)
            len = g.n;
        a = kind == OP_WRITE_TAIL ? g.n - len : tools__splitmix64(rs) % (g.n - len + 1);
        b = a + len;
        for (size_t i = 0; i < len * g.w; i++)
            rows[i] = (float)(i % 977) * 0.25f - (float)kind;
        do {
            rc = gkv_tensor_write(s, name, LO + a, LO + b, rows,
                                  (size_t)len * g.w * 4);
        } while (rc == GKV_EBUSY);
        GKVT_OK(rc);
    } else {
        gkv_push_args pa = {op_handler[kind], 0.05, 0, 0, 0, 0};

        f->count = 0;
        f->fail_at = 1 + (int)(tools__splitmix64(rs) % n);
        do {
            rc = gkv_tensor_push(s, name, ids, n, rows, n * g.w * 4, &pa);
        } while (rc == GKV_EBUSY);
        if (kind == OP_FAIL)
            assert_int_equal(rc, GKV_EHANDLER);
        else
            GKVT_OK(rc);
    }
    free(ids);
    free(rows);
}

/* A store and its reference, both with handlers. */
struct pair {
    char *dir, *rdir;
    gkv_store *s, *ref;
    struct failctx f, rf;
};

static void
pair_open(struct pair *p, const char *tag, uint64_t map)
{
    gkv_open_opts o = {map, 0};

    memset(p, 0, sizeof *p);
    p->dir = gkvt_mkdtemp(tag);
    p->rdir = gkvt_mkdtemp("wbaref");
    GKVT_OK(gkv_store_open(&p->s, p->dir, GKV_CREATE | GKV_NOSYNC,
                           map ? &o : NULL));
    GKVT_OK(gkv_store_open(&p->ref, p->rdir, GKV_CREATE | GKV_NOSYNC, NULL));
    register_handlers(p->s, &p->f);
    register_handlers(p->ref, &p->rf);
}

static void
pair_create(struct pair *p, const char *name, geo g)
{
    gkv_tensor_spec sp = mkspec(g);

    GKVT_OK(gkv_tensor_create(p->s, name, &sp));
    GKVT_OK(gkv_tensor_create(p->ref, name, &sp));
}

/* The same operation on both. */
static void
pair_op(struct pair *p, const char *name, geo g, int kind, uint64_t *rs,
        size_t maxn)
{
    uint64_t r2 = *rs;

    do_op(p->s, &p->f, name, g, kind, rs, maxn);
    do_op(p->ref, &p->rf, name, g, kind, &r2, maxn);
}

static void
pair_close(struct pair *p)
{
    gkv_store_close(p->s);
    gkv_store_close(p->ref);
    gkvt_rmtree(p->dir);
    gkvt_rmtree(p->rdir);
}

/* ---- 1. pushes of every kind inside a flush, over several geometries ------
 * The hook runs between the flush's two steps. It pushes with every
 * handler (Adam for the first time, so its three companions are created
 * and loaded while the flush holds its chunks pending), a custom handler
 * that fails half way (undo), range writes across chunks and into a short
 * last chunk. The map starts small, so the flush's transaction may be run
 * again after a resize. */

static struct {
    gkv_store *s;
    struct failctx *f;
    geo g;
    uint64_t rs;
    int calls;
    void (*ops)(gkv_store *, struct failctx *, geo, uint64_t *);
} hk;

static void
hook_ops(gkv_store *s)
{
    if (s != hk.s)
        return;
    hk.calls++;
    hk.ops(s, hk.f, hk.g, &hk.rs);
}

static void
ops_inside(gkv_store *s, struct failctx *f, geo g, uint64_t *rs)
{
    static const int kinds[] = {
        OP_ADAM, OP_WRITE, OP_ADAGRAD, OP_FAIL, OP_ASSIGN, OP_WRITE_TAIL,
        OP_MUL, OP_ADAM, OP_FAIL, OP_ADD, OP_SGD, OP_WRITE, OP_ADAM
    };
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        do_op(s, f, "t", g, kinds[i], rs, 2 * g.cr + 40);
}

static void
hook_case(geo g, uint64_t seed)
{
    struct pair p;
    uint64_t rs = seed, hrs;
    gkv_store_stat st0, st1;
    char what[96];

    snprintf(what, sizeof what, "rows %llu x %llu, chunk %u",
             (unsigned long long)g.n, (unsigned long long)g.w, g.cr);
    pair_open(&p, "wbahook", 256u << 10);
    pair_create(&p, "t", g);
    GKVT_OK(gkv_writeback_start(p.s, "t", 100000));    /* flushes when asked */
    /* before: the whole tensor dirty, and adagrad state */
    pair_op(&p, "t", g, OP_WRITE_TAIL, &rs, 64);
    pair_op(&p, "t", g, OP_ADAGRAD, &rs, 2 * g.cr + 40);
    pair_op(&p, "t", g, OP_ASSIGN, &rs, 2 * g.cr + 40);
    {
        float *all = malloc(g.n * g.w * 4);
        for (size_t i = 0; i < g.n * g.w; i++)
            all[i] = (float)(i % 1013) * 0.5f;
        GKVT_OK(gkv_tensor_write(p.s, "t", LO, LO + g.n, all, g.n * g.w * 4));
        GKVT_OK(gkv_tensor_write(p.ref, "t", LO, LO + g.n, all, g.n * g.w * 4));
        free(all);
    }
    pair_op(&p, "t", g, OP_ADAGRAD, &rs, 2 * g.cr + 40);

    hrs = rs;
    hk.s = p.s;
    hk.f = &p.f;
    hk.g = g;
    hk.rs = rs;
    hk.calls = 0;
    hk.ops = ops_inside;
    GKVT_OK(gkv_store_stat_get(p.s, &st0));
    kv__wb_flush_hook = hook_ops;
    GKVT_OK(gkv_writeback_flush(p.s));
    kv__wb_flush_hook = NULL;
    assert_int_equal(hk.calls, 1);
    GKVT_OK(gkv_store_stat_get(p.s, &st1));
    if (getenv("GKVT_VERBOSE"))
        fprintf(stderr, "%s: map %llu -> %llu KiB in the flush\n", what,
                (unsigned long long)(st0.map_size >> 10),
                (unsigned long long)(st1.map_size >> 10));
    store_equal(p.s, p.ref, "t", what);                 /* at the boundary */
    GKVT_OK(gkv_store_verify(p.s, NULL, NULL));

    ops_inside(p.ref, &p.rf, g, &hrs);                  /* the hook's pushes */
    mirror_equal(p.s, p.ref, "t", what);
    GKVT_OK(gkv_writeback_flush(p.s));
    store_equal(p.s, p.ref, "t", what);
    GKVT_OK(gkv_store_verify(p.s, NULL, NULL));

    /* once more: the pending chunks now are those the last pushes made */
    hrs = hk.rs;
    pair_op(&p, "t", g, OP_ADAM, &rs, 2 * g.cr + 40);
    kv__wb_flush_hook = hook_ops;
    GKVT_OK(gkv_writeback_flush(p.s));
    kv__wb_flush_hook = NULL;
    store_equal(p.s, p.ref, "t", what);
    ops_inside(p.ref, &p.rf, g, &hrs);
    GKVT_OK(gkv_writeback_stop(p.s, "t"));
    store_equal(p.s, p.ref, "t", what);
    GKVT_OK(gkv_store_verify(p.s, NULL, NULL));
    pair_close(&p);
}

static void
test_adv_pushes_inside_flush(void **state)
{
    static const geo gs[] = {
        {3001, 50, 16, 1},  /* 188 chunks, the last of 9 rows */
        {3001, 50, 16, 0},
        {700, 12, 1, 1},    /* chunk_rows 1 */
        {997, 64, 7, 1},    /* chunk rows not a power of two, last of 3 */
        {40, 300, 64, 0},   /* one short chunk only */
    };
    uint64_t seed = gkvt_seed() ^ 0xad01;

    (void)state;
    for (size_t i = 0; i < sizeof gs / sizeof *gs; i++)
        hook_case(gs[i], seed + i);
}

/* ---- 2. other threads during the flush's transaction ---------------------
 * The hook starts a thread and returns at once, so that thread's calls run
 * while the flush writes: pushes of t (Adam for the first time: its state
 * is created in a write transaction of its own, which waits for the
 * flush's), a write-back start of another tensor u, pushes to u, and a
 * stop of u (which waits for the flush, then flushes u). */

struct bg {
    struct pair *p;
    geo g;
    uint64_t rs;
    pthread_t th;
    int started;
};

static struct bg bgx;

static void
bg_ops(gkv_store *s, struct failctx *f, geo g, uint64_t *rs, int with_u)
{
    static const int kinds[] = {
        OP_ADAM, OP_WRITE, OP_FAIL, OP_ADAGRAD, OP_ADAM, OP_MUL, OP_WRITE_TAIL
    };
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        do_op(s, f, "t", g, kinds[i], rs, 3 * g.cr);
        if (with_u)
            do_op(s, f, "u", g, kinds[(i + 3) % 7], rs, 3 * g.cr);
    }
}

static void *
bg_main(void *arg)
{
    struct bg *b = arg;

    GKVT_OK(gkv_writeback_start(b->p->s, "u", 100000));
    bg_ops(b->p->s, &b->p->f, b->g, &b->rs, 1);
    GKVT_OK(gkv_writeback_stop(b->p->s, "u"));
    return NULL;
}

static void
hook_spawn(gkv_store *s)
{
    if (s != bgx.p->s || bgx.started)
        return;
    bgx.started = 1;
    assert_int_equal(pthread_create(&bgx.th, NULL, bg_main, &bgx), 0);
}

static void
test_adv_threads_during_flush(void **state)
{
    const geo g = {4000, 64, 16, 1};  /* 1 MB: more than the map holds */
    struct pair p;
    uint64_t rs = gkvt_seed() ^ 0xad02, r2;

    (void)state;
    wd_arm("test_adv_threads_during_flush", 120);
    pair_open(&p, "wbathr", 1u << 20);
    pair_create(&p, "t", g);
    pair_create(&p, "u", g);
    GKVT_OK(gkv_writeback_start(p.s, "t", 100000));
    for (int k = 0; k < 4; k++)
        pair_op(&p, "t", g, k % 2 ? OP_WRITE : OP_ASSIGN, &rs, 4 * g.cr);
    {
        float *all = malloc(g.n * g.w * 4);
        for (size_t i = 0; i < g.n * g.w; i++)
            all[i] = (float)(i % 811) - 3.0f;
        GKVT_OK(gkv_tensor_write(p.s, "t", LO, LO + g.n, all, g.n * g.w * 4));
        GKVT_OK(gkv_tensor_write(p.ref, "t", LO, LO + g.n, all, g.n * g.w * 4));
        free(all);
    }
    memset(&bgx, 0, sizeof bgx);
    bgx.p = &p;
    bgx.g = g;
    bgx.rs = r2 = rs;
    kv__wb_flush_hook = hook_spawn;
    GKVT_OK(gkv_writeback_flush(p.s));
    kv__wb_flush_hook = NULL;
    assert_true(bgx.started);
    {
        gkv_store_stat sst;
        GKVT_OK(gkv_store_stat_get(p.s, &sst));
        assert_true(sst.map_size > (1u << 20));     /* it grew meanwhile */
    }
    store_equal(p.s, p.ref, "t", "at the flush's boundary");
    pthread_join(bgx.th, NULL);
    bg_ops(p.ref, &p.rf, g, &r2, 1);
    store_equal(p.s, p.ref, "u", "u after its stop");
    mirror_equal(p.s, p.ref, "t", "t's copy");
    GKVT_OK(gkv_writeback_flush(p.s));
    store_equal(p.s, p.ref, "t", "t after the next flush");
    GKVT_OK(gkv_store_verify(p.s, NULL, NULL));
    pair_close(&p);
    wd_disarm();
}

/* ---- 3. everything at once, snapshots checked against every state ---------
 * One thread makes a fixed sequence of operations of every kind on t (its
 * Adam and Adagrad state made before write-back starts), with the
 * background flusher at 1 ms. The reference's state after each operation
 * is hashed first (t and its four companions). Reader threads take
 * snapshots: each must hash to one of those states, never an earlier one
 * than the reader saw before. At the same time: start, pushes and stop of
 * another tensor u over and over, direct pushes to a tensor d (the map
 * starts at 1 MB, so it grows under all of this) and flush calls. */

#define STRESS_K 600

struct stress {
    struct pair *p;
    geo g;
    uint64_t hashes[STRESS_K + 1];
    int stop;
    long snaps, torn, n_u, n_d;
    uint64_t rs_u, rs_d;
};

static void *
stress_reader(void *arg)
{
    struct stress *x = arg;
    long last = 0;

    while (!__atomic_load_n(&x->stop, __ATOMIC_ACQUIRE)) {
        gkv_txn *tx;
        uint64_t h;
        long k;

        GKVT_OK(gkv_txn_begin(x->p->s, &tx));
        h = family_hash(x->p->s, tx, "t");
        gkv_txn_end(tx);
        for (k = last; k <= STRESS_K && x->hashes[k] != h; k++)
            ;
        if (k > STRESS_K) {
            if (__atomic_fetch_add(&x->torn, 1, __ATOMIC_RELAXED) == 0)
                fprintf(stderr, "snapshot %ld: t and its state are at no "
                        "push boundary at or after %ld\n", x->snaps, last);
        } else {
            last = k;
        }
        __atomic_fetch_add(&x->snaps, 1, __ATOMIC_RELAXED);
        usleep(300);
    }
    return NULL;
}

/* u: one thread starts and stops its write-back mode over and over, while
 * another pushes to it (so its pushes go to the copy or to the store,
 * racing the start and the stop): none may be lost. */
static void *
stress_ucycle(void *arg)
{
    struct stress *x = arg;
    uint64_t r = 77;

    if (getenv("GKVT_STRESS_NO_CYCLE") != NULL) {
        /* u in write-back mode throughout (a lighter variant: no
         * start and stop of u while the others run) */
        GKVT_OK(gkv_writeback_start(x->p->s, "u", 1));
        while (!__atomic_load_n(&x->stop, __ATOMIC_ACQUIRE))
            usleep(1000);
        return NULL;
    }
    while (!__atomic_load_n(&x->stop, __ATOMIC_ACQUIRE)) {
        GKVT_OK(gkv_writeback_start(x->p->s, "u", 1));
        usleep((useconds_t)(tools__splitmix64(&r) % 2000));
        GKVT_OK(gkv_writeback_stop(x->p->s, "u"));
        usleep((useconds_t)(tools__splitmix64(&r) % 1000));
    }
    return NULL;
}

static int
u_kind(uint64_t *rs)
{
    static const int kinds[] = {
        OP_ASSIGN, OP_ADAM, OP_WRITE, OP_ADAGRAD, OP_ADD, OP_MUL, OP_SGD
    };
    return kinds[tools__splitmix64(rs) % (sizeof kinds / sizeof *kinds)];
}

static void *
stress_upush(void *arg)
{
    struct stress *x = arg;
    struct failctx f = {0, 0};

    while (!__atomic_load_n(&x->stop, __ATOMIC_ACQUIRE)) {
        do_op(x->p->s, &f, "u", x->g, u_kind(&x->rs_u), &x->rs_u, 40);
        x->n_u++;
    }
    return NULL;
}

/* d: direct pushes (the map grows under them) and flush calls */
static void *
stress_d(void *arg)
{
    struct stress *x = arg;
    struct failctx f = {0, 0};

    while (!__atomic_load_n(&x->stop, __ATOMIC_ACQUIRE)) {
        do_op(x->p->s, &f, "d", x->g, OP_ADAGRAD, &x->rs_d, 200);
        x->n_d++;
        if (tools__splitmix64(&x->rs_d) % 4 == 0)
            GKVT_OK(gkv_writeback_flush(x->p->s));
    }
    return NULL;
}

static int
stress_kind(uint64_t k)
{
    static const int kinds[] = {
        OP_ADAM, OP_ASSIGN, OP_ADAGRAD, OP_WRITE, OP_FAIL, OP_MUL, OP_ADAM,
        OP_ADD, OP_WRITE_TAIL, OP_SGD, OP_ADAM, OP_ADAGRAD
    };
    return kinds[k % (sizeof kinds / sizeof *kinds)];
}

static void
test_adv_stress_boundaries(void **state)
{
    const geo g = {1200, 24, 8, 0};
    struct pair p;
    struct stress *x = calloc(1, sizeof *x);
    pthread_t rd[2], tu, tup, td;
    uint64_t rs = gkvt_seed() ^ 0xad03, rr, ru, rd0;
    gkv_txn *tx;

    (void)state;
    wd_arm("test_adv_stress_boundaries", 280);
    pair_open(&p, "wbastress", 1u << 20);
    pair_create(&p, "t", g);
    pair_create(&p, "u", g);
    pair_create(&p, "d", g);
    x->p = &p;
    x->g = g;
    x->rs_u = ru = rs ^ 1;
    x->rs_d = rd0 = rs ^ 2;
    /* state companions first, direct, on both */
    pair_op(&p, "t", g, OP_ADAM, &rs, 30);
    pair_op(&p, "t", g, OP_ADAGRAD, &rs, 30);
    rr = rs;
    /* the reference's states, one per operation */
    GKVT_OK(gkv_txn_begin(p.ref, &tx));
    x->hashes[0] = family_hash(p.ref, tx, "t");
    gkv_txn_end(tx);
    for (uint64_t k = 1; k <= STRESS_K; k++) {
        do_op(p.ref, &p.rf, "t", g, stress_kind(k), &rr, 3 * g.cr);
        GKVT_OK(gkv_txn_begin(p.ref, &tx));
        x->hashes[k] = family_hash(p.ref, tx, "t");
        gkv_txn_end(tx);
    }

    GKVT_OK(gkv_writeback_start(p.s, "t", 1));
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&rd[i], NULL, stress_reader, x), 0);
    assert_int_equal(pthread_create(&tu, NULL, stress_ucycle, x), 0);
    assert_int_equal(pthread_create(&tup, NULL, stress_upush, x), 0);
    assert_int_equal(pthread_create(&td, NULL, stress_d, x), 0);
    for (uint64_t k = 1; k <= STRESS_K; k++) {
        do_op(p.s, &p.f, "t", g, stress_kind(k), &rs, 3 * g.cr);
        if (k % 8 == 0)
            usleep(1500);      /* let the flusher, readers and u in */
    }
    usleep(20000);
    __atomic_store_n(&x->stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++)
        pthread_join(rd[i], NULL);
    pthread_join(tu, NULL);
    pthread_join(tup, NULL);
    pthread_join(td, NULL);
    {
        gkv_store_stat sst;
        GKVT_OK(gkv_store_stat_get(p.s, &sst));
        fprintf(stderr, "%ld snapshots checked; %ld pushes to u, %ld to d; "
                "map %llu MiB\n", x->snaps, x->n_u, x->n_d,
                (unsigned long long)(sst.map_size >> 20));
    }
    assert_int_equal(x->torn, 0);
    GKVT_OK(gkv_writeback_flush(p.s));
    store_equal(p.s, p.ref, "t", "after the last flush");
    /* u and d: every push there, whichever way it went */
    if (in_writeback(p.s, "u"))
        GKVT_OK(gkv_writeback_stop(p.s, "u"));
    for (long i = 0; i < x->n_u; i++)
        do_op(p.ref, &p.rf, "u", g, u_kind(&ru), &ru, 40);
    for (long i = 0; i < x->n_d; i++) {
        do_op(p.ref, &p.rf, "d", g, OP_ADAGRAD, &rd0, 200);
        (void)tools__splitmix64(&rd0);
    }
    store_equal(p.s, p.ref, "u", "u after start and stop raced its pushes");
    store_equal(p.s, p.ref, "d", "d");
    GKVT_OK(gkv_store_verify(p.s, NULL, NULL));
    free(x);
    pair_close(&p);
    wd_disarm();
}

/* ---- 3b. a flush that fails after pushes saved its chunks ---------------
 * The flush's transaction fills the map, and the map cannot grow while a
 * read snapshot of this handle stays open (kv__grow_wait_ms shortened):
 * the flush fails (GKV_EMAPFULL) after the hook's pushes saved some of its
 * chunks. The store keeps the state it had, every chunk of the flush is
 * dirty again, and once the snapshot ends the next flush writes every
 * push. (test_wb_flush_fails does this on a full tmpfs, as root only.) */

static void
test_adv_flush_fails_then_retries(void **state)
{
    const geo g = {3000, 64, 16, 1};     /* 768 KB, the map 256 KB */
    struct pair p;
    uint64_t rs = gkvt_seed() ^ 0xad07, hrs;
    unsigned wait0 = kv__grow_wait_ms;
    gkv_txn *held;
    gkv_err rc;

    (void)state;
    wd_arm("test_adv_flush_fails_then_retries", 120);
    pair_open(&p, "wbafail", 256u << 10);
    pair_create(&p, "t", g);
    GKVT_OK(gkv_writeback_start(p.s, "t", 100000));
    pair_op(&p, "t", g, OP_ADAGRAD, &rs, 200);
    {
        float *all = malloc(g.n * g.w * 4);
        for (size_t i = 0; i < g.n * g.w; i++)
            all[i] = (float)(i % 613) - 7.0f;
        GKVT_OK(gkv_tensor_write(p.s, "t", LO, LO + g.n, all, g.n * g.w * 4));
        GKVT_OK(gkv_tensor_write(p.ref, "t", LO, LO + g.n, all, g.n * g.w * 4));
        free(all);
    }
    GKVT_OK(gkv_txn_begin(p.s, &held));
    kv__grow_wait_ms = 300;
    hrs = rs;
    hk.s = p.s;
    hk.f = &p.f;
    hk.g = g;
    hk.rs = rs;
    hk.calls = 0;
    hk.ops = ops_inside;
    kv__wb_flush_hook = hook_ops;
    rc = gkv_writeback_flush(p.s);
    kv__wb_flush_hook = NULL;
    kv__grow_wait_ms = wait0;
    assert_int_equal(hk.calls, 1);
    assert_int_equal(rc, GKV_EMAPFULL);
    /* the store: nothing of t was written (the snapshot before, and now) */
    {
        size_t len = 0;
        unsigned char *b = gkvt_tensor_dump(p.s, held, "t", &len);
        assert_non_null(b);
        assert_true(all_zero(b, len));
        free(b);
    }
    gkv_txn_end(held);
    {
        gkv_txn *tx;
        size_t len = 0;
        unsigned char *b;

        GKVT_OK(gkv_txn_begin(p.s, &tx));
        b = gkvt_tensor_dump(p.s, tx, "t", &len);
        gkv_txn_end(tx);
        assert_non_null(b);
        assert_true(all_zero(b, len));
        free(b);
    }
    ops_inside(p.ref, &p.rf, g, &hrs);
    mirror_equal(p.s, p.ref, "t", "the copy after the failed flush");
    GKVT_OK(gkv_writeback_flush(p.s));
    store_equal(p.s, p.ref, "t", "after the flush that worked");
    GKVT_OK(gkv_store_verify(p.s, NULL, NULL));
    GKVT_OK(gkv_writeback_stop(p.s, "t"));
    pair_close(&p);
    wd_disarm();
}

/* ---- 3c. allocation failures in a flush ---------------------------------
 * The n-th allocation from the flush's start fails, for n = 0, 1, ...
 * until a flush goes through (the hook's pushes then run without faults):
 * every failed flush leaves the store as it was, loses no push (the next
 * flush writes them all), and leaks nothing. */

static void
hook_unfault(gkv_store *s)
{
    gkvt_alloc_fail_at(-1);
    hook_ops(s);
}

static void
test_adv_flush_alloc_failures(void **state)
{
    const geo g = {600, 16, 8, 0};
    struct pair p;
    uint64_t rs = gkvt_seed() ^ 0xad08;
    int ok = 0;

    (void)state;
    pair_open(&p, "wbaalloc", 0);
    pair_create(&p, "t", g);
    GKVT_OK(gkv_writeback_start(p.s, "t", 100000));
    GKVT_OK(gkv_writeback_flush(p.s));
    for (long n = 0; n < 50 && !ok; n++) {
        uint64_t hrs;
        long live;
        gkv_err rc;

        pair_op(&p, "t", g, OP_ADAGRAD, &rs, 40);
        pair_op(&p, "t", g, OP_WRITE, &rs, 40);
        live = gkvt_alloc_live();
        hrs = rs;
        hk.s = p.s;
        hk.f = &p.f;
        hk.g = g;
        hk.rs = rs;
        hk.calls = 0;
        hk.ops = ops_inside;
        gkvt_alloc_fail_at(n);
        kv__wb_flush_hook = hook_unfault;
        rc = gkv_writeback_flush(p.s);
        kv__wb_flush_hook = NULL;
        gkvt_alloc_fail_at(-1);
        if (hk.calls == 1) {
            rs = hk.rs;
            ops_inside(p.ref, &p.rf, g, &hrs);
        }
        if (rc == GKV_OK) {
            ok = 1;
        } else {
            assert_int_equal(rc, GKV_ENOMEM);
            assert_int_equal(hk.calls, 0);
            assert_int_equal(gkvt_alloc_live(), live);
        }
        mirror_equal(p.s, p.ref, "t", "the copy");
        GKVT_OK(gkv_writeback_flush(p.s));
        store_equal(p.s, p.ref, "t", "after a flush that worked");
    }
    assert_true(ok);
    GKVT_OK(gkv_store_verify(p.s, NULL, NULL));
    pair_close(&p);
}

/* ---- 4. a tensor replaced by another handle: its new state companion -----
 * Another process deletes t and creates a new t. This handle's copy of t
 * is stale; the next flush must drop it (kv/gkv_kv.h). But a push that
 * needs optimizer state loads the NEW t's companion (kv__wb_state_load ->
 * kv__state_create reads the store's record of t) next to the OLD copy of
 * t, and applied the push to both: the flush then skipped the old t
 * (gone) and wrote the state half of the push into the new tensor's
 * companion, which no one ever pushed to: half a push. Fixed: the state is
 * created and loaded only while the store's t is the copy's, and a flush
 * skips the companions of a gone tensor. */

static void
kvctl_ok(char *const argv[])
{
    char *err = NULL;
    int rc;

    gkvt_wb_unguard(argv[1]);           /* a writer that does not check */
    rc = gkvt_run(argv, NULL, 0, NULL, &err, 60);
    if (rc != 0)
        fail_msg("%s %s: exit %d: %s", argv[2], argv[3], rc, err ? err : "");
    free(err);
}

static void
replace_t(const char *dir, const char *range, const char *shape,
          const char *chunk, const char *init)
{
    char *rm[] = {(char *)gkvt_prog("kvctl"), (char *)dir, "rm", "t", NULL};
    char *mk[] = {(char *)gkvt_prog("kvctl"), (char *)dir, "create", "t",
                  "--dtype", "f32", "--shape", (char *)shape, "--range",
                  (char *)range, "--chunk-rows", (char *)chunk, "--init",
                  (char *)init, NULL};

    kvctl_ok(rm);
    kvctl_ok(mk);
}

/* A store in dir with t (sp) in write-back mode, pushed once and flushed:
 * the start of the replaced-tensor tests. */
static gkv_store *
replaced_setup(const char *dir, const gkv_tensor_spec *sp, geo g,
               struct failctx *f, uint64_t *rs)
{
    gkv_store *s;

    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    register_handlers(s, f);
    GKVT_OK(gkv_tensor_create(s, "t", sp));
    GKVT_OK(gkv_writeback_start(s, "t", 100000));
    do_op(s, f, "t", g, OP_ASSIGN, rs, 100);
    GKVT_OK(gkv_writeback_flush(s));
    return s;
}

static void
test_adv_replaced_tensor_state_untouched(void **state)
{
    const geo g = {3000, 8, 16, 0};
    char *dir = gkvt_mkdtemp("wbarepl");
    gkv_tensor_spec sp = mkspec(g);
    uint64_t rs = gkvt_seed() ^ 0xad04;
    struct failctx f = {0, 0};
    unsigned char *b;
    size_t len = 0;
    gkv_store *s;
    gkv_txn *tx;
    gkv_err rc;

    (void)state;
    s = replaced_setup(dir, &sp, g, &f, &rs);
    /* another process replaces t (same shape, all 5) */
    replace_t(dir, "100:3100", "8", "16", "const:5");
    /* this handle pushes on, with Adagrad, to its stale copy: the push
     * may be refused (GKV_ENOTFOUND) or go to the copy; either way this
     * handle must learn that t is gone, and the store keep nothing of it */
    {
        uint64_t ids[50];
        float rows[50 * 8];
        gkv_push_args pa = {"adagrad", 0.05, 0, 0, 0, 0};
        gkv_err prc;

        for (size_t i = 0; i < 50; i++) {
            ids[i] = LO + tools__splitmix64(&rs) % g.n;
            for (size_t j = 0; j < 8; j++)
                rows[i * 8 + j] = 0.5f + (float)j;
        }
        prc = gkv_tensor_push(s, "t", ids, 50, rows, sizeof rows, &pa);
        assert_true(prc == GKV_OK || prc == GKV_ENOTFOUND);
        rc = gkv_writeback_flush(s);
        assert_true(rc == GKV_OK || rc == GKV_ENOTFOUND);
        assert_true(prc == GKV_ENOTFOUND || rc == GKV_ENOTFOUND);
    }
    /* the new t, and its state, as the other process left them */
    GKVT_OK(gkv_txn_begin(s, &tx));
    b = gkvt_tensor_dump(s, tx, "t", &len);
    assert_non_null(b);
    for (size_t i = 0; i < len / 4; i++)
        assert_true(((float *)b)[i] == 5.0f);
    free(b);
    b = gkvt_tensor_dump(s, tx, "t#adagrad_s", &len);
    if (b != NULL && !all_zero(b, len))
        fail_msg("the new t's '#adagrad_s' holds the optimizer state of a "
                 "push this handle made to the old, dropped copy of t (the "
                 "push's weights were dropped, its state written)");
    free(b);
    gkv_txn_end(tx);
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* The same with a new t of another shape: fewer rows. The state mirror is
 * loaded with the new geometry (16 rows) while pushes are checked against
 * the old copy's (3000 rows), so a push of a high ID writes far outside
 * the state mirror and its dirty map. The out-of-bounds push runs in a
 * child process (it may crash, or corrupt memory silently: ASan reports a
 * heap-buffer-overflow in mirror_dirty); the parent checks the state
 * mirror's geometry. */
static void
test_adv_replaced_tensor_state_geometry(void **state)
{
    const geo g = {3000, 8, 16, 0};
    char *dir = gkvt_mkdtemp("wbarepl2");
    gkv_tensor_spec sp = mkspec(g);
    uint64_t rs = gkvt_seed() ^ 0xad05, id = LO + 2990;
    struct failctx f = {0, 0};
    gkv_push_args pa = {"adagrad", 0.05, 0, 0, 0, 0};
    float row[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const kv_mirror *m0, *m1;
    int st = 0, bad;
    gkv_store *s;
    gkv_err rc;
    pid_t pid;

    (void)state;
    s = replaced_setup(dir, &sp, g, &f, &rs);
    replace_t(dir, "100:116", "8", "16", "zeros");
    /* a push with a wrong length: refused, but it loads the state first */
    rc = gkv_tensor_push(s, "t", &id, 1, row, sizeof row - 4, &pa);
    assert_true(rc == GKV_ESHAPE || rc == GKV_ENOTFOUND);
    /* the real push, in a child (no LMDB call on this path) */
    fflush(stderr);
    if ((pid = fork()) == 0) {
        /* cmocka's handlers would carry on with its tests in here */
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        signal(SIGABRT, SIG_DFL);
        signal(SIGILL, SIG_DFL);
        signal(SIGFPE, SIG_DFL);
        uint64_t near = LO + 20;     /* the state row lies in the
                                      * mirror's page: only its dirty
                                      * map (1 byte) is overrun */
        alarm(20);
        gkv_tensor_push(s, "t", &near, 1, row, sizeof row, &pa);
        gkv_tensor_push(s, "t", &id, 1, row, sizeof row, &pa);
        _exit(0);
    }
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    fprintf(stderr, "pushes of IDs %u and %llu in a child: %s %d\n",
            LO + 20, (unsigned long long)id,
            WIFEXITED(st) ? "exit" : "signal",
            WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    pthread_rwlock_rdlock(&s->st_wb_lock);
    {
        kv_wb *w = kv__wb_find(s, "t");
        m0 = w ? &w->m[0] : NULL;
        m1 = w ? kv__wb_state(w, "#adagrad_s") : NULL;
        bad = m0 != NULL && m1 != NULL &&
              (m1->r.lo != m0->r.lo || m1->r.hi != m0->r.hi ||
               m1->r.chunk_rows != m0->r.chunk_rows ||
               m1->r.row_elems != m0->r.row_elems);
        if (bad)
            fprintf(stderr, "copy of t: rows [%llu, %llu); its adagrad state: "
                    "rows [%llu, %llu)\n", (unsigned long long)m0->r.lo,
                    (unsigned long long)m0->r.hi, (unsigned long long)m1->r.lo,
                    (unsigned long long)m1->r.hi);
    }
    pthread_rwlock_unlock(&s->st_wb_lock);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("the push crashed (or ASan stopped it): it wrote outside "
                 "the state copy");
    if (bad)
        fail_msg("the write-back copy of t has optimizer state of another "
                 "shape: a push to a high ID writes outside it");
    gkv_writeback_stop(s, "t");
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* ---- 5. a tensor dropped by the background flusher --------------------
 * kv/gkv_kv.h: gkv_writeback_flush() "is how to learn that writing works.
 * GKV_ENOTFOUND: the others were written, but a tensor was deleted or
 * replaced by another handle, and its copy dropped". With a background
 * flusher (every 1 ms here, 10 ms by default) it is nearly always that
 * thread's flush that finds the tensor gone and drops the copy, with the
 * pushes not yet written; the message went to the flusher thread, and the
 * caller's next gkv_writeback_flush() said GKV_OK. Fixed: drops are noted
 * on the store and reported by the next flush or stop call. */

static int
in_writeback(gkv_store *s, const char *name)
{
    int in;

    pthread_rwlock_rdlock(&s->st_wb_lock);
    in = kv__wb_find(s, name) != NULL;
    pthread_rwlock_unlock(&s->st_wb_lock);
    return in;
}

static void
test_adv_background_drop_reported(void **state)
{
    const geo g = {3000, 8, 16, 0};
    char *dir = gkvt_mkdtemp("wbabgdrop");
    gkv_tensor_spec sp = mkspec(g);
    uint64_t rs = gkvt_seed() ^ 0xad06;
    struct failctx f = {0, 0};
    gkv_store *s;
    gkv_err rc;
    int waited = 0;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    register_handlers(s, &f);
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_tensor_create(s, "u", &sp));
    GKVT_OK(gkv_writeback_start(s, "t", 1));
    GKVT_OK(gkv_writeback_start(s, "u", 1));
    GKVT_OK(gkv_writeback_flush(s));
    {
        char *rm[] = {(char *)gkvt_prog("kvctl"), dir, "rm", "t", NULL};
        kvctl_ok(rm);
    }
    /* pushes the store will never get: t is gone */
    do_op(s, &f, "t", g, OP_ASSIGN, &rs, 100);
    do_op(s, &f, "u", g, OP_ASSIGN, &rs, 100);
    /* until the background flusher has found t gone, or 2 s (some
     * hundreds of its flushes) */
    while (in_writeback(s, "t") && waited++ < 400)
        usleep(5000);
    fprintf(stderr, "t %s in write-back mode after %d ms\n",
            in_writeback(s, "t") ? "still" : "no longer", waited * 5);
    rc = gkv_writeback_flush(s);
    if (rc != GKV_ENOTFOUND)
        fail_msg("a flusher dropped t's copy with a push not yet written, and "
                 "gkv_writeback_flush() says %s (\"%s\"): the caller never "
                 "learns", gkv_err_name(rc), gkv_store_errmsg(s));
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* ---- 6. what stays resident of the stage -------------------------------
 * The commit: "no copy of the dirty data stays resident"; DESIGN.md: "the
 * stage is address space, touched only by saves". But the stage is kept
 * between flushes, and a save copied chunk c to the stage at the offset
 * the flush gave c (its place among all pending chunks). Pushes during
 * successive flushes that hit different chunks touched different pages,
 * and each stayed resident: after 16 flushes, each with pushes saving 1 MB
 * of other chunks, 16 MB of copies stayed resident for good. Fixed: saves
 * fill the stage from the front. What one flush saves is 1 MB; allowed:
 * 6 MB (2 MB huge pages at both ends). */

#define RS_W   1024u            /* 4 KiB rows */
#define RS_CR  4u               /* 16 KiB chunks */
#define RS_N   4096u            /* 16 MiB, 1024 chunks */
#define RS_PER 64u              /* chunks saved per flush: 1 MiB */

static int rs_round;

static void
hook_save_round(gkv_store *s)
{
    static float row[RS_W];
    uint64_t ids[RS_PER];

    if (s != hk.s)
        return;
    hk.calls++;
    for (unsigned i = 0; i < RS_PER; i++)
        ids[i] = LO + ((uint64_t)rs_round * RS_PER + i) * RS_CR;
    for (unsigned j = 0; j < RS_W; j++)
        row[j] = (float)rs_round;
    for (unsigned i = 0; i < RS_PER; i++)
        GKVT_OK(gkv_tensor_push(s, "t", &ids[i], 1, row, sizeof row, NULL));
}

static size_t
resident(const void *p, size_t len)
{
    long pg = sysconf(_SC_PAGESIZE);
    size_t n = (len + (size_t)pg - 1) / (size_t)pg, r = 0;
    unsigned char *v = malloc(n ? n : 1);

    assert_int_equal(mincore((void *)p, len, v), 0);
    for (size_t i = 0; i < n; i++)
        r += v[i] & 1;
    free(v);
    return r * (size_t)pg;
}

static void
test_adv_stage_residency(void **state)
{
    const geo g = {RS_N, RS_W, RS_CR, 0};
    char *dir = gkvt_mkdtemp("wbaresid");
    gkv_tensor_spec sp = mkspec(g);
    float *all = malloc((size_t)RS_N * RS_W * 4);
    size_t res;
    gkv_store *s;

    (void)state;
    for (size_t i = 0; i < (size_t)RS_N * RS_W; i++)
        all[i] = (float)(i % 331);
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_writeback_start(s, "t", 100000));
    /* a first flush of everything: the stage gets its size, no saves */
    GKVT_OK(gkv_tensor_write(s, "t", LO, LO + RS_N, all, (size_t)RS_N * RS_W * 4));
    GKVT_OK(gkv_writeback_flush(s));
    assert_true(s->st_wb_stage_len >= (size_t)RS_N * RS_W * 4);
    assert_true(resident(s->st_wb_stage, s->st_wb_stage_len) <= (2u << 20));
    hk.s = s;
    hk.calls = 0;
    kv__wb_flush_hook = hook_save_round;
    for (rs_round = 0; rs_round < 16; rs_round++) {
        /* rows of chunks [0, (round + 1) x 64) dirty: the saved chunks
         * sit at offsets [round, round + 1) MiB of the stage */
        size_t nr = (size_t)(rs_round + 1) * RS_PER * RS_CR;
        GKVT_OK(gkv_tensor_write(s, "t", LO, LO + nr, all, nr * RS_W * 4));
        GKVT_OK(gkv_writeback_flush(s));
    }
    kv__wb_flush_hook = NULL;
    assert_int_equal(hk.calls, 16);
    res = resident(s->st_wb_stage, s->st_wb_stage_len);
    fprintf(stderr, "stage: %zu MiB, %zu KiB of it resident after 16 flushes "
            "that each saved 1 MiB\n", s->st_wb_stage_len >> 20, res >> 10);
    if (res > (6u << 20))
        fail_msg("%zu KiB of saved copies stay resident between flushes "
                 "(one flush saved 1024 KiB)", res >> 10);
    GKVT_OK(gkv_writeback_stop(s, "t"));
    free(all);
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* ---- 7. the list head written without an atomic store -------------------
 * kv__wb_any() reads s->st_wb with no lock (an atomic load: "a lock-free
 * hint") in every push, pull and range write; gkv_writeback_stop() (and
 * the flush's drop_gone) unlink the first entry with a plain store
 * (*pp = w->next where pp == &s->st_wb). It was a data race under
 * ThreadSanitizer (now an atomic store). */

struct headrace {
    gkv_store *s;
    int stop;
};

static void *
head_pusher(void *arg)
{
    struct headrace *h = arg;
    uint64_t id = LO + 5;
    float row[8] = {0};

    while (!__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE))
        GKVT_OK(gkv_tensor_push(h->s, "d", &id, 1, row, sizeof row, NULL));
    return NULL;
}

static void
test_adv_wb_head_race(void **state)
{
    const geo g = {64, 8, 16, 0};
    char *dir = gkvt_mkdtemp("wbahead");
    gkv_tensor_spec sp = mkspec(g);
    struct headrace h = {NULL, 0};
    pthread_t th;

    (void)state;
    wd_arm("test_adv_wb_head_race", 120);
    GKVT_OK(gkv_store_open(&h.s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(h.s, "u", &sp));
    GKVT_OK(gkv_tensor_create(h.s, "d", &sp));
    assert_int_equal(pthread_create(&th, NULL, head_pusher, &h), 0);
    for (int i = 0; i < 100; i++) {
        GKVT_OK(gkv_writeback_start(h.s, "u", 100000));
        GKVT_OK(gkv_writeback_stop(h.s, "u"));
    }
    __atomic_store_n(&h.stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    gkv_store_close(h.s);
    gkvt_rmtree(dir);
    wd_disarm();
}

/* ---- 7b. a stop while another thread keeps pushing ----------------------
 * gkv_writeback_stop() flushes, then unlinks the tensor only if no chunk
 * is dirty; else it calls itself again ("pushes raced with the stop: try
 * again"). A flush no longer holds pushes back at all, so a thread that
 * pushes without a pause dirties chunks during the stop's flushes: the
 * stop must still return while the pushes go on (it does, after up to
 * about 2 s here, and fewer recursions than a 256 KiB stack holds:
 * GKVT_STOP_STACK_KB=256), and the store must then hold every push,
 * whether it went to the copy or, after the stop, to the store. If the
 * stop has not returned after 10 s, the pusher stops and the test fails. */

struct stopper {
    gkv_store *s;
    int done;
    long pushes;
    gkv_err rc;
};

static void *
stop_thread(void *arg)
{
    struct stopper *x = arg;

    x->rc = gkv_writeback_stop(x->s, "t");
    __atomic_store_n(&x->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void
stop_push(gkv_store *s, long k)
{
    uint64_t id = LO + (uint64_t)(k * 7 % 600);
    float row[16];

    for (int j = 0; j < 16; j++)
        row[j] = (float)k + (float)j / 16;
    GKVT_OK(gkv_tensor_push(s, "t", &id, 1, row, sizeof row, NULL));
}

static void
test_adv_stop_while_pushing(void **state)
{
    const geo g = {600, 16, 8, 0};
    struct pair p;
    struct stopper x = {NULL, 0, 0, GKV_OK};
    pthread_attr_t at;
    pthread_t th;
    double t0;
    int returned;

    (void)state;
    wd_arm("test_adv_stop_while_pushing", 120);
    pair_open(&p, "wbastop", 0);
    pair_create(&p, "t", g);
    x.s = p.s;
    GKVT_OK(gkv_writeback_start(p.s, "t", 100000));
    for (long k = 0; k < 50; k++)
        stop_push(p.s, x.pushes++);
    pthread_attr_init(&at);
    if (getenv("GKVT_STOP_STACK_KB") != NULL)     /* try a smaller one */
        pthread_attr_setstacksize(&at, (size_t)atol(getenv("GKVT_STOP_STACK_KB")) << 10);
    else
        pthread_attr_setstacksize(&at, 512u << 20);   /* for the recursion */
    assert_int_equal(pthread_create(&th, &at, stop_thread, &x), 0);
    pthread_attr_destroy(&at);
    /* push (without a pause) until the stop returns, or for 10 s */
    t0 = tools__now_s();
    while (!__atomic_load_n(&x.done, __ATOMIC_ACQUIRE)) {
        stop_push(p.s, x.pushes++);
        if (x.pushes % 256 == 0 && tools__now_s() - t0 > 10)
            break;
    }
    returned = __atomic_load_n(&x.done, __ATOMIC_ACQUIRE);
    pthread_join(th, NULL);
    fprintf(stderr, "%ld pushes; the stop %s\n", x.pushes,
            returned ? "returned while they went on" : "returned only once "
            "they ended");
    GKVT_OK(x.rc);
    for (long k = 0; k < x.pushes; k++)
        stop_push(p.ref, k);
    store_equal(p.s, p.ref, "t", "after the stop");
    if (!returned)
        fail_msg("gkv_writeback_stop() did not return in 10 s while another "
                 "thread pushed to the tensor");
    pair_close(&p);
    wd_disarm();
}

/* ---- 8. reading optimizer state without a snapshot ----------------------
 * kv/gkv_kv.h: gkv_writeback_start() "copies tensor 'name' and its
 * optimizer state into RAM"; "pulls and range reads without a snapshot (tx
 * NULL) read the RAM copy, so they see every push". wb_read() looks the
 * name up among the tensors only (kv__wb_find compares m[0].name), so a
 * read of "t#adagrad_s" without a snapshot reads the store as last
 * flushed: the weights it read were after the push, the state before it.
 * Fixed: a state name of a write-back tensor reads its RAM copy. */

static void
test_adv_state_read_sees_copy(void **state)
{
    const geo g = {600, 16, 8, 0};
    struct pair p;
    uint64_t rs = gkvt_seed() ^ 0xad09;

    (void)state;
    pair_open(&p, "wbastate", 0);
    pair_create(&p, "t", g);
    GKVT_OK(gkv_writeback_start(p.s, "t", 100000));
    pair_op(&p, "t", g, OP_ADAGRAD, &rs, 100);
    GKVT_OK(gkv_writeback_flush(p.s));
    pair_op(&p, "t", g, OP_ADAGRAD, &rs, 100);
    mirror_equal(p.s, p.ref, "t", "weights read without a snapshot");
    mirror_equal(p.s, p.ref, "t#adagrad_s", "state read without a snapshot");
    GKVT_OK(gkv_writeback_stop(p.s, "t"));
    pair_close(&p);
}

/* GKVT_ONLY and GKVT_SKIP: comma-separated fnmatch(3) patterns of test
 * names to run, or to leave out (e.g. GKVT_SKIP='*replaced*,*residency*'). */
static int
name_in(const char *name, const char *list)
{
    char buf[512], *save = NULL;

    snprintf(buf, sizeof buf, "%s", list);
    for (char *pat = strtok_r(buf, ",", &save); pat != NULL;
         pat = strtok_r(NULL, ",", &save))
        if (fnmatch(pat, name, 0) == 0)
            return 1;
    return 0;
}

int
main(void)
{
    /* The last five and test_adv_wb_head_race (under ThreadSanitizer)
     * failed before the fixes their comments name. */
    const struct CMUnitTest all[] = {
        cmocka_unit_test(test_adv_pushes_inside_flush),
        cmocka_unit_test(test_adv_threads_during_flush),
        cmocka_unit_test(test_adv_stress_boundaries),
        cmocka_unit_test(test_adv_flush_fails_then_retries),
        cmocka_unit_test(test_adv_flush_alloc_failures),
        cmocka_unit_test(test_adv_wb_head_race),
        cmocka_unit_test(test_adv_stop_while_pushing),
        cmocka_unit_test(test_adv_background_drop_reported),
        cmocka_unit_test(test_adv_stage_residency),
        cmocka_unit_test(test_adv_state_read_sees_copy),
        cmocka_unit_test(test_adv_replaced_tensor_state_untouched),
        cmocka_unit_test(test_adv_replaced_tensor_state_geometry),
    };
    struct CMUnitTest run[sizeof all / sizeof *all];
    const char *only = getenv("GKVT_ONLY"), *skip = getenv("GKVT_SKIP");
    size_t n = 0;

    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if ((only == NULL || name_in(all[i].name, only)) &&
            (skip == NULL || !name_in(all[i].name, skip)))
            run[n++] = all[i];
    return _cmocka_run_group_tests("kv_wb_edge_test", run, n, NULL, NULL);
}
