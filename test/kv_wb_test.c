/* kv_wb_test.c - write-back mode (kv/wb.c) against direct pushes and a
 * reference, its bad inputs, crash consistency; and the regression test for
 * optimizer pushes larger than LMDB's dirty-page limit. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "gkvt.h"

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
        gkv_push_args pa = {hs[round % 6], 0.05, 0, 0, 0};
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
    gkv_push_args pa = {"failing", 0, 0, 0, 0};
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
    for (int i = 0; i < 400 && !seen; i++) {
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
    gkv_push_args pa = {"adagrad", 0.1, 1e-10, 0, 0};
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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wb_equals_direct),
        cmocka_unit_test(test_wb_bad_input),
        cmocka_unit_test(test_wb_background),
        cmocka_unit_test(test_wb_crash),
        cmocka_unit_test(test_big_adagrad_push),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
