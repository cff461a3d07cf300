/* kv_wb_undo_test.c - the undo log of write-back pushes (kv/wb_rows.c), which
 * one store keeps for its pushes and replaces with a larger one when a push
 * needs it:
 *
 *   - two threads push adagrad steps of growing size (their logs from 3 MB,
 *     under the kept size, past 4 MiB and growing) into one write-back
 *     tensor, on disjoint rows: the rows and their state equal the same
 *     pushes made one after the other on a direct tensor of another store
 *     (the log was once given back after the lock was let go, and a push
 *     growing it meanwhile made the other free an unmapped block);
 *   - when the last tensor leaves write-back mode the log is freed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "gkvt.h"
#include "kv/kv_int.h"

enum { W = 128, HALF = 60000, NPUSH = 8 };

struct pusher {
    gkv_store *s;
    int half;           /* rows [half * HALF, (half + 1) * HALF) */
    gkv_err rc;
};

/* Push k of pusher 'half': its IDs (distinct, in its half) and gradients. */
static size_t
push_k(int half, int k, uint64_t *ids, float *g)
{
    size_t n = 3000 + (size_t)k * 1500;     /* 3.1 MB .. 13.9 MB of log */
    uint64_t x = (uint64_t)(half * 1000 + k) * 0x9e3779b97f4a7c15ull;
    size_t step = 7919;                     /* prime, coprime to HALF */

    for (size_t i = 0; i < n; i++) {
        ids[i] = (uint64_t)half * HALF + (x % HALF + i * step) % HALF;
        for (int j = 0; j < W; j++)
            g[i * W + j] = (float)(((i * 31 + (size_t)j * 7 + (size_t)k) % 17)
                                   - 8) / 16.0f;
    }
    return n;
}

static void *
pusher_run(void *arg)
{
    struct pusher *p = arg;
    const gkv_push_args a = {.handler = "adagrad", .lr = 0.1, .eps = 1e-10};
    uint64_t *ids = malloc(20000 * sizeof *ids);
    float *g = malloc((size_t)20000 * W * 4);

    p->rc = GKV_OK;
    for (int k = 0; k < NPUSH && p->rc == GKV_OK; k++) {
        size_t n = push_k(p->half, k, ids, g);

        p->rc = gkv_tensor_push(p->s, "e", ids, n, g, n * W * 4, &a);
    }
    free(ids);
    free(g);
    return NULL;
}

static gkv_store *
make(const char *dir)
{
    gkv_tensor_spec sp = gkvt_spec_init(GKV_F32, W, 0, 2 * HALF,
                                        GKV_INIT_UNIFORM);
    gkv_store *s;

    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "e", &sp));
    return s;
}

static void
test_two_pushers_share_the_log(void **state)
{
    char *d1 = gkvt_mkdtemp("wbundo"), *d2 = gkvt_mkdtemp("wbundo");
    gkv_store *wb = make(d1), *ref = make(d2);
    struct pusher p[2] = {{wb, 0, 0}, {wb, 1, 0}};
    pthread_t th[2];
    const char *names[] = {"e", "e#adagrad_s"};
    size_t len = (size_t)2 * HALF * W * 4;
    uint64_t *all = malloc(2 * HALF * sizeof *all);
    float *a = malloc(len), *b = malloc(len);

    (void)state;
    GKVT_OK(gkv_writeback_start(wb, "e", 0));
    for (int t = 0; t < 2; t++)
        assert_int_equal(pthread_create(&th[t], NULL, pusher_run, &p[t]), 0);
    for (int t = 0; t < 2; t++) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
        GKVT_OK(p[t].rc);
    }
    assert_non_null(wb->st_wb_undo);        /* kept: under UNDO_KEEP */
    /* the reference: the same pushes, one pusher after the other */
    for (int t = 0; t < 2; t++) {
        struct pusher r = {ref, t, 0};

        pusher_run(&r);
        GKVT_OK(r.rc);
    }
    for (size_t i = 0; i < 2 * HALF; i++)
        all[i] = i;
    for (int k = 0; k < 2; k++) {
        GKVT_OK(gkv_tensor_pull(wb, NULL, names[k], all, 2 * HALF, a, len));
        GKVT_OK(gkv_tensor_pull(ref, NULL, names[k], all, 2 * HALF, b, len));
        assert_memory_equal(a, b, len);
    }
    /* the last tensor leaves write-back mode: the log goes with it */
    GKVT_OK(gkv_writeback_stop(wb, "e"));
    assert_null(wb->st_wb_undo);
    assert_int_equal(wb->st_wb_undo_len, 0);
    gkv_store_close(wb);
    gkv_store_close(ref);
    gkvt_rmtree(d1);
    gkvt_rmtree(d2);
    free(all);
    free(a);
    free(b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_pushers_share_the_log),
    };

    return cmocka_run_group_tests_name("kv_wb_undo", tests, NULL, NULL);
}
