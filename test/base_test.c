/* base_test.c - base/: the one per-thread error detail, read with
 * gkv_errmsg() after failures of kv/, graph/ and net/ calls (and by each
 * layer's alias), kept apart between threads; the allocation hooks and
 * the monotonic clock. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkvt.h"
#include <errno.h>
#include "base/base.h"

struct fx {
    char *dir;
    gkv_store *s;
};

static int
fx_setup(void **state)
{
    return gkvt_store_setup(state, sizeof(struct fx), "base");
}

/* ---- kv/ -------------------------------------------------------------- */

static void
test_kv_detail(void **state)
{
    struct fx *f = *state;
    gkv_store *none = NULL;
    gkv_tensor_desc d;
    char path[4096];

    /* a failed open: about no handle */
    snprintf(path, sizeof path, "%s/absent", f->dir);
    assert_int_equal(gkv_store_open(&none, path, 0, NULL), GKV_ENOENT);
    assert_null(none);
    assert_string_not_equal(gkv_errmsg(), "");
    assert_string_equal(gkv_store_errmsg(NULL), gkv_errmsg());
    assert_string_equal(gkv_store_errmsg(f->s), "");

    /* a failed call on a store: the same slot, about that store */
    assert_int_equal(gkv_tensor_info(f->s, NULL, "no_such_tensor", &d),
                     GKV_ENOTFOUND);
    assert_non_null(strstr(gkv_errmsg(), "no_such_tensor"));
    assert_ptr_equal(gkv_store_errmsg(f->s), gkv_errmsg());
    assert_string_equal(gkv_store_errmsg(NULL), "");

    /* a good call clears it */
    GKVT_OK(gkv_tensor_create(f->s, "t", &(gkv_tensor_spec){
        .dtype = GKV_F32, .ndim = 1, .shape = {4}, .lo = 0, .hi = 8}));
    assert_string_equal(gkv_errmsg(), "");

    /* a call with no store: GKV_EINVAL with the detail */
    {
        char base[GKV_NAME_MAX + 1];
        int step;

        assert_int_equal(gkv_opt_state_split("t#nope", base, &step),
                         GKV_EINVAL);
        assert_non_null(strstr(gkv_errmsg(), "t#nope"));
        GKVT_OK(gkv_opt_state_split("t#adam_t", base, &step));
        assert_string_equal(base, "t");
        assert_int_equal(step, 1);
        assert_string_equal(gkv_errmsg(), "");
    }
}

/* ---- graph/ ----------------------------------------------------------- */

static void
test_graph_detail(void **state)
{
    gkv_graph *g, *g2;

    GKVT_OK(gkv_graph_new_homo(&g, 4));
    GKVT_OK(gkv_graph_new_homo(&g2, 4));
    assert_int_equal(gkv_graph_add_etype(g, "_N", "x", "nope", NULL),
                     GKV_ENOTFOUND);
    assert_non_null(strstr(gkv_errmsg(), "'nope'"));
    assert_ptr_equal(gkv_graph_errmsg(g), gkv_errmsg());
    assert_string_equal(gkv_graph_errmsg(g2), "");   /* about g, not g2 */
    gkv_graph_free(g);
    gkv_graph_free(g2);

    /* a sampler call on a bad sgraph spec */
    {
        gkv_sgraph *sg = NULL;

        assert_int_equal(gkv_sgraph_new(&sg, 0, NULL, 0, NULL, NULL),
                         GKV_EINVAL);
        assert_string_not_equal(gkv_errmsg(), "");
        assert_ptr_equal(gkv_sgraph_errmsg(NULL), gkv_errmsg());
    }
    (void)state;
}

/* ---- net/ ------------------------------------------------------------- */

static void
test_net_detail(void **state)
{
    struct fx *f = *state;
    gkv_ipconfig *ic = NULL;
    gkv_client *c = NULL;
    char path[4096];

    snprintf(path, sizeof path, "%s/ip.txt", f->dir);
    gkvt_write_text(path, "127.0.0.1 30050\nnot an address at all\n", 0644);
    assert_int_equal(gkv_ipconfig_load(&ic, path), GKV_EFORMAT);
    assert_null(ic);
    assert_non_null(strstr(gkv_errmsg(), "ip.txt:2"));
    assert_ptr_equal(gkv_net_errmsg(), gkv_errmsg());

    assert_int_equal(gkv_client_connect_addr(&c, "no port here", NULL, "g",
                                             0, NULL), GKV_EINVAL);
    assert_null(c);
    assert_non_null(strstr(gkv_errmsg(), "no port here"));
    assert_ptr_equal(gkv_net_errmsg(), gkv_errmsg());
}

/* ---- threads ---------------------------------------------------------- */

struct thr {
    gkv_store *s;
    const char *name;         /* the tensor this thread fails to find */
    pthread_barrier_t *bar;
    char seen[GKV__MSG_MAX];  /* its gkv_errmsg() once both failed */
    char idle[GKV__MSG_MAX];  /* its gkv_errmsg() before any call */
    int rc;
};

static void *
thr_main(void *p)
{
    struct thr *t = p;
    gkv_tensor_desc d;

    snprintf(t->idle, sizeof t->idle, "%s", gkv_errmsg());
    t->rc = gkv_tensor_info(t->s, NULL, t->name, &d);
    pthread_barrier_wait(t->bar);   /* both have failed ... */
    snprintf(t->seen, sizeof t->seen, "%s", gkv_errmsg());
    pthread_barrier_wait(t->bar);   /* ... and both have read */
    return NULL;
}

static void
test_threads_apart(void **state)
{
    struct fx *f = *state;
    pthread_barrier_t bar;
    pthread_t th[2];
    struct thr t[2] = {{.s = f->s, .name = "alpha_missing", .bar = &bar},
                       {.s = f->s, .name = "beta_missing", .bar = &bar}};
    gkv_tensor_desc d;

    /* this thread's own message stays put while the others fail */
    assert_int_equal(gkv_tensor_info(f->s, NULL, "main_missing", &d),
                     GKV_ENOTFOUND);
    assert_int_equal(pthread_barrier_init(&bar, NULL, 2), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, thr_main, &t[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(t[i].rc, GKV_ENOTFOUND);
        assert_string_equal(t[i].idle, "");
        assert_non_null(strstr(t[i].seen, t[i].name));
        assert_null(strstr(t[i].seen, t[1 - i].name));
        assert_null(strstr(t[i].seen, "main_missing"));
    }
    assert_non_null(strstr(gkv_errmsg(), "main_missing"));
}

/* ---- base/ itself ----------------------------------------------------- */

static void
test_fail_reads_slot(void **state)
{
    /* a message may quote the current one, as "pull: %s" does */
    gkv__fail(NULL, GKV_EIO, "inner %d", 7);
    assert_int_equal(gkv__fail(&state, GKV_EIO, "outer: %s", gkv_errmsg()),
                     GKV_EIO);
    assert_string_equal(gkv_errmsg(), "outer: inner 7");
    assert_string_equal(gkv__errmsg_about(&state), "outer: inner 7");
    assert_string_equal(gkv__errmsg_about(NULL), "");
    gkv__clear(NULL);
    assert_string_equal(gkv_errmsg(), "");
    assert_int_equal(gkv__from_errno(ENOENT), GKV_ENOENT);
    assert_int_equal(gkv__from_errno(EACCES), GKV_EPERM);
    assert_int_equal(gkv__from_errno(EIO), GKV_EIO);
}

static void
test_alloc_and_clock(void **state)
{
    long live = gkv__alloc_live();
    uint64_t t0 = gkv__now_ns(), m0 = gkv__now_ms();
    struct timespec ts, now;
    void *p;

    gkv__alloc_fail_at(1);
    p = gkv__malloc(8);               /* the 0th succeeds */
    assert_non_null(p);
    assert_null(gkv__malloc(8));      /* the 1st fails */
    assert_int_equal(gkv__alloc_live(), live + 1);
    gkv__free(p);
    gkv__alloc_fail_at(-1);
    assert_int_equal(gkv__alloc_live(), live);

    gkv__mono_deadline(&ts, 1500);
    clock_gettime(CLOCK_MONOTONIC, &now);
    assert_true(ts.tv_sec > now.tv_sec ||
                (ts.tv_sec == now.tv_sec && ts.tv_nsec > now.tv_nsec));
    assert_true(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000L);
    assert_true(gkv__now_ns() >= t0);
    assert_true(gkv__now_ms() >= m0);
    assert_true(gkv__now_ms() - gkv__now_ns() / 1000000u <= 1);
    (void)state;
}

/* The arena: 16-aligned, distinct blocks; a reset keeps its memory as one
 * chunk (the next allocations reuse it, allocating nothing); holds()
 * tells handed-out memory; free gives everything back. */
static void
test_arena(void **state)
{
    long live;
    gkv__arena a = {0};
    unsigned char *p[40];
    size_t size;

    for (int i = 0; i < 40; i++) {
        p[i] = gkv__arena_alloc(&a, (size_t)i * 100, 1024);
        assert_non_null(p[i]);
        assert_int_equal((uintptr_t)p[i] % 16, 0);
        memset(p[i], i, (size_t)i * 100);
        assert_true(gkv__arena_holds(&a, p[i]));
    }
    for (int i = 1; i < 40; i++)        /* nothing overwrote another */
        assert_int_equal(p[i][0], i);
    assert_true(a.nar > 1);
    size = gkv__arena_size(&a);
    gkv__arena_reset(&a);
    assert_int_equal(a.nar, 1);
    assert_int_equal(gkv__arena_size(&a), size);
    assert_false(gkv__arena_holds(&a, p[0]));
    live = gkv__alloc_live();
    assert_non_null(gkv__arena_alloc(&a, size / 2, 1024));
    assert_int_equal(gkv__alloc_live(), live);   /* reused, not allocated */
    gkv__arena_free(&a);
    assert_int_equal(a.nar, 0);
    assert_non_null(gkv__arena_alloc(&a, 10, 64));   /* usable again */
    gkv__arena_free(&a);
    (void)state;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kv_detail, fx_setup,
                                        gkvt_store_teardown),
        cmocka_unit_test(test_graph_detail),
        cmocka_unit_test_setup_teardown(test_net_detail, fx_setup,
                                        gkvt_store_teardown),
        cmocka_unit_test_setup_teardown(test_threads_apart, fx_setup,
                                        gkvt_store_teardown),
        cmocka_unit_test(test_fail_reads_slot),
        cmocka_unit_test(test_alloc_and_clock),
        cmocka_unit_test(test_arena),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
