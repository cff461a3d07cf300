/* kv_wb_flush_test.c - write-back's two-step flush (kv/wb.c): pushes made
 * inside a flush (the flush writes the state it began at), a flush whose
 * write fails, readers racing a flush. Edge cases of the same flush under
 * stress: kv_wb_edge_test.c. */
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
#include "gkvt_wb.h"
#include "kv/kv_test.h"     /* kv__wb_flush_hook */

#define W 8            /* row width (f32) of the small tensors */
#define N 3000         /* rows */

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

    gkvt_rand_rows(rs, ids, rows, 400, 100, N, FW);
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
    got = gkvt_wb_rows(s, tx, "t", N, FW);
    assert_memory_equal(got, w, (size_t)N * FW * 4);
    free(got);
    got = gkvt_wb_rows(s, tx, "t#adagrad_s", N, FW);
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
    gkv_tensor_spec sp = gkvt_wb_spec(N, FW, 0);
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
    want_w = gkvt_wb_rows(ref, NULL, "t", N, FW);
    want_s = gkvt_wb_rows(ref, NULL, "t#adagrad_s", N, FW);

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
    want_w = gkvt_wb_rows(ref, NULL, "t", N, FW);
    want_s = gkvt_wb_rows(ref, NULL, "t#adagrad_s", N, FW);
    mir = gkvt_wb_rows(s, NULL, "t", N, FW);
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
    gkv_tensor_spec sp = gkvt_wb_spec(N, FW, 0);
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
    before = gkvt_wb_rows(s, NULL, "t", N, FW);
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
    got = gkvt_wb_rows(s, tx, "t", N, FW);
    gkv_txn_end(tx);
    assert_memory_equal(got, before, nb);
    free(got);
    push_random(s, "t", &hk.rs, "assign");
    mirror = gkvt_wb_rows(s, NULL, "t", N, FW);
    rc = gkv_writeback_flush(s);                            /* still full */
    assert_true(rc == GKV_EMAPFULL || rc == GKV_EIO);
    /* room again: everything is written */
    assert_int_equal(unlink(ballast), 0);
    GKVT_OK(gkv_writeback_flush(s));
    GKVT_OK(gkv_txn_begin(s, &tx));
    got = gkvt_wb_rows(s, tx, "t", N, FW);
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
    gkv_tensor_spec sp = gkvt_wb_spec(N, W, 0);
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
        cmocka_unit_test(test_wb_push_during_flush),
        cmocka_unit_test(test_wb_flush_fails),
        cmocka_unit_test(test_wb_flush_race),
    };
    return cmocka_run_group_tests_name("kv_wb_flush", tests, NULL, NULL);
}
