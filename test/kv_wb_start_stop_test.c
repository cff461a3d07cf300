/* kv_wb_start_stop_test.c - starting and stopping write-back mode
 * (gkv_writeback_start/_stop) against concurrent calls on the same handle:
 * two stops at once, a start while the last tensor stops, the last two
 * stopping at once, pushes and range writes while a start loads the copy;
 * and a start refused whole on a full disk. Each test failed before its
 * fix (they came from kv_limits_test.c and kv_store_test.c). */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "gkvt.h"
#include "kv/kv_test.h"

static int
setup(void **state)
{
    return gkvt_store_setup(state, sizeof(struct gkvt_store_fx), "kvwbss");
}

/* ---- write-back mode under concurrent calls ----------------------------- */

struct stop_arg {
    gkv_store *s;
    pthread_barrier_t *bar;
    gkv_err rc;
};

static void *
stop_main(void *p)
{
    struct stop_arg *a = p;

    pthread_barrier_wait(a->bar);
    a->rc = gkv_writeback_stop(a->s, "t");
    return NULL;
}

/* Two threads stop the same write-back tensor: both found it, and the one
 * that came second freed it again (a double free). One must stop it and
 * the other be told it is not in write-back mode. */
static void
test_writeback_stop_twice_at_once(void **state)
{
    struct gkvt_store_fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 1000);
    pthread_barrier_t bar;
    long live0;

    GKVT_OK(gkv_tensor_create(f->s, "t", &sp));
    pthread_barrier_init(&bar, NULL, 2);
    live0 = gkvt_alloc_live();
    for (int round = 0; round < 20; round++) {
        struct stop_arg a[2] = {{f->s, &bar, 1}, {f->s, &bar, 1}};
        pthread_t th[2];
        uint64_t ids[4] = {1, 300, 600, 999};
        float rows[4][4] = {{(float)round}};
        float got[4];
        int ok = 0, notfound = 0;

        /* dirty chunks make the first stop's flush a real commit, which
         * leaves the second stop time to find the tensor too */
        GKVT_OK(gkv_writeback_start(f->s, "t", 60000));
        GKVT_OK(gkv_tensor_push(f->s, "t", ids, 4, rows, sizeof rows, NULL));
        for (int k = 0; k < 2; k++)
            assert_int_equal(pthread_create(&th[k], NULL, stop_main, &a[k]), 0);
        for (int k = 0; k < 2; k++)
            pthread_join(th[k], NULL);
        for (int k = 0; k < 2; k++) {
            ok += a[k].rc == GKV_OK;
            notfound += a[k].rc == GKV_ENOTFOUND;
        }
        assert_int_equal(ok, 1);
        assert_int_equal(notfound, 1);
        assert_int_equal(gkvt_alloc_live(), live0);
        assert_null(f->s->st_wb);
        GKVT_OK(gkv_tensor_read(f->s, NULL, "t", 1, 2, got, sizeof got));
        assert_true(got[0] == (float)round);
    }
    pthread_barrier_destroy(&bar);
}

struct race_arg {
    gkv_store *s;
    int write;                /* 0: "add 1" to row 0; 1: write row i = i + 1 */
    int n;                    /* calls */
    int stop;
    gkv_err rc;
    char msg[GKV__MSG_MAX];
};

static void *
race_main(void *p)
{
    struct race_arg *a = p;
    uint64_t id = 0;
    float one = 1;

    uint64_t rs = (uint64_t)a->n;

    for (int i = 0; i < a->n; i++) {
        float v = (float)(i + 1);

        /* a gap of a few microseconds lets a start take the lock (it waits
         * behind readers otherwise) */
        for (volatile unsigned j = tools__splitmix64(&rs) % 20000; j > 0; j--)
            ;

        a->rc = a->write
                ? gkv_tensor_write(a->s, "t", (uint64_t)i, (uint64_t)i + 1, &v,
                                   sizeof v)
                : gkv_tensor_push(a->s, "t", &id, 1, &one, sizeof one,
                                  &(gkv_push_args){.handler = "add"});
        if (a->rc != GKV_OK) {
            snprintf(a->msg, sizeof a->msg, "%s", gkv_store_errmsg(a->s));
            break;
        }
    }
    __atomic_store_n(&a->stop, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Runs a's calls in a thread while this one starts and stops write-back
 * mode on "t" over and over. */
static void
race_writeback(struct gkvt_store_fx *f, struct race_arg *a)
{
    pthread_t th;
    int cycles = 0;

    a->s = f->s;
    assert_int_equal(pthread_create(&th, NULL, race_main, a), 0);
    while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
        GKVT_OK(gkv_writeback_start(f->s, "t", 60000));
        usleep(100);          /* calls into the RAM copy: the stop flushes */
        GKVT_OK(gkv_writeback_stop(f->s, "t"));
        cycles++;
    }
    pthread_join(th, NULL);
    if (a->rc != GKV_OK)
        fail_msg("%s: %s (%s)", a->write ? "write" : "push",
                 gkv_err_name(a->rc), a->msg);
    print_message("  %d calls, %d write-back start/stop cycles\n", a->n, cycles);
}

/* A push or range write checked for write-back mode before it took the
 * lock that keeps write-back from starting. A gkv_writeback_start in
 * between loaded the tensor without the call's change, the call then went
 * to the store, and the next flush wrote the RAM copy over it. Each start
 * that wins the lock at that moment loses a call; three rounds make a miss
 * unlikely. */
static void
test_push_while_writeback_starts(void **state)
{
    struct gkvt_store_fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 1, 0, 1);

    gkv_store_close(f->s);
    f->s = NULL;
    GKVT_OK(gkv_store_open(&f->s, f->dir, GKV_NOSYNC, NULL));
    sp.ndim = 0;
    for (int round = 0; round < 3; round++) {
        struct race_arg a;
        float got;

        GKVT_OK(gkv_tensor_create(f->s, "t", &sp));
        memset(&a, 0, sizeof a);
        a.n = 20000;
        race_writeback(f, &a);
        GKVT_OK(gkv_tensor_read(f->s, NULL, "t", 0, 1, &got, sizeof got));
        if (got != (float)a.n)            /* every "add 1" counts */
            fail_msg("row 0 is %.0f after %d pushes of +1", got, a.n);
        GKVT_OK(gkv_tensor_delete(f->s, "t"));
    }
}

static void
test_write_while_writeback_starts(void **state)
{
    struct gkvt_store_fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 1, 0, 20000);   /* one chunk */
    float *got = malloc(20000 * sizeof *got);

    gkv_store_close(f->s);
    f->s = NULL;
    GKVT_OK(gkv_store_open(&f->s, f->dir, GKV_NOSYNC, NULL));
    sp.ndim = 0;
    for (int round = 0; round < 3; round++) {
        struct race_arg a;
        int lost = 0;

        GKVT_OK(gkv_tensor_create(f->s, "t", &sp));
        memset(&a, 0, sizeof a);
        a.write = 1;
        a.n = 20000;
        race_writeback(f, &a);
        GKVT_OK(gkv_tensor_read(f->s, NULL, "t", 0, 20000, got,
                                20000 * sizeof *got));
        for (int i = 0; i < 20000; i++)
            lost += got[i] != (float)(i + 1);
        if (lost)
            fail_msg("%d of 20000 written rows lost", lost);
        GKVT_OK(gkv_tensor_delete(f->s, "t"));
    }
    free(got);
}

struct flip_arg {
    gkv_store *s;
    pthread_barrier_t *bar;
    const char *name;
    int start;                /* 1: start 'name', 0: stop it */
    unsigned spin;            /* busy loops before the call */
    gkv_err rc;
};

static void *
flip_main(void *p)
{
    struct flip_arg *a = p;

    pthread_barrier_wait(a->bar);
    for (volatile unsigned i = 0; i < a->spin; i++)
        ;
    a->rc = a->start ? gkv_writeback_start(a->s, a->name, 20)
                     : gkv_writeback_stop(a->s, a->name);
    return NULL;
}

/* The last write-back tensor stopping while another starts: the stop
 * stopped the flusher thread after the start had found it running, and
 * the new tensor was never flushed in the background. */
static void
test_writeback_start_while_last_stops(void **state)
{
    struct gkvt_store_fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 100);
    pthread_barrier_t bar;
    uint64_t seed = gkvt_seed(), rs = seed;

    GKVT_OK(gkv_tensor_create(f->s, "a", &sp));
    GKVT_OK(gkv_tensor_create(f->s, "b", &sp));
    pthread_barrier_init(&bar, NULL, 2);
    for (int round = 0; round < 400; round++) {
        struct flip_arg x = {f->s, &bar, "a", 0, 0, 1}, y = {f->s, &bar, "b", 1, 0, 1};
        pthread_t thx, thy;
        int bad;

        y.spin = (unsigned)(tools__splitmix64(&rs) % 20000);
        x.spin = (unsigned)(tools__splitmix64(&rs) % 2000);
        GKVT_OK(gkv_writeback_start(f->s, "a", 20));
        assert_int_equal(pthread_create(&thx, NULL, flip_main, &x), 0);
        assert_int_equal(pthread_create(&thy, NULL, flip_main, &y), 0);
        pthread_join(thx, NULL);
        pthread_join(thy, NULL);
        GKVT_OK(x.rc);
        GKVT_OK(y.rc);
        pthread_mutex_lock(&f->s->st_wb_mu);
        bad = !f->s->st_wb_running;
        pthread_mutex_unlock(&f->s->st_wb_mu);
        if (bad || round % 100 == 0) {
            /* a push to "b" reaches the store within a few intervals */
            uint64_t id = 7;
            float row[4] = {(float)round + 1}, got[4] = {0};
            double t0 = tools__now_s();

            GKVT_OK(gkv_tensor_push(f->s, "b", &id, 1, row, sizeof row, NULL));
            while (got[0] != row[0] && tools__now_s() - t0 < 2) {
                gkv_txn *tx;

                tools__sleep_ms(10);
                GKVT_OK(gkv_txn_begin(f->s, &tx));
                GKVT_OK(gkv_tensor_read(f->s, tx, "b", 7, 8, got, sizeof got));
                gkv_txn_end(tx);
            }
            if (got[0] != row[0])
                fail_msg("round %d: a push to the write-back tensor was not "
                         "flushed in 2 s (seed %llu)", round,
                         (unsigned long long)seed);
        }
        GKVT_OK(gkv_writeback_stop(f->s, "b"));
    }
    pthread_barrier_destroy(&bar);
}

/* The last two write-back tensors stopped at once: both stops could find
 * the list empty and both join the flusher thread (undefined; it can hang
 * or join a thread created later). */
static void
test_writeback_last_two_stop_at_once(void **state)
{
    struct gkvt_store_fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 100);
    pthread_barrier_t bar;
    uint64_t seed = gkvt_seed(), rs = seed ^ 0x5350;

    GKVT_OK(gkv_tensor_create(f->s, "a", &sp));
    GKVT_OK(gkv_tensor_create(f->s, "b", &sp));
    pthread_barrier_init(&bar, NULL, 2);
    for (int round = 0; round < 400; round++) {
        struct flip_arg x = {f->s, &bar, "a", 0, 0, 1}, y = {f->s, &bar, "b", 0, 0, 1};
        pthread_t tx, ty;
        struct timespec dl;
        int running;

        x.spin = (unsigned)(tools__splitmix64(&rs) % 3000);
        y.spin = (unsigned)(tools__splitmix64(&rs) % 3000);
        GKVT_OK(gkv_writeback_start(f->s, "a", 20));
        GKVT_OK(gkv_writeback_start(f->s, "b", 20));
        assert_int_equal(pthread_create(&tx, NULL, flip_main, &x), 0);
        assert_int_equal(pthread_create(&ty, NULL, flip_main, &y), 0);
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 10;
        if (pthread_timedjoin_np(tx, NULL, &dl) != 0 ||
            pthread_timedjoin_np(ty, NULL, &dl) != 0)
            fail_msg("round %d: a stop hung (seed %llu)", round,
                     (unsigned long long)seed);
        GKVT_OK(x.rc);
        GKVT_OK(y.rc);
        pthread_mutex_lock(&f->s->st_wb_mu);
        running = f->s->st_wb_running;
        pthread_mutex_unlock(&f->s->st_wb_mu);
        assert_null(f->s->st_wb);
        assert_int_equal(running, 0);
    }
    pthread_barrier_destroy(&bar);
}

/* Write-back on a full disk: the process lists the tensor in
 * writeback.lock, and when that cannot be written the start fails
 * GKV_EMAPFULL naming the file (it was GKV_EIO, unlike every other
 * disk-full error); the tensor is not in write-back and still takes
 * direct writes. */
static void
test_writeback_start_disk_full(void **state)
{
    char *dir = gkvt_mkdtemp("tmpfs"), fill[4300];
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 100);
    static char block[65536];
    float row[4] = {1, 2, 3, 4}, got[4];
    uint64_t id = 7;
    gkv_store *s;
    int fd;

    (void)state;
    gkvt_tmpfs_or_skip(dir, "size=4m");
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, &(gkv_open_opts){1u << 20, 0}));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    snprintf(fill, sizeof fill, "%s/filler", dir);
    fd = open(fill, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    while (write(fd, block, sizeof block) > 0)
        ;
    while (write(fd, block, 1) > 0)                  /* the last bytes */
        ;
    close(fd);
    assert_int_equal(gkv_writeback_start(s, "t", 1000), GKV_EMAPFULL);
    assert_non_null(strstr(gkv_store_errmsg(s), "writeback.lock"));
    assert_int_equal(unlink(fill), 0);
    GKVT_OK(gkv_tensor_push(s, "t", &id, 1, row, sizeof row, NULL));
    GKVT_OK(gkv_tensor_pull(s, NULL, "t", &id, 1, got, sizeof got));
    assert_memory_equal(got, row, sizeof row);
    gkv_store_close(s);
    gkvt_tmpfs_done(dir);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, gkvt_store_teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_writeback_stop_twice_at_once),
        T(test_writeback_start_while_last_stops),
        T(test_writeback_last_two_stop_at_once),
        T(test_push_while_writeback_starts),
        T(test_write_while_writeback_starts),
        cmocka_unit_test(test_writeback_start_disk_full),
    };
    return cmocka_run_group_tests_name("kv_wb_start_stop", tests, NULL, NULL);
}
