/* kv_race_test.c - races between loading a write-back copy and other
 * writers, made deterministic with the load hook (kv__wb_load_hook in
 * kv/kv_test.h): it runs another handle's (or thread's) call at the exact
 * point inside a load where the race hurt.
 *
 * 1. gkv_writeback_start read the tensor and each state companion through
 *    snapshots of their own. Another process deleting and recreating the
 *    tensor (other rows) in between gave the copy old weights beside the
 *    new tensor's t#adam_m, and the next adam push wrote past the end of
 *    that state copy; a plain push from another process in between gave
 *    weights from before that push beside state from after it. Fixed: one
 *    snapshot for the tensor and all its companions, each checked to have
 *    the tensor's rows.
 * 2. The first optimizer push of a write-back copy created its companions
 *    in the store, loaded them and installed the copies in three steps; a
 *    gkv_opt_reset committing in between deleted the companions, the copy
 *    was still installed, and the next flush reported a false "deleted or
 *    replaced by another handle" and wrote adam_v and adam_t without
 *    adam_m. Fixed: a copy is installed only when no write-back reset ran
 *    since the load began (else it is loaded again), and a push or
 *    restore that finds its state dropped again after the load (a reset
 *    in between) loads it again instead of failing with GKV_EBUSY. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "gkvt.h"
#include "gkvt_wb.h"
#include "kv/kv_test.h"     /* kv__wb_load_hook, kv__wb_find, kv_mirror */

/* ---- the hook ---------------------------------------------------------- */

enum hook_act { H_NONE, H_REPLACE, H_PUSH, H_RESET };

static struct {
    enum hook_act act;
    const char *on;       /* fires once, at the load of this name */
    const char *dir;      /* the store, for another process */
    int fired;
    int status;           /* the other process's wait status */
    gkv_err rc;           /* the reset's result */
} hk;

/* Another process (a handle of its own) changes t: H_REPLACE deletes it
 * and creates a t of one f32 per row, pushed once with adam at ID 5;
 * H_PUSH pushes adam at ID 5 to the t there is. */
static void
other_process(enum hook_act act)
{
    gkv_tensor_spec sp;
    gkv_store *s2;
    uint64_t id = 5;
    float g[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    gkv_push_args adam = {"adam", 0, 0, 0, 0, 0};
    pid_t pid;

    fflush(NULL);
    if ((pid = fork()) == 0) {
        alarm(30);
        /* a writer that does not check the write-back lock: those the
         * library refuses now; this is what a flush must still survive */
        gkvt_wb_unguard(hk.dir);
        if (gkv_store_open(&s2, hk.dir, GKV_NOSYNC, NULL) != GKV_OK)
            _exit(2);
        if (act == H_REPLACE) {
            sp = gkvt_spec(GKV_F32, 1, 0, 1024);
            sp.chunk_rows = 64;
            if (gkv_tensor_delete(s2, "t") != GKV_OK)
                _exit(3);
            if (gkv_tensor_create(s2, "t", &sp) != GKV_OK)
                _exit(4);
            if (gkv_tensor_push(s2, "t", &id, 1, g, 4, &adam) != GKV_OK)
                _exit(5);
        } else if (gkv_tensor_push(s2, "t", &id, 1, g, sizeof g, &adam) != GKV_OK) {
            _exit(6);
        }
        gkv_store_close(s2);
        _exit(0);
    }
    assert_true(pid > 0);
    while (waitpid(pid, &hk.status, 0) < 0)
        ;
}

static void
load_hook(gkv_store *s, const char *name)
{
    /* hk.on NULL: once a state load has installed its copies */
    if (hk.act == H_NONE || hk.fired ||
        (hk.on == NULL ? name != NULL
                       : name == NULL || strcmp(name, hk.on) != 0))
        return;
    hk.fired = 1;
    if (hk.act == H_RESET)   /* as another thread would, now */
        hk.rc = gkv_opt_reset(s, "t", "adam");
    else
        other_process(hk.act);
}

static void
hook_arm(enum hook_act act, const char *on, const char *dir)
{
    memset(&hk, 0, sizeof hk);
    hk.act = act;
    hk.on = on;
    hk.dir = dir;
    kv__wb_load_hook = load_hook;
}

static void
hook_disarm(void)
{
    kv__wb_load_hook = NULL;
    hk.act = H_NONE;
}

/* ---- helpers ------------------------------------------------------------ */

static const char *const suf[5] = {
    "", "#adagrad_s", "#adam_m", "#adam_v", "#adam_t"
};

/* Every state copy of write-back tensor 'name' has the rows of its tensor
 * copy: same IDs and chunking, the row shape (one i64 for adam_t). */
static void
copy_geometry_ok(gkv_store *s, const char *name)
{
    kv_wb *w;

    pthread_rwlock_rdlock(&s->st_wb_lock);
    w = kv__wb_find(s, name);
    assert_non_null(w);
    for (int i = 1; i < 5; i++) {
        const kv_rec *t = &w->m[0].r, *c = &w->m[i].r;
        uint64_t elems = i == 4 ? 1 : t->row_elems;

        if (w->m[i].rows == NULL)
            continue;
        if (c->lo != t->lo || c->hi != t->hi ||
            c->chunk_rows != t->chunk_rows || c->row_elems != elems) {
            pthread_rwlock_unlock(&s->st_wb_lock);
            fail_msg("the write-back copy of '%s' (rows [%llu, %llu) of %llu "
                     "elements) holds '%s%s' with rows [%llu, %llu) of %llu "
                     "elements: state of another tensor", name,
                     (unsigned long long)t->lo, (unsigned long long)t->hi,
                     (unsigned long long)t->row_elems, name, suf[i],
                     (unsigned long long)c->lo, (unsigned long long)c->hi,
                     (unsigned long long)c->row_elems);
        }
    }
    pthread_rwlock_unlock(&s->st_wb_lock);
}

static const gkv_push_args g_adam = {"adam", 0, 0, 0, 0, 0};

/* Ends the write-back of t (its stop must give 'stop'), checks the store,
 * closes it and removes dir. */
static void
store_done(gkv_store *s, char *dir, gkv_err stop)
{
    assert_int_equal(gkv_writeback_stop(s, "t"), stop);
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* A store in dir with t (8 f32 a row over [0, 1024), chunks of 64) pushed
 * once with adam at ID 5 (g, all ones). */
static gkv_store *
adam_store(const char *dir, const float g[8])
{
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 8, 0, 1024);
    uint64_t id = 5;
    gkv_store *s;

    sp.chunk_rows = 64;
    sp.init = GKV_INIT_UNIFORM;
    sp.a = -1;
    sp.b = 1;
    sp.seed = 3;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_tensor_push(s, "t", &id, 1, g, 8 * sizeof *g, &g_adam));
    return s;
}

/* gkv_writeback_start of t while another process (in dir) does 'act' at
 * the load of t: the other process and the start must succeed. */
static void
start_racing(gkv_store *s, enum hook_act act, const char *dir)
{
    gkv_err rc;

    hook_arm(act, "t", dir);
    rc = gkv_writeback_start(s, "t", 100000);
    hook_disarm();
    assert_true(hk.fired);
    if (!WIFEXITED(hk.status) || WEXITSTATUS(hk.status) != 0)
        fail_msg("the other process failed (status 0x%x)", hk.status);
    GKVT_OK(rc);
}

/* ---- 1. gkv_writeback_start: one snapshot ------------------------------ */

/* Another process deletes t and creates a t of other rows (with adam
 * state) while this handle's start has read t and not yet its state. */
static void
test_start_tensor_replaced_during_load(void **state)
{
    char *dir = gkvt_mkdtemp("racerepl");
    float g[8] = {1, 1, 1, 1, 1, 1, 1, 1}, w1[1], m1[1];
    uint64_t id = 5, last = 1023;
    int64_t t1;
    gkv_store *s = adam_store(dir, g);
    gkv_txn *tx;
    gkv_err rc;

    (void)state;
    start_racing(s, H_REPLACE, dir);
    /* the copy is the old t with the old t's state, all of it */
    copy_geometry_ok(s, "t");
    /* so an adam push to its last row stays inside the state copies */
    GKVT_OK(gkv_tensor_push(s, "t", &last, 1, g, sizeof g, &g_adam));
    /* the flush finds t replaced: the copy is dropped, the new t kept */
    rc = gkv_writeback_flush(s);
    assert_int_equal(rc, GKV_ENOTFOUND);
    assert_non_null(strstr(gkv_store_errmsg(s), "another handle"));
    GKVT_OK(gkv_txn_begin(s, &tx));
    GKVT_OK(gkv_tensor_pull(s, tx, "t", &id, 1, w1, sizeof w1));
    GKVT_OK(gkv_tensor_pull(s, tx, "t#adam_m", &id, 1, m1, sizeof m1));
    GKVT_OK(gkv_tensor_pull(s, tx, "t#adam_t", &id, 1, &t1, sizeof t1));
    assert_true(fabsf(m1[0] - 0.1f) < 1e-6f);
    assert_int_equal(t1, 1);
    GKVT_OK(gkv_tensor_pull(s, tx, "t#adam_t", &last, 1, &t1, sizeof t1));
    assert_int_equal(t1, 0);     /* the push to the dropped copy: not here */
    gkv_txn_end(tx);
    store_done(s, dir, GKV_ENOTFOUND);
}

/* Another process pushes t with adam while this handle's start has read t
 * and not yet its state: the copy must be t and state as of one push
 * boundary (here: before that push), never weights from before and state
 * from after it. */
static void
test_start_push_during_load(void **state)
{
    char *dir = gkvt_mkdtemp("racepush");
    float g[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    float w0[8], m0[8], v0[8], w1[8], m1[8], v1[8];
    uint64_t id = 5;
    int64_t t0, t1;
    gkv_store *s = adam_store(dir, g);
    gkv_txn *tx;

    (void)state;
    GKVT_OK(gkv_txn_begin(s, &tx));
    GKVT_OK(gkv_tensor_pull(s, tx, "t", &id, 1, w0, sizeof w0));
    GKVT_OK(gkv_tensor_pull(s, tx, "t#adam_m", &id, 1, m0, sizeof m0));
    GKVT_OK(gkv_tensor_pull(s, tx, "t#adam_v", &id, 1, v0, sizeof v0));
    GKVT_OK(gkv_tensor_pull(s, tx, "t#adam_t", &id, 1, &t0, sizeof t0));
    gkv_txn_end(tx);
    assert_int_equal(t0, 1);
    start_racing(s, H_PUSH, dir);
    /* the copy (reads without a snapshot) */
    GKVT_OK(gkv_tensor_pull(s, NULL, "t", &id, 1, w1, sizeof w1));
    GKVT_OK(gkv_tensor_pull(s, NULL, "t#adam_m", &id, 1, m1, sizeof m1));
    GKVT_OK(gkv_tensor_pull(s, NULL, "t#adam_v", &id, 1, v1, sizeof v1));
    GKVT_OK(gkv_tensor_pull(s, NULL, "t#adam_t", &id, 1, &t1, sizeof t1));
    assert_memory_equal(w1, w0, sizeof w0);
    if (t1 != t0 || memcmp(m1, m0, sizeof m0) != 0 ||
        memcmp(v1, v0, sizeof v0) != 0)
        fail_msg("the write-back copy holds t's weights from before the "
                 "other process's push and its adam state from after it "
                 "(step count %lld, expected %lld)", (long long)t1,
                 (long long)t0);
    GKVT_OK(gkv_writeback_stop(s, "t"));
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* ---- 2. gkv_opt_reset while the first optimizer push loads state ------- */

/* A store in dir with t (2 f32 a row over [0, 16)) in write-back, and
 * the reference: the same tensor 'ref', never in write-back, pushed once
 * with adam (g, 2 floats, at id). */
static gkv_store *
reset_store(const char *dir, uint64_t id, const float g[2])
{
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 2, 0, 16);
    gkv_store *s;

    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "ref", &sp));
    GKVT_OK(gkv_tensor_push(s, "ref", &id, 1, g, 2 * sizeof *g, &g_adam));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_writeback_start(s, "t", 100000));
    return s;
}

/* Pushes len bytes of 'in' to 'name' at id (with pa, may be NULL) while
 * the hook resets t's adam state at the load of 'on' (NULL: once a state
 * load has installed its copies): the push ('what') and the reset must
 * both succeed. */
static void
push_racing_reset(gkv_store *s, const char *on, const char *name,
                  uint64_t id, const float *in, size_t len,
                  const gkv_push_args *pa, const char *what)
{
    gkv_err rc;

    hook_arm(H_RESET, on, NULL);
    rc = gkv_tensor_push(s, name, &id, 1, in, len, pa);
    hook_disarm();
    if (rc != GKV_OK)
        fail_msg("%s: %s: %s", what, gkv_err_name(rc), gkv_store_errmsg(s));
    assert_true(hk.fired);
    GKVT_OK(hk.rc);
}

/* Rows 'name' and 'ref' (suffix i) are equal in snapshot tx. */
static void
stored_same(gkv_store *s, gkv_txn *tx, int i)
{
    char a[64], b[64];
    gkv_tensor_desc d;
    unsigned char *x, *y;
    size_t len;
    gkv_err rc;

    snprintf(a, sizeof a, "t%s", suf[i]);
    snprintf(b, sizeof b, "ref%s", suf[i]);
    GKVT_OK(gkv_tensor_info(s, tx, b, &d));
    len = (size_t)(d.hi - d.lo) * d.row_bytes;
    assert_non_null(x = malloc(len));
    assert_non_null(y = malloc(len));
    GKVT_OK(gkv_tensor_read(s, tx, b, d.lo, d.hi, y, len));
    if ((rc = gkv_tensor_read(s, tx, a, d.lo, d.hi, x, len)) != GKV_OK)
        fail_msg("'%s' after a reset and one adam push: %s (%s)", a,
                 gkv_err_name(rc), gkv_store_errmsg(s));
    if (memcmp(x, y, len) != 0)
        fail_msg("'%s' is not what one adam push after the reset gives", a);
    free(x);
    free(y);
}

/* t and its adam state equal ref's, in one snapshot. */
static void
family_same(gkv_store *s)
{
    gkv_txn *tx;

    GKVT_OK(gkv_txn_begin(s, &tx));
    for (int i = 0; i < 5; i++)
        if (i != 1)
            stored_same(s, tx, i);
    gkv_txn_end(tx);
}

/* The reset commits after the push created t's adam state in the store
 * and before it installed the copies (deterministic: the hook runs it
 * there). The store must then go through a serial order: here the reset,
 * then the push (the state the push loaded was deleted: load again). */
static void
test_reset_during_state_load(void **state)
{
    char *dir = gkvt_mkdtemp("racereset");
    float g[2] = {1, 1};
    uint64_t id = 3;
    gkv_store *s = reset_store(dir, id, g);
    gkv_err rc;

    (void)state;
    push_racing_reset(s, "t#adam_m", "t", id, g, sizeof g, &g_adam,
                      "adam push");
    rc = gkv_writeback_flush(s);
    if (rc != GKV_OK)
        fail_msg("flush: %s: %s (this is the only handle)", gkv_err_name(rc),
                 gkv_store_errmsg(s));
    family_same(s);
    store_done(s, dir, GKV_OK);
}

/* The reset commits after the push created the state and before the
 * snapshot it loads through begins: the snapshot has no companions. The
 * push failed with GKV_ENOTFOUND "no tensor 't#adam_m'"; it must create
 * them again (the serial order: the reset, then the push). */
static void
test_reset_before_state_snapshot(void **state)
{
    char *dir = gkvt_mkdtemp("racereset0");
    float g[2] = {1, 1};
    uint64_t id = 3;
    gkv_store *s = reset_store(dir, id, g);

    (void)state;
    push_racing_reset(s, "", "t", id, g, sizeof g, &g_adam, "adam push");
    GKVT_OK(gkv_writeback_flush(s));
    family_same(s);
    store_done(s, dir, GKV_OK);
}

/* The reset commits just after the state load installed its copies, and
 * before the push (or restore) that asked for them uses them: they are
 * gone again. The call must load them again, not fail (it answered
 * GKV_EBUSY "optimizer state not loaded"): the serial order is the reset,
 * then the push or restore. */
static void
test_reset_after_state_load(void **state)
{
    char *dir = gkvt_mkdtemp("racereset2");
    float g[2] = {1, 1}, m[2] = {0.25f, -0.5f}, got[2];
    uint64_t id = 3;
    gkv_store *s = reset_store(dir, id, g);
    gkv_txn *tx;

    (void)state;
    /* an optimizer push */
    push_racing_reset(s, NULL, "t", id, g, sizeof g, &g_adam, "adam push");
    GKVT_OK(gkv_writeback_flush(s));
    family_same(s);
    /* a restore, after a reset drops the state again */
    GKVT_OK(gkv_opt_reset(s, "t", "adam"));
    push_racing_reset(s, NULL, "t#adam_m", id, m, sizeof m, NULL, "restore");
    GKVT_OK(gkv_writeback_flush(s));
    GKVT_OK(gkv_tensor_pull(s, NULL, "t#adam_m", &id, 1, got, sizeof got));
    assert_memory_equal(got, m, sizeof m);
    GKVT_OK(gkv_txn_begin(s, &tx));
    GKVT_OK(gkv_tensor_pull(s, tx, "t#adam_m", &id, 1, got, sizeof got));
    assert_memory_equal(got, m, sizeof m);
    gkv_txn_end(tx);
    store_done(s, dir, GKV_OK);
}

/* The same with real threads, many times: one pushes t with adam, one
 * resets its adam state. Whatever the timing, every call succeeds (no
 * false "another handle", no "state not loaded"), and the store holds
 * state of one serial order: m, v and the step count agree (the gradient
 * is always 1, so k steps from fresh give m = 1 - 0.9^k, v = 1 - 0.999^k
 * as f32 computes them). */
struct reset_arg {
    gkv_store *s;
    int n;
    gkv_err rc;
    char msg[256];
};

static void *
reset_main(void *p)
{
    struct reset_arg *a = p;

    for (int i = 0; i < a->n && a->rc == GKV_OK; i++)
        if ((a->rc = gkv_opt_reset(a->s, "t", "adam")) != GKV_OK)
            snprintf(a->msg, sizeof a->msg, "%s", gkv_store_errmsg(a->s));
    return NULL;
}

static void
state_agrees(gkv_store *s, gkv_txn *tx, uint64_t id)
{
    float m[2], v[2];
    float em = 0, ev = 0;
    int64_t t;
    gkv_err rm, rv, rt;

    rm = gkv_tensor_pull(s, tx, "t#adam_m", &id, 1, m, sizeof m);
    rv = gkv_tensor_pull(s, tx, "t#adam_v", &id, 1, v, sizeof v);
    rt = gkv_tensor_pull(s, tx, "t#adam_t", &id, 1, &t, sizeof t);
    if (rm == GKV_ENOTFOUND && rv == GKV_ENOTFOUND && rt == GKV_ENOTFOUND)
        return;   /* a reset last */
    if (rm != GKV_OK || rv != GKV_OK || rt != GKV_OK)
        fail_msg("adam state half there: adam_m %s, adam_v %s, adam_t %s",
                 gkv_err_name(rm), gkv_err_name(rv), gkv_err_name(rt));
    for (int64_t k = 0; k < t; k++) {   /* as kv/handler.c computes it */
        const double b1 = 0.9, b2 = 0.999, gr = 1;
        em = (float)(b1 * em + (1 - b1) * gr);
        ev = (float)(b2 * ev + (1 - b2) * gr * gr);
    }
    if (m[0] != em || v[0] != ev)
        fail_msg("adam state of no serial order: step count %lld with m %g "
                 "(expected %g) and v %g (expected %g)", (long long)t,
                 (double)m[0], (double)em, (double)v[0], (double)ev);
}

static void
test_reset_races_pushes(void **state)
{
    char *dir = gkvt_mkdtemp("raceresetth");
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 2, 0, 16);
    float g[2] = {1, 1};
    uint64_t id = 3;
    struct reset_arg ra;
    gkv_store *s;
    gkv_txn *tx;
    pthread_t th;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_writeback_start(s, "t", 1));   /* background flushes too */
    memset(&ra, 0, sizeof ra);
    ra.s = s;
    ra.n = 300;
    assert_int_equal(pthread_create(&th, NULL, reset_main, &ra), 0);
    for (int i = 0; i < 600; i++) {
        gkv_err rc = gkv_tensor_push(s, "t", &id, 1, g, sizeof g, &g_adam);
        if (rc != GKV_OK)
            fail_msg("push %d: %s: %s", i, gkv_err_name(rc),
                     gkv_store_errmsg(s));
        if (i % 50 == 0) {
            /* each commit (flush, reset) leaves a serial state */
            GKVT_OK(gkv_txn_begin(s, &tx));
            state_agrees(s, tx, id);
            gkv_txn_end(tx);
            if ((rc = gkv_writeback_flush(s)) != GKV_OK)
                fail_msg("flush after push %d: %s: %s (this is the only "
                         "handle)", i, gkv_err_name(rc), gkv_store_errmsg(s));
        }
    }
    pthread_join(th, NULL);
    if (ra.rc != GKV_OK)
        fail_msg("reset: %s: %s", gkv_err_name(ra.rc), ra.msg);
    GKVT_OK(gkv_writeback_flush(s));
    state_agrees(s, NULL, id);     /* the copy, now that no reset runs */
    GKVT_OK(gkv_txn_begin(s, &tx));
    state_agrees(s, tx, id);
    gkv_txn_end(tx);
    store_done(s, dir, GKV_OK);
}

int
main(void)
{
    /* Each failed before the fix its section above names (the last one
     * only by chance: it is the timing-free check of the same fix). */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_tensor_replaced_during_load),
        cmocka_unit_test(test_start_push_during_load),
        cmocka_unit_test(test_reset_during_state_load),
        cmocka_unit_test(test_reset_before_state_snapshot),
        cmocka_unit_test(test_reset_after_state_load),
        cmocka_unit_test(test_reset_races_pushes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
