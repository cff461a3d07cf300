/* kv_wb_test.c - write-back mode (kv/wb.c) against direct pushes and a
 * reference, its bad inputs, background and sync flushes, crash
 * consistency. The other write-back programs, each one concern, with
 * their shared fixtures in gkvt_wb.c:
 *   kv_wb_flush_test       the two-step flush: pushes inside it, failures
 *   kv_wb_edge_test        the flush's edge cases against a reference
 *   kv_wb_state_test       optimizer-state companions of a write-back tensor
 *   kv_wb_process_test     other processes: the write-back lock, deletes
 *   kv_wb_start_stop_test  start and stop against concurrent calls
 *   kv_wb_slice_test       flushes and pushes in slices (nested transactions)
 *   net_wb_pattern_test    gkv-server's --writeback patterns */
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
#include "gkvt_wb.h"
#include "kv/kv_test.h"     /* kv__wb_flush_hook, kv__wb_slice */

#define W 8            /* row width (f32) of the small tensors */
#define N 3000         /* rows */

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
    gkv_tensor_spec sp = gkvt_wb_spec(N, W, GKV_TENSOR_HOT);
    gkv_store *s;
    gkv_txn *tx;
    float *a, *b;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_handler_register(s, "mul", gkvt_h_mul, NULL));
    GKVT_OK(gkv_tensor_create(s, "direct", &sp));
    GKVT_OK(gkv_tensor_create(s, "wb", &sp));
    GKVT_OK(gkv_writeback_start(s, "wb", 100000));   /* flushes only when asked */
    for (int round = 0; round < 24; round++) {
        gkv_push_args pa = {hs[round % 6], 0.05, 0, 0, 0, 0};
        size_t n = 1 + tools__splitmix64(&rs) % 500;

        gkvt_rand_rows(&rs, ids, rows, n, 100, N, W);
        ids[n / 2] = ids[0];                         /* a duplicate */
        GKVT_OK(gkv_tensor_push(s, "direct", ids, n, rows, n * W * 4, &pa));
        GKVT_OK(gkv_tensor_push(s, "wb", ids, n, rows, n * W * 4, &pa));
        if (round == 10) {                           /* a range write too */
            GKVT_OK(gkv_tensor_write(s, "direct", 150, 160, rows, 10 * W * 4));
            GKVT_OK(gkv_tensor_write(s, "wb", 150, 160, rows, 10 * W * 4));
        }
        /* pulls (RAM) see every push at once */
        a = gkvt_wb_rows(s, NULL, "direct", N, W);
        b = gkvt_wb_rows(s, NULL, "wb", N, W);
        assert_memory_equal(a, b, N * W * 4);
        free(a);
        free(b);
    }
    /* a snapshot sees the store, which has not been flushed yet */
    GKVT_OK(gkv_txn_begin(s, &tx));
    a = gkvt_wb_rows(s, NULL, "direct", N, W);
    b = gkvt_wb_rows(s, tx, "wb", N, W);
    assert_true(memcmp(a, b, N * W * 4) != 0);
    free(b);
    gkv_txn_end(tx);
    GKVT_OK(gkv_writeback_flush(s));
    GKVT_OK(gkv_txn_begin(s, &tx));
    b = gkvt_wb_rows(s, tx, "wb", N, W);
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
    gkvt_rand_rows(&rs, ids, rows, 100, 100, N, W);
    GKVT_OK(gkv_tensor_push(s, "direct", ids, 100, rows, 100 * W * 4, NULL));
    GKVT_OK(gkv_tensor_push(s, "wb", ids, 100, rows, 100 * W * 4, NULL));
    free(a);
    a = gkvt_wb_rows(s, NULL, "direct", N, W);
    gkv_store_close(s);
    GKVT_OK(gkv_store_open(&s, dir, GKV_RDONLY, NULL));
    b = gkvt_wb_rows(s, NULL, "wb", N, W);
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
    gkv_tensor_spec sp = gkvt_wb_spec(N, W, 0);
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
    GKVT_OK(gkv_handler_register(s, "failing", gkvt_h_fail40, &count));
    assert_int_equal(gkv_writeback_start(s, "nope", 0), GKV_ENOTFOUND);
    assert_int_equal(gkv_writeback_start(s, "bad name", 0), GKV_EINVAL);
    assert_int_equal(gkv_writeback_stop(s, "t"), GKV_ENOTFOUND);
    GKVT_OK(gkv_writeback_start(s, "t", 100000));
    assert_int_equal(gkv_writeback_start(s, "t", 0), GKV_EEXIST);
    assert_int_equal(gkv_tensor_delete(s, "t"), GKV_EBUSY);
    assert_non_null(strstr(gkv_store_errmsg(s), "write-back"));
    assert_int_equal(gkv_tensor_rename(s, "t", "u"), GKV_EBUSY);
    GKVT_OK(gkv_tensor_info(s, NULL, "t", &d));

    a = gkvt_wb_rows(s, NULL, "t", N, W);
    gkvt_rand_rows(&rs, ids, rows, 100, 100, N, W);
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
    b = gkvt_wb_rows(s, NULL, "t", N, W);
    assert_memory_equal(a, b, N * W * 4);
    free(b);
    GKVT_OK(gkv_writeback_stop(s, "t"));
    b = gkvt_wb_rows(s, NULL, "t", N, W);
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
    gkv_tensor_spec sp = gkvt_wb_spec(N, W, 0);
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
    for (double end = tools__now_s() + 30; !seen && tools__now_s() < end;) {
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
    gkv_tensor_spec sp = gkvt_wb_spec(N, W, 0);
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
 * call confirmed and at most the last push made. Flushes in slices of
 * 'slice' chunks (kv__wb_slice; the child inherits it). */
static void
wb_crash_rounds(size_t slice)
{
    enum { P = 3000, B = 200 };
    char *dir = gkvt_mkdtemp("wbcrash");
    gkv_tensor_spec sp = gkvt_wb_spec(N, W, GKV_TENSOR_HOT);
    uint64_t seed = gkvt_seed() ^ 3 ^ slice;
    size_t old = kv__wb_slice;
    gkv_store *s;

    kv__wb_slice = slice;
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
                gkvt_rand_rows(&crs, ids, rows, B, 100, N, W);
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
        got = gkvt_wb_rows(s, NULL, "t", N, W);
        /* replay: the reference after k pushes of this round (each round
         * starts from zeros: see the end of the loop) */
        ref = calloc(N * W, sizeof *ref);
        {
            uint64_t crs2 = rs;
            for (k = 0; k <= P && !ok; k++) {
                if (k > 0) {           /* ref becomes the state after k pushes */
                    gkvt_rand_rows(&crs2, ids, rows, B, 100, N, W);
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
    kv__wb_slice = old;
}

static void
test_wb_crash(void **state)
{
    (void)state;
    wb_crash_rounds(kv__wb_slice);
}

/* The same with slices of 2 chunks: a flush is many nested transactions,
 * still one commit. */
static void
test_wb_crash_sliced(void **state)
{
    (void)state;
    wb_crash_rounds(2);
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
        cmocka_unit_test(test_wb_crash_sliced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
