/* kv_wb_test.c - write-back mode (kv/wb.c) against direct pushes and a
 * reference, its bad inputs, crash consistency; and the regression test for
 * optimizer pushes larger than LMDB's dirty-page limit; pushes during a
 * flush (the flush writes the state it began at). */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "gkvt.h"
#include "kv_int.h"     /* kv__wb_flush_hook */

#define W 8            /* row width (f32) of the small tensors */
#define N 3000         /* rows */

static gkv_tensor_spec
spec(uint64_t n, uint64_t w, unsigned flags)
{
    gkv_tensor_spec sp;

    memset(&sp, 0, sizeof sp);
    sp.dtype = GKV_F32;
    sp.ndim = 1;
    sp.shape[0] = w;
    sp.lo = 100;
    sp.hi = 100 + n;
    sp.flags = flags;
    sp.init = GKV_INIT_UNIFORM;
    sp.a = -1;
    sp.b = 1;
    sp.seed = 7;
    return sp;
}

static float *
dump(gkv_store *s, gkv_txn *tx, const char *name, uint64_t n, uint64_t w)
{
    float *b = malloc(n * w * sizeof *b);
    GKVT_OK(gkv_tensor_read(s, tx, name, 100, 100 + n, b, n * w * sizeof *b));
    return b;
}

static void
rand_push(uint64_t *rs, uint64_t *ids, float *rows, size_t n, uint64_t range,
          uint64_t w)
{
    for (size_t i = 0; i < n; i++) {
        ids[i] = 100 + gkvt_rand(rs) % range;
        for (uint64_t j = 0; j < w; j++)
            rows[i * w + j] = (float)((int)(gkvt_rand(rs) % 2001) - 1000) / 1000.0f;
    }
}

static gkv_err
h_mul(void *ctx, const gkv_tensor_desc *d, uint64_t id, void *row, const void *in)
{
    float *r = row;
    const float *x = in;
    (void)ctx;
    for (uint64_t j = 0; j < d->row_elems; j++)
        r[j] = r[j] * 0.5f + x[j];
    return GKV_OK;
}

static gkv_err
h_fail(void *ctx, const gkv_tensor_desc *d, uint64_t id, void *row, const void *in)
{
    int *count = ctx;
    memcpy(row, in, d->row_bytes);   /* changes the row, then fails */
    return ++*count == 40 ? GKV_EINVAL : GKV_OK;
}

/* The same pushes, every handler, on a direct tensor and a write-back one:
 * identical rows through pulls (RAM), through a snapshot after a flush
 * (store), and after close and reopen. */
static void
test_wb_equals_direct(void **state)
{
    static const char *const hs[] = {"assign", "add", "sgd", "adagrad",
                                     "adam", "mul"};
    char *dir = gkvt_mkdtemp("wb");
    uint64_t rs = gkvt_seed(), ids[500];
    float rows[500 * W];
    gkv_tensor_spec sp = spec(N, W, GKV_TENSOR_HOT);
    gkv_store *s;
    gkv_txn *tx;
    float *a, *b;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_handler_register(s, "mul", h_mul, NULL));
    GKVT_OK(gkv_tensor_create(s, "direct", &sp));
    GKVT_OK(gkv_tensor_create(s, "wb", &sp));
    GKVT_OK(gkv_writeback_start(s, "wb", 100000));   /* flushes only when asked */
    for (int round = 0; round < 24; round++) {
        gkv_push_args pa = {hs[round % 6], 0.05, 0, 0, 0, 0};
        size_t n = 1 + gkvt_rand(&rs) % 500;

        rand_push(&rs, ids, rows, n, N, W);
        ids[n / 2] = ids[0];                         /* a duplicate */
        GKVT_OK(gkv_tensor_push(s, "direct", ids, n, rows, n * W * 4, &pa));
        GKVT_OK(gkv_tensor_push(s, "wb", ids, n, rows, n * W * 4, &pa));
        if (round == 10) {                           /* a range write too */
            GKVT_OK(gkv_tensor_write(s, "direct", 150, 160, rows, 10 * W * 4));
            GKVT_OK(gkv_tensor_write(s, "wb", 150, 160, rows, 10 * W * 4));
        }
        /* pulls (RAM) see every push at once */
        a = dump(s, NULL, "direct", N, W);
        b = dump(s, NULL, "wb", N, W);
        assert_memory_equal(a, b, N * W * 4);
        free(a);
        free(b);
    }
    /* a snapshot sees the store, which has not been flushed yet */
    GKVT_OK(gkv_txn_begin(s, &tx));
    a = dump(s, NULL, "direct", N, W);
    b = dump(s, tx, "wb", N, W);
    assert_true(memcmp(a, b, N * W * 4) != 0);
    free(b);
    gkv_txn_end(tx);
    GKVT_OK(gkv_writeback_flush(s));
    GKVT_OK(gkv_txn_begin(s, &tx));
    b = dump(s, tx, "wb", N, W);
    assert_memory_equal(a, b, N * W * 4);
    free(b);
    /* the optimizer state was flushed too */
    {
        float sa[N * W], sb[N * W];
        GKVT_OK(gkv_tensor_read(s, tx, "direct#adam_m", 100, 100 + N, sa, sizeof sa));
        GKVT_OK(gkv_tensor_read(s, tx, "wb#adam_m", 100, 100 + N, sb, sizeof sb));
        assert_memory_equal(sa, sb, sizeof sa);
    }
    gkv_txn_end(tx);
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    /* pushes after the flush reach the store at close */
    rand_push(&rs, ids, rows, 100, N, W);
    GKVT_OK(gkv_tensor_push(s, "direct", ids, 100, rows, 100 * W * 4, NULL));
    GKVT_OK(gkv_tensor_push(s, "wb", ids, 100, rows, 100 * W * 4, NULL));
    free(a);
    a = dump(s, NULL, "direct", N, W);
    gkv_store_close(s);
    GKVT_OK(gkv_store_open(&s, dir, GKV_RDONLY, NULL));
    b = dump(s, NULL, "wb", N, W);
    assert_memory_equal(a, b, N * W * 4);
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    free(a);
    free(b);
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* Bad inputs and calls that must be refused, leaving everything as it was. */
static void
test_wb_bad_input(void **state)
{
    char *dir = gkvt_mkdtemp("wbbad");
    gkv_tensor_spec sp = spec(N, W, 0);
    uint64_t ids[100], bad = 5;
    float rows[100 * W], *a, *b;
    uint64_t rs = gkvt_seed() ^ 1;
    gkv_push_args pa = {"failing", 0, 0, 0, 0, 0};
    int count = 0;
    gkv_store *s;
    gkv_tensor_desc d;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_handler_register(s, "failing", h_fail, &count));
    assert_int_equal(gkv_writeback_start(s, "nope", 0), GKV_ENOTFOUND);
    assert_int_equal(gkv_writeback_start(s, "bad name", 0), GKV_EINVAL);
    assert_int_equal(gkv_writeback_stop(s, "t"), GKV_ENOTFOUND);
    GKVT_OK(gkv_writeback_start(s, "t", 100000));
    assert_int_equal(gkv_writeback_start(s, "t", 0), GKV_EEXIST);
    assert_int_equal(gkv_tensor_delete(s, "t"), GKV_EBUSY);
    assert_non_null(strstr(gkv_store_errmsg(s), "write-back"));
    assert_int_equal(gkv_tensor_rename(s, "t", "u"), GKV_EBUSY);
    GKVT_OK(gkv_tensor_info(s, NULL, "t", &d));

    a = dump(s, NULL, "t", N, W);
    rand_push(&rs, ids, rows, 100, N, W);
    ids[70] = 100 + N;                                /* out of range */
    assert_int_equal(gkv_tensor_push(s, "t", ids, 100, rows, sizeof rows, NULL),
                     GKV_ERANGE);
    ids[70] = 100;
    assert_int_equal(gkv_tensor_push(s, "t", ids, 100, rows, sizeof rows - 4, NULL),
                     GKV_ESHAPE);
    /* a custom handler that fails at its 40th row: nothing changes */
    assert_int_equal(gkv_tensor_push(s, "t", ids, 100, rows, sizeof rows, &pa),
                     GKV_EHANDLER);
    assert_int_equal(gkv_tensor_pull(s, NULL, "t", &bad, 1, rows, W * 4), GKV_ERANGE);
    /* hi itself is outside (the mirror has no row there), and the message
     * names the ID and its index in the pull */
    ids[0] = 100;
    ids[1] = 100 + N - 1;
    ids[2] = 100 + N;
    assert_int_equal(gkv_tensor_pull(s, NULL, "t", ids, 3, rows, 3 * W * 4),
                     GKV_ERANGE);
    assert_non_null(strstr(gkv_store_errmsg(s), "ID 3100 (index 2) is outside "
                           "[100, 3100)"));
    GKVT_OK(gkv_tensor_pull(s, NULL, "t", ids, 2, rows, 2 * W * 4));
    assert_int_equal(gkv_tensor_write(s, "t", 99, 101, rows, 2 * W * 4), GKV_ERANGE);
    b = dump(s, NULL, "t", N, W);
    assert_memory_equal(a, b, N * W * 4);
    free(b);
    GKVT_OK(gkv_writeback_stop(s, "t"));
    b = dump(s, NULL, "t", N, W);
    assert_memory_equal(a, b, N * W * 4);
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    GKVT_OK(gkv_tensor_rename(s, "t", "u"));         /* allowed again */
    free(a);
    free(b);
    gkv_store_close(s);
    GKVT_OK(gkv_store_open(&s, dir, GKV_RDONLY, NULL));
    assert_int_equal(gkv_writeback_start(s, "u", 0), GKV_ERDONLY);
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* The background thread flushes by itself: a snapshot sees a push within a
 * few intervals, without any flush call. */
static void
test_wb_background(void **state)
{
    char *dir = gkvt_mkdtemp("wbbg");
    gkv_tensor_spec sp = spec(N, W, 0);
    uint64_t id = 2222;
    float row[W], got[W];
    gkv_store *s;
    int seen = 0;

    (void)state;
    for (int j = 0; j < W; j++)
        row[j] = 42.0f + (float)j;
    /* durable: flush and sync also fsync (they once recursed forever) */
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_writeback_start(s, "t", 5));
    GKVT_OK(gkv_writeback_flush(s));
    GKVT_OK(gkv_store_sync(s));
    GKVT_OK(gkv_tensor_push(s, "t", &id, 1, row, sizeof row, NULL));
    for (double end = gkvt_now_s() + 30; !seen && gkvt_now_s() < end;) {
        gkv_txn *tx;
        GKVT_OK(gkv_txn_begin(s, &tx));
        GKVT_OK(gkv_tensor_pull(s, tx, "t", &id, 1, got, sizeof got));
        gkv_txn_end(tx);
        seen = memcmp(got, row, sizeof row) == 0;
        if (!seen)
            usleep(5000);
    }
    assert_true(seen);
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* gkv_store_sync() flushes write-back tensors before it syncs: after it,
 * another process opening the store sees the push, while the handle stays
 * open (the interval is long, so only the sync can have written it). */
static void
test_wb_sync_flushes(void **state)
{
    char *dir = gkvt_mkdtemp("wbsync");
    gkv_tensor_spec sp = spec(N, W, 0);
    uint64_t id = 1234;
    float row[W], old[W], got[W];
    gkv_store *s;
    gkv_txn *tx;
    pid_t pid;
    int st;

    (void)state;
    for (int j = 0; j < W; j++)
        row[j] = 7.0f + (float)j;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_tensor_pull(s, NULL, "t", &id, 1, old, sizeof old));
    assert_memory_not_equal(old, row, sizeof row);
    GKVT_OK(gkv_writeback_start(s, "t", 100000));
    GKVT_OK(gkv_tensor_push(s, "t", &id, 1, row, sizeof row, NULL));
    /* not in the store yet: a snapshot still reads the old row */
    GKVT_OK(gkv_txn_begin(s, &tx));
    GKVT_OK(gkv_tensor_pull(s, tx, "t", &id, 1, got, sizeof got));
    gkv_txn_end(tx);
    assert_memory_equal(got, old, sizeof old);
    GKVT_OK(gkv_store_sync(s));
    GKVT_OK(gkv_txn_begin(s, &tx));
    GKVT_OK(gkv_tensor_pull(s, tx, "t", &id, 1, got, sizeof got));
    gkv_txn_end(tx);
    assert_memory_equal(got, row, sizeof row);
    /* a forked child opens its own read-only handle: the exit status says
     * whether it read the pushed row */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        gkv_store *c;
        float cg[W];
        _exit(gkv_store_open(&c, dir, GKV_RDONLY, NULL) == GKV_OK &&
              gkv_tensor_pull(c, NULL, "t", &id, 1, cg, sizeof cg) == GKV_OK &&
              memcmp(cg, row, sizeof row) == 0 ? 0 : 1);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    GKVT_OK(gkv_writeback_stop(s, "t"));
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* kill -9 while pushing in write-back mode: the store always holds the
 * state after some whole push k, with k at least the last push a flush
 * call confirmed and at most the last push made. */
static void
test_wb_crash(void **state)
{
    enum { P = 3000, B = 200 };
    char *dir = gkvt_mkdtemp("wbcrash");
    gkv_tensor_spec sp = spec(N, W, GKV_TENSOR_HOT);
    uint64_t seed = gkvt_seed() ^ 3;
    gkv_store *s;

    (void)state;
    sp.init = GKV_INIT_ZEROS;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    gkv_store_close(s);
    for (int kill_round = 0; kill_round < 6; kill_round++) {
        int pfd[2];
        pid_t pid;
        long made = -1, flushed = -1;
        uint64_t rs = seed + (uint64_t)kill_round, ids[B];
        float rows[B * W], *ref, *got;
        int k, ok = 0;

        assert_int_equal(pipe(pfd), 0);
        if ((pid = fork()) == 0) {
            uint64_t crs = rs;
            close(pfd[0]);
            if (gkv_store_open(&s, dir, GKV_NOSYNC, NULL) != GKV_OK ||
                gkv_writeback_start(s, "t", 1) != GKV_OK)
                _exit(3);
            for (long i = 0; i < P * 1000; i++) {
                long msg[2] = {i, -1};
                rand_push(&crs, ids, rows, B, N, W);
                for (int j = 0; j < B * W; j++)
                    rows[j] = (float)i;                /* push i writes i */
                if (gkv_tensor_push(s, "t", ids, B, rows, sizeof rows, NULL) != GKV_OK)
                    _exit(4);
                if (i % 7 == 0) {
                    if (gkv_writeback_flush(s) != GKV_OK)
                        _exit(5);
                    msg[1] = i;
                }
                if (write(pfd[1], msg, sizeof msg) != sizeof msg)
                    _exit(6);
                if (i + 1 >= P)
                    pause();
            }
            _exit(0);
        }
        close(pfd[1]);
        usleep(2000 + (useconds_t)((seed >> (kill_round * 4)) % 30000));
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        for (long msg[2]; read(pfd[0], msg, sizeof msg) == sizeof msg;) {
            made = msg[0];
            if (msg[1] >= 0)
                flushed = msg[1];
        }
        close(pfd[0]);

        GKVT_OK(gkv_store_open(&s, dir, GKV_NOSYNC, NULL));
        GKVT_OK(gkv_store_verify(s, NULL, NULL));
        got = dump(s, NULL, "t", N, W);
        /* replay: the reference after k pushes of this round (each round
         * starts from zeros: see the end of the loop) */
        ref = calloc(N * W, sizeof *ref);
        {
            uint64_t crs2 = rs;
            for (k = 0; k <= P && !ok; k++) {
                if (k > 0) {           /* ref becomes the state after k pushes */
                    rand_push(&crs2, ids, rows, B, N, W);
                    for (int b2 = 0; b2 < B; b2++)
                        for (int j = 0; j < W; j++)
                            ref[(ids[b2] - 100) * W + j] = (float)(k - 1);
                }
                /* At least every push up to the last reported flush; at
                 * most the reported pushes plus one: the background
                 * flusher (1 ms) may commit a push that completed while
                 * the child was killed before reporting it. */
                if (memcmp(ref, got, N * W * sizeof *ref) == 0)
                    ok = k >= flushed + 1 && k <= made + 2;
            }
        }
        if (!ok) {
            size_t bad = 0, first = 0;
            for (size_t x = 0; x < N * W; x++)
                if (ref[x] != got[x] && bad++ == 0)
                    first = x;
            fprintf(stderr, "round %d: no push boundary matches (made %ld, "
                    "flushed %ld); vs last: %zu differ, first at row %zu: "
                    "%g, expected %g\n", kill_round, made, flushed, bad,
                    first / W, got[first], ref[first]);
        }
        if (getenv("GKVT_VERBOSE"))
            fprintf(stderr, "round %d: killed after push %ld, flushed %ld, "
                    "store at push %d\n", kill_round, made, flushed, k - 1);
        assert_true(ok);
        free(ref);
        free(got);
        /* back to zeros for the next round */
        {
            float *z = calloc(N * W, sizeof *z);
            GKVT_OK(gkv_tensor_write(s, "t", 100, 100 + N, z, N * W * sizeof *z));
            free(z);
        }
        gkv_store_close(s);
    }
    gkvt_rmtree(dir);
}

/* Regression: an optimizer push touching more pages than LMDB keeps dirty
 * in one transaction (131071) made LMDB spill pages, and a chunk pointer
 * taken before the state chunks were written went stale (wrong rows, NaN).
 * Adagrad on a HOT tensor, every row pushed once, checked against the rule
 * computed here. */
static void
test_big_adagrad_push(void **state)
{
    const uint64_t n = 480000, w = 128;       /* 2 x 68,572 chunk pages */
    char *dir = gkvt_mkdtemp("bigpush");
    gkv_tensor_spec sp = spec(n, w, GKV_TENSOR_HOT);
    uint64_t *ids = malloc(n * sizeof *ids), rs = gkvt_seed() ^ 5;
    float *g = malloc(n * w * sizeof *g), *w0, *w1;
    gkv_push_args pa = {"adagrad", 0.1, 1e-10, 0, 0, 0};
    gkv_store *s;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "e", &sp));
    for (uint64_t i = 0; i < n; i++)
        ids[i] = 100 + i;
    for (uint64_t i = n - 1; i > 0; i--) {           /* shuffle */
        uint64_t j = gkvt_rand(&rs) % (i + 1), t = ids[i];
        ids[i] = ids[j];
        ids[j] = t;
    }
    for (uint64_t i = 0; i < n * w; i++)
        g[i] = (float)((int)(gkvt_rand(&rs) % 2001) - 1000) / 500.0f;
    w0 = dump(s, NULL, "e", n, w);
    GKVT_OK(gkv_tensor_push(s, "e", ids, n, g, n * w * sizeof *g, &pa));
    w1 = dump(s, NULL, "e", n, w);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = ids[i] - 100;
        for (uint64_t j = 0; j < w; j++) {
            float gg = g[i * w + j], ss = gg * gg;
            float want = (float)((double)w0[r * w + j] -
                                 0.1 * gg / (sqrt((double)ss) + 1e-10));
            if (w1[r * w + j] != want) {
                fprintf(stderr, "row %llu col %llu: %.9g, expected %.9g\n",
                        (unsigned long long)ids[i], (unsigned long long)j,
                        w1[r * w + j], want);
                fail();
            }
        }
    }
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    free(ids);
    free(g);
    free(w0);
    free(w1);
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* ---- pushes during a flush ---------------------------------------------
 * A flush marks the dirty chunks pending, then writes them without a lock;
 * a push that changes a pending chunk saves it first. The hook below runs
 * inside a flush, between the two steps, and pushes there. */

#define FW  200            /* 800-byte rows: the tensor is 2.4 MB */
#define FCR 16             /* rows per chunk: 188 chunks */

static struct {
    gkv_store *s;
    uint64_t rs;
    int calls;
} hk;

static void
push_random(gkv_store *s, const char *name, uint64_t *rs, const char *h)
{
    static uint64_t ids[400];
    static float rows[400 * FW];
    gkv_push_args pa = {h, 0.05, 0, 0, 0, 0};

    rand_push(rs, ids, rows, 400, N, FW);
    GKVT_OK(gkv_tensor_push(s, name, ids, 400, rows, sizeof rows, &pa));
}

/* The pushes made inside the flush, and after it to the reference. */
static void
later_pushes(gkv_store *s, const char *name, uint64_t *rs)
{
    static float rows[40 * FW];

    push_random(s, name, rs, "adagrad");     /* weights and state chunks */
    push_random(s, name, rs, "assign");
    for (size_t i = 0; i < 40 * FW; i++)
        rows[i] = (float)i;
    /* a range write across three chunks, one already saved or not */
    GKVT_OK(gkv_tensor_write(s, name, 100 + 2 * FCR - 3, 100 + 2 * FCR + 37,
                             rows, sizeof rows));
}

static void
hook_push(gkv_store *s)
{
    if (s != hk.s)
        return;
    hk.calls++;
    later_pushes(s, "t", &hk.rs);
}

/* The store (through a snapshot) holds weights w and Adagrad state st of
 * tensor "t" (N x FW), and verifies. */
static void
store_equals(gkv_store *s, const float *w, const float *st)
{
    gkv_txn *tx;
    float *got;

    GKVT_OK(gkv_txn_begin(s, &tx));
    got = dump(s, tx, "t", N, FW);
    assert_memory_equal(got, w, (size_t)N * FW * 4);
    free(got);
    got = dump(s, tx, "t#adagrad_s", N, FW);
    assert_memory_equal(got, st, (size_t)N * FW * 4);
    free(got);
    gkv_txn_end(tx);
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
}

/* The store after a flush is the state at the moment the flush began, even
 * when pushes change the chunks while it writes them and the map fills in
 * the middle of its transaction (so it writes everything twice, the second
 * time from the copies the pushes saved). Reference: the same pushes,
 * direct, on a tensor of another store. */
static void
test_wb_push_during_flush(void **state)
{
    char *da = gkvt_mkdtemp("wbfl"), *db = gkvt_mkdtemp("wbref");
    gkv_open_opts small = {4u << 20, 0};    /* the flush must grow the map */
    gkv_tensor_spec sp = spec(N, FW, 0);
    const size_t nb = (size_t)N * FW * 4;
    uint64_t rs = gkvt_seed() ^ 11, rs2;
    gkv_store_stat st0, st1;
    gkv_store *s, *ref;
    float *want_w, *want_s, *mir;

    (void)state;
    sp.chunk_rows = FCR;
    GKVT_OK(gkv_store_open(&s, da, GKV_CREATE | GKV_NOSYNC, &small));
    GKVT_OK(gkv_store_open(&ref, db, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_tensor_create(ref, "t", &sp));
    GKVT_OK(gkv_writeback_start(s, "t", 100000));   /* flushes when asked */
    rs2 = rs;
    push_random(s, "t", &rs, "assign");
    push_random(s, "t", &rs, "adagrad");
    push_random(ref, "t", &rs2, "assign");
    push_random(ref, "t", &rs2, "adagrad");
    want_w = dump(ref, NULL, "t", N, FW);
    want_s = dump(ref, NULL, "t#adagrad_s", N, FW);

    GKVT_OK(gkv_store_stat_get(s, &st0));
    hk.s = s;
    hk.rs = rs;
    hk.calls = 0;
    kv__wb_flush_hook = hook_push;
    GKVT_OK(gkv_writeback_flush(s));
    kv__wb_flush_hook = NULL;
    assert_int_equal(hk.calls, 1);
    GKVT_OK(gkv_store_stat_get(s, &st1));
    assert_true(st1.map_size > st0.map_size);       /* the retry happened */

    /* the store: as before the hook's pushes, weights and state */
    store_equals(s, want_w, want_s);

    /* the mirror: every push, like the reference after the same pushes */
    later_pushes(ref, "t", &rs2);
    free(want_w);
    free(want_s);
    want_w = dump(ref, NULL, "t", N, FW);
    want_s = dump(ref, NULL, "t#adagrad_s", N, FW);
    mir = dump(s, NULL, "t", N, FW);
    assert_memory_equal(mir, want_w, nb);
    free(mir);

    /* the next flush writes what the pushes changed */
    GKVT_OK(gkv_writeback_flush(s));
    store_equals(s, want_w, want_s);
    free(want_w);
    free(want_s);
    gkv_store_close(s);
    gkv_store_close(ref);
    gkvt_rmtree(da);
    gkvt_rmtree(db);
}

/* A flush that fails (the disk is full, so the map cannot grow) after
 * pushes saved some of its chunks: the store keeps what it had, every chunk
 * the flush held is dirty again, and once there is room the next flush
 * writes all the pushes. On a 12 MB tmpfs (needs root; skipped without). */
static void
hook_push_once(gkv_store *s)
{
    if (s != hk.s)
        return;
    hk.calls++;
    push_random(s, "t", &hk.rs, "assign");          /* saves some chunks */
}

static void
test_wb_flush_fails(void **state)
{
    char *dir = gkvt_mkdtemp("wbfull"), ballast[4096];
    gkv_tensor_spec sp = spec(N, FW, 0);
    const size_t nb = (size_t)N * FW * 4;
    uint64_t rs = gkvt_seed() ^ 13;
    float *before, *mirror, *got;
    struct statvfs vf;
    gkv_store *s;
    gkv_txn *tx;
    gkv_err rc;
    FILE *fp;

    (void)state;
    gkvt_tmpfs_or_skip(dir, "size=12m");
    sp.chunk_rows = FCR;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC,
                           &(gkv_open_opts){1u << 20, 0}));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    before = dump(s, NULL, "t", N, FW);
    /* leave about 1 MB free: less than a flush of the whole tensor needs */
    assert_int_equal(statvfs(dir, &vf), 0);
    snprintf(ballast, sizeof ballast, "%s/ballast", dir);
    assert_non_null(fp = fopen(ballast, "w"));
    for (uint64_t left = (uint64_t)vf.f_bavail * vf.f_frsize - (1u << 20);
         left >= 4096; left -= 4096)
        assert_int_equal(fwrite(before, 1, 4096, fp), 4096);
    assert_int_equal(fclose(fp), 0);

    GKVT_OK(gkv_writeback_start(s, "t", 100000));
    push_random(s, "t", &rs, "assign");
    hk.s = s;
    hk.rs = rs;
    hk.calls = 0;
    kv__wb_flush_hook = hook_push_once;
    /* the map cannot grow (GKV_EMAPFULL), or the commit's writes find no
     * room (GKV_EIO), depending on how much the map had grown already */
    rc = gkv_writeback_flush(s);
    assert_true(rc == GKV_EMAPFULL || rc == GKV_EIO);
    kv__wb_flush_hook = NULL;
    assert_int_equal(hk.calls, 1);
    assert_non_null(strstr(gkv_store_errmsg(s), dir));
    /* the store as it was; the mirror has both pushes and takes more */
    GKVT_OK(gkv_txn_begin(s, &tx));
    got = dump(s, tx, "t", N, FW);
    gkv_txn_end(tx);
    assert_memory_equal(got, before, nb);
    free(got);
    push_random(s, "t", &hk.rs, "assign");
    mirror = dump(s, NULL, "t", N, FW);
    rc = gkv_writeback_flush(s);                            /* still full */
    assert_true(rc == GKV_EMAPFULL || rc == GKV_EIO);
    /* room again: everything is written */
    assert_int_equal(unlink(ballast), 0);
    GKVT_OK(gkv_writeback_flush(s));
    GKVT_OK(gkv_txn_begin(s, &tx));
    got = dump(s, tx, "t", N, FW);
    gkv_txn_end(tx);
    assert_memory_equal(got, mirror, nb);
    free(got);
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    GKVT_OK(gkv_writeback_stop(s, "t"));
    gkv_store_close(s);
    free(before);
    free(mirror);
    gkvt_tmpfs_done(dir);
}

/* Forks a child that opens its own handle on dir, keeps 'name' in
 * write-back on it, closes the handle 'inherited' (not NULL) it got from
 * this process, and waits to be killed (gkvt_kill_child; it dies with this
 * program too); returns once it holds the tensor. */
static pid_t
wb_holder(const char *dir, const char *name, gkv_store *inherited)
{
    int pfd[2];
    pid_t kid;
    char c;

    assert_int_equal(pipe(pfd), 0);
    if ((kid = fork()) == 0) {
        gkv_store *cs;

        gkvt_die_with_parent();
        if (gkv_store_open(&cs, dir, GKV_NOSYNC, NULL) != GKV_OK ||
            gkv_writeback_start(cs, name, 100000) != GKV_OK)
            _exit(1);
        if (inherited != NULL)
            gkv_store_close(inherited);
        if (write(pfd[1], "w", 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    assert_true(kid > 0);
    close(pfd[1]);
    assert_int_equal(read(pfd[0], &c, 1), 1);
    close(pfd[0]);
    return kid;
}

/* kvctl on the directory, with args; returns its exit status, its
 * stderr in *err (the caller frees it). */
static int
kvctl_on(const char *dir, char **err, const char *a1, const char *a2,
         const char *a3, const char *a4)
{
    char *argv[] = {(char *)gkvt_prog("kvctl"), (char *)dir, (char *)a1,
                    (char *)a2, (char *)a3, (char *)a4, NULL};

    *err = NULL;
    return gkvt_run(argv, NULL, 0, NULL, err, 60);
}

/* A tensor one process holds in write-back is that process's to write:
 * another process's put, restore of its state, delete or rename of it is
 * refused (GKV_EBUSY naming the process: the owner's next flush would have
 * overwritten the write, or mixed it into a chunk); other tensors are
 * not, and a second process cannot keep the store's tensors in write-back
 * at the same time. Once the owner stops, closes or dies, they are free.
 * Before, `kvctl put` reported success and the next flush undid it. */
static void
test_wb_owned_across_processes(void **state)
{
    char *dir = gkvt_mkdtemp("wbown"), *err, pidtext[64];
    gkv_tensor_spec sp = spec(N, W, 0);
    uint64_t id = 150;
    float row[W];
    gkv_store *s;
    int st;
    pid_t kid;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_tensor_create(s, "u", &sp));
    GKVT_OK(gkv_writeback_start(s, "t", 100000));
    snprintf(pidtext, sizeof pidtext, "by process %ld", (long)getpid());
    assert_int_equal(kvctl_on(dir, &err, "put", "t", "150",
                              "1,2,3,4,5,6,7,8"), 1);
    if (strstr(err, "kept in write-back mode") == NULL ||
        strstr(err, pidtext) == NULL)
        fail_msg("put: %s", err);
    free(err);
    assert_int_equal(kvctl_on(dir, &err, "rm", "t", NULL, NULL), 1);
    assert_non_null(strstr(err, pidtext));
    free(err);
    assert_int_equal(kvctl_on(dir, &err, "rename", "t", "t2", NULL), 1);
    free(err);
    assert_int_equal(kvctl_on(dir, &err, "reset-opt", "t", NULL, NULL), 1);
    free(err);
    /* a tensor not in write-back is anyone's */
    assert_int_equal(kvctl_on(dir, &err, "put", "u", "150",
                              "1,2,3,4,5,6,7,8"), 0);
    free(err);
    GKVT_OK(gkv_tensor_pull(s, NULL, "u", &id, 1, row, sizeof row));
    assert_true(row[0] == 1 && row[7] == 8);
    /* a second process may not keep tensors of the store in write-back */
    if ((kid = fork()) == 0) {
        gkv_store *cs;
        gkv_err rc = GKV_EIO;

        if (gkv_store_open(&cs, dir, GKV_NOSYNC, NULL) == GKV_OK)
            rc = gkv_writeback_start(cs, "u", 100000);
        _exit(rc == GKV_EBUSY &&
              strstr(gkv_store_errmsg(cs), "one process at a time") != NULL
              ? 0 : 1);
    }
    assert_true(kid > 0);
    assert_int_equal(waitpid(kid, &st, 0), kid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* stopped: free again */
    GKVT_OK(gkv_writeback_stop(s, "t"));
    assert_int_equal(kvctl_on(dir, &err, "put", "t", "150",
                              "1,2,3,4,5,6,7,8"), 0);
    free(err);
    gkv_store_close(s);
    /* an owner killed with SIGKILL leaves its list, not its lock */
    kid = wb_holder(dir, "u", NULL);
    assert_int_equal(kvctl_on(dir, &err, "rm", "u", NULL, NULL), 1);
    free(err);
    gkvt_kill_child(kid);
    assert_int_equal(kvctl_on(dir, &err, "rm", "u", NULL, NULL), 0);
    free(err);
    gkvt_rmtree(dir);
}

/* ThreadSanitizer ends a child forked from a process with threads when the
 * child starts one (write-back's flusher): the tests whose children start
 * write-back are skipped under it. */
#ifdef __SANITIZE_THREAD__
#define SKIP_UNDER_TSAN() skip()
#else
#define SKIP_UNDER_TSAN() ((void)0)
#endif

/* A forked child's own handle on dir runs 'what' on tensor 'name'
 * ("delete+create" as a writer that does not check the write-back lock:
 * its descriptor of writeback.lock set aside; "push": a checked push of
 * one row; "start": gkv_writeback_start); returns the call's code. */
static gkv_err
child_call(const char *dir, const char *what, const char *name)
{
    int pfd[2], st;
    gkv_err rc = GKV_EIO;
    pid_t kid;

    assert_int_equal(pipe(pfd), 0);
    if ((kid = fork()) == 0) {
        gkv_tensor_spec sp = spec(N, W, 0);
        float row[W] = {5, 5, 5, 5, 5, 5, 5, 5};
        uint64_t id = 150;
        gkv_store *cs;

        close(pfd[0]);
        if ((rc = gkv_store_open(&cs, dir, GKV_NOSYNC, NULL)) == GKV_OK) {
            if (strcmp(what, "delete+create") == 0) {
                cs->st_wbo_fd = -1;             /* an unchecked writer */
                if ((rc = gkv_tensor_delete(cs, name)) == GKV_OK)
                    rc = gkv_tensor_create(cs, name, &sp);
            } else if (strcmp(what, "push") == 0) {
                rc = gkv_tensor_push(cs, name, &id, 1, row, sizeof row, NULL);
            } else {
                rc = gkv_writeback_start(cs, name, 100000);
                if (rc == GKV_OK)
                    rc = gkv_writeback_stop(cs, name);
            }
            gkv_store_close(cs);
        }
        if (write(pfd[1], &rc, sizeof rc) != sizeof rc)
            _exit(1);
        _exit(0);
    }
    assert_true(kid > 0);
    close(pfd[1]);
    assert_int_equal(read(pfd[0], &rc, sizeof rc), (ssize_t)sizeof rc);
    close(pfd[0]);
    assert_int_equal(waitpid(kid, &st, 0), kid);
    return rc;
}

/* A flush that drops a copy (its tensor deleted by a writer that does not
 * check) takes it off the write-back list other processes see; once none
 * is left, the store is free for another process's write-back. Before, the
 * name stayed listed (writes to the new tensor of that name refused) and
 * the lock held, for the life of the process. */
static void
test_wb_drop_unlists(void **state)
{
    char *dir = gkvt_mkdtemp("wbunl");
    gkv_tensor_spec sp = spec(N, W, 0);
    float row[W] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint64_t id = 160;
    gkv_store *s;

    (void)state;
    SKIP_UNDER_TSAN();
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_tensor_create(s, "u", &sp));
    GKVT_OK(gkv_writeback_start(s, "t", 100000));
    GKVT_OK(gkv_writeback_start(s, "u", 100000));
    assert_int_equal(child_call(dir, "push", "t"), GKV_EBUSY);
    /* a companion counts as its tensor (a restore of its state) */
    assert_int_equal(child_call(dir, "push", "t#adagrad_s"), GKV_EBUSY);
    /* pending pushes: the flush finds the tensors gone */
    GKVT_OK(gkv_tensor_push(s, "t", &id, 1, row, sizeof row, NULL));
    GKVT_OK(gkv_tensor_push(s, "u", &id, 1, row, sizeof row, NULL));
    GKVT_OK(child_call(dir, "delete+create", "t"));
    assert_int_equal(gkv_writeback_flush(s), GKV_ENOTFOUND);    /* dropped */
    GKVT_OK(child_call(dir, "push", "t"));      /* the new t: not listed */
    assert_int_equal(child_call(dir, "push", "u"), GKV_EBUSY);
    assert_int_equal(child_call(dir, "start", "t"), GKV_EBUSY);
    GKVT_OK(gkv_tensor_push(s, "u", &id, 1, row, sizeof row, NULL));
    GKVT_OK(child_call(dir, "delete+create", "u"));
    assert_int_equal(gkv_writeback_flush(s), GKV_ENOTFOUND);
    GKVT_OK(child_call(dir, "start", "t"));     /* none left: released */
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* A forked child that keeps tensors in write-back on its own handle and
 * closes the handle it inherited keeps its lock (closing any descriptor of
 * a file drops all of a process's fcntl locks on it: the inherited
 * handle's is left open). Before, a third process's push went through. */
static void
test_wb_fork_close_keeps_lock(void **state)
{
    char *dir = gkvt_mkdtemp("wbfork");
    gkv_tensor_spec sp = spec(N, W, 0);
    gkv_store *s;
    pid_t kid;

    (void)state;
    SKIP_UNDER_TSAN();
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    kid = wb_holder(dir, "t", s);       /* closes the parent's, inherited */
    assert_int_equal(child_call(dir, "push", "t"), GKV_EBUSY);
    gkvt_kill_child(kid);
    GKVT_OK(child_call(dir, "push", "t"));
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* Names are matched whole: a process holding "tt" in write-back does not
 * hold "t". */
static void
test_wb_names_whole(void **state)
{
    char *dir = gkvt_mkdtemp("wbwhole");
    gkv_tensor_spec sp = spec(N, W, 0);
    gkv_store *s;
    pid_t kid;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_tensor_create(s, "tt", &sp));
    gkv_store_close(s);
    kid = wb_holder(dir, "tt", NULL);
    GKVT_OK(child_call(dir, "push", "t"));
    assert_int_equal(child_call(dir, "push", "tt"), GKV_EBUSY);
    gkvt_kill_child(kid);
    gkvt_rmtree(dir);
}

/* Another process deletes one of two write-back tensors, or replaces it:
 * the flush still writes the other, drops the copy of the gone one (its
 * pushes have nowhere to go) and says so; later flushes and stops work,
 * and the handle then reads what the store holds under that name. A flush
 * that failed whole on one gone tensor left every other write-back tensor
 * of the handle unwritten, flush after flush. */
static void
test_wb_deleted_tensor_dropped(void **state)
{
    char *dir = gkvt_mkdtemp("wbgone"), *err = NULL;
    gkv_tensor_spec sp = spec(N, W, 0);
    uint64_t rs = gkvt_seed() ^ 17, ids[300], id = 150;
    float rows[300 * W], *u, *got, row[W];
    gkv_store *s;
    gkv_txn *tx;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_tensor_create(s, "u", &sp));
    GKVT_OK(gkv_tensor_create(s, "v", &sp));
    GKVT_OK(gkv_writeback_start(s, "t", 100000));
    GKVT_OK(gkv_writeback_start(s, "u", 100000));
    GKVT_OK(gkv_writeback_start(s, "v", 100000));
    rand_push(&rs, ids, rows, 300, N, W);
    GKVT_OK(gkv_tensor_push(s, "t", ids, 300, rows, sizeof rows, NULL));
    GKVT_OK(gkv_tensor_push(s, "u", ids, 300, rows, sizeof rows, NULL));
    GKVT_OK(gkv_tensor_push(s, "v", ids, 300, rows, sizeof rows, NULL));
    u = dump(s, NULL, "u", N, W);
    {
        char *rm[] = {(char *)gkvt_prog("kvctl"), dir, "rm", "t", NULL};
        char *rm2[] = {(char *)gkvt_prog("kvctl"), dir, "rm", "v", NULL};
        char *mk[] = {(char *)gkvt_prog("kvctl"), dir, "create", "v",
                      "--dtype", "f32", "--shape", "8", "--range", "100:3100",
                      "--init", "const:5", NULL};
        gkvt_wb_unguard(dir);           /* a writer that does not check */
        assert_int_equal(gkvt_run(rm, NULL, 0, NULL, &err, 60), 0);
        free(err);
        assert_int_equal(gkvt_run(rm2, NULL, 0, NULL, &err, 60), 0);
        free(err);
        assert_int_equal(gkvt_run(mk, NULL, 0, NULL, &err, 60), 0);
        free(err);
    }
    assert_int_equal(gkv_writeback_flush(s), GKV_ENOTFOUND);
    assert_non_null(strstr(gkv_store_errmsg(s), "tensor '"));
    assert_non_null(strstr(gkv_store_errmsg(s), "deleted or replaced by "
                           "another handle; its write-back copy is dropped"));
    /* u was written */
    GKVT_OK(gkv_txn_begin(s, &tx));
    got = dump(s, tx, "u", N, W);
    gkv_txn_end(tx);
    assert_memory_equal(got, u, (size_t)N * W * 4);
    free(got);
    /* t is gone, for this handle too; v is the new tensor of the store */
    assert_int_equal(gkv_tensor_pull(s, NULL, "t", &id, 1, row, sizeof row),
                     GKV_ENOTFOUND);
    GKVT_OK(gkv_tensor_pull(s, NULL, "v", &id, 1, row, sizeof row));
    for (int j = 0; j < W; j++)
        assert_true(row[j] == 5.0f);
    assert_int_equal(gkv_writeback_stop(s, "t"), GKV_ENOTFOUND);
    assert_non_null(strstr(gkv_store_errmsg(s), "not in write-back mode"));
    GKVT_OK(gkv_writeback_flush(s));
    GKVT_OK(gkv_tensor_push(s, "u", ids, 10, rows, 10 * W * 4, NULL));
    GKVT_OK(gkv_writeback_stop(s, "u"));
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    free(u);
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* Pushes and a background flusher (1 ms) in parallel, and snapshots of the
 * store checked as they come: each one must be the state after a whole
 * push. Push k (from 1) assigns k to every row when k is odd, and to the
 * rows of even chunks only when k is even; so a state is (odd chunks,
 * even chunks) = (k, k) with k odd, or (k - 1, k) with k even, or the
 * initial zeros. */
#define RCR 8

struct race {
    gkv_store *s;
    int stop;
    long snaps, torn;
};

static void *
race_reader(void *arg)
{
    struct race *r = arg;
    float *b = malloc((size_t)N * W * 4);

    while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
        gkv_txn *tx;
        float odd = -1, even = -1;
        size_t bad = 0;
        int ok = 1;

        if (gkv_txn_begin(r->s, &tx) != GKV_OK ||
            gkv_tensor_read(r->s, tx, "t", 100, 100 + N, b,
                            (size_t)N * W * 4) != GKV_OK) {
            r->torn++;
            gkv_txn_end(tx);
            break;
        }
        gkv_txn_end(tx);
        for (size_t i = 0; i < (size_t)N * W && ok; i++) {
            float *v = (i / W / RCR) % 2 ? &odd : &even;
            if (*v < 0)
                *v = b[i];
            ok = b[i] == *v;
            bad = i;
        }
        if (!ok)
            fprintf(stderr, "snapshot %ld: row %zu holds %g, an earlier row "
                    "of its chunk parity %g\n", r->snaps, bad / W, b[bad],
                    (bad / W / RCR) % 2 ? odd : even);
        else if (!((odd == even && ((int)odd % 2 == 1 || odd == 0)) ||
                   (even == odd + 1 && (int)even % 2 == 0))) {
            fprintf(stderr, "snapshot %ld is no push boundary: odd chunks "
                    "%g, even chunks %g\n", r->snaps, odd, even);
            ok = 0;
        }
        if (!ok)
            r->torn++;
        r->snaps++;
    }
    free(b);
    return NULL;
}

static void
test_wb_flush_race(void **state)
{
    char *dir = gkvt_mkdtemp("wbrace");
    gkv_tensor_spec sp = spec(N, W, 0);
    uint64_t *ids = malloc(N * sizeof *ids);
    float *rows = malloc((size_t)N * W * 4);
    struct race r = {NULL, 0, 0, 0};
    pthread_t th;

    (void)state;
    sp.chunk_rows = RCR;
    sp.init = GKV_INIT_ZEROS;
    GKVT_OK(gkv_store_open(&r.s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(r.s, "t", &sp));
    GKVT_OK(gkv_writeback_start(r.s, "t", 1));
    assert_int_equal(pthread_create(&th, NULL, race_reader, &r), 0);
    for (int k = 1; k <= 600; k++) {
        size_t n = 0;
        for (uint64_t i = 0; i < N; i++)
            if (k % 2 == 1 || (i / RCR) % 2 == 0) {
                ids[n] = 100 + i;
                for (int j = 0; j < W; j++)
                    rows[n * W + j] = (float)k;
                n++;
            }
        GKVT_OK(gkv_tensor_push(r.s, "t", ids, n, rows, n * W * 4, NULL));
        if (k % 50 == 0)
            usleep(2000);     /* let the flusher and the reader in */
    }
    __atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    fprintf(stderr, "%ld snapshots checked\n", r.snaps);
    assert_int_equal(r.torn, 0);
    assert_true(r.snaps > 0);
    /* after the last flush the store holds the last push */
    GKVT_OK(gkv_writeback_flush(r.s));
    {
        gkv_txn *tx;
        GKVT_OK(gkv_txn_begin(r.s, &tx));
        GKVT_OK(gkv_tensor_read(r.s, tx, "t", 100, 100 + N, rows,
                                (size_t)N * W * 4));
        gkv_txn_end(tx);
        for (size_t i = 0; i < (size_t)N * W; i++)
            assert_true(rows[i] == ((i / W / RCR) % 2 ? 599.0f : 600.0f));
    }
    GKVT_OK(gkv_store_verify(r.s, NULL, NULL));
    free(ids);
    free(rows);
    gkv_store_close(r.s);
    gkvt_rmtree(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wb_equals_direct),
        cmocka_unit_test(test_wb_bad_input),
        cmocka_unit_test(test_wb_background),
        cmocka_unit_test(test_wb_sync_flushes),
        cmocka_unit_test(test_wb_crash),
        cmocka_unit_test(test_big_adagrad_push),
        cmocka_unit_test(test_wb_push_during_flush),
        cmocka_unit_test(test_wb_flush_fails),
        cmocka_unit_test(test_wb_deleted_tensor_dropped),
        cmocka_unit_test(test_wb_owned_across_processes),
        cmocka_unit_test(test_wb_drop_unlists),
        cmocka_unit_test(test_wb_fork_close_keeps_lock),
        cmocka_unit_test(test_wb_names_whole),
        cmocka_unit_test(test_wb_flush_race),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
