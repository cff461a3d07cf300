/* kv_wb_state_test.c - every call that changes rows, on a tensor in
 * write-back mode and on its optimizer-state companions ("t#adagrad_s"):
 * it reaches the RAM copy (and the flush writes it) or it is refused and
 * changes nothing. Each tensor in write-back mode has a twin that gets the
 * same calls without write-back: their bytes are compared in RAM, in the
 * store before and after a flush, and after reopening. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkvt.h"
#include "gkvt_wb.h"
#include "kv/kv_test.h"     /* st_wb_running */

#define W 8            /* row width (f32) */
#define N 2000         /* rows, IDs [100, 100 + N) */

static const char *const suffixes[] = {
    "#adagrad_s", "#adam_m", "#adam_v", "#adam_t"
};
#define NSUF (sizeof suffixes / sizeof *suffixes)

static gkv_tensor_spec
spec(gkv_dtype dt)
{
    gkv_tensor_spec sp;

    memset(&sp, 0, sizeof sp);
    sp.dtype = dt;
    sp.ndim = 1;
    sp.shape[0] = W;
    sp.lo = 100;
    sp.hi = 100 + N;
    sp.flags = GKV_TENSOR_HOT;    /* many chunks */
    sp.init = GKV_INIT_UNIFORM;
    sp.a = -1;
    sp.b = 1;
    sp.seed = 11;
    return sp;
}

/* Tensor a+suffix and b+suffix hold the same bytes: read through tx, or
 * without a snapshot (RAM copies) when tx is NULL. */
static void
same(gkv_store *s, gkv_txn *tx, const char *a, const char *b,
     const char *suffix, const char *when)
{
    char na[64], nb[64];
    size_t la, lb;
    unsigned char *x, *y;

    snprintf(na, sizeof na, "%s%s", a, suffix);
    snprintf(nb, sizeof nb, "%s%s", b, suffix);
    x = gkvt_tensor_all(s, tx, na, &la);
    y = gkvt_tensor_all(s, tx, nb, &lb);
    assert_int_equal(la, lb);
    if (memcmp(x, y, la) != 0)
        fail_msg("%s: '%s' and '%s' differ %s", when, na, nb,
                 tx ? "in the store" : "(reads without a snapshot)");
    free(x);
    free(y);
}

/* The tensor and all four companions of 'a' and 'b' are equal. */
static void
family_same(gkv_store *s, gkv_txn *tx, const char *a, const char *b,
            const char *when)
{
    same(s, tx, a, b, "", when);
    for (size_t i = 0; i < NSUF; i++)
        same(s, tx, a, b, suffixes[i], when);
}

/* The same, through a fresh snapshot (the store). */
static void
family_same_stored(gkv_store *s, const char *a, const char *b,
                   const char *when)
{
    gkv_txn *tx;

    GKVT_OK(gkv_txn_begin(s, &tx));
    family_same(s, tx, a, b, when);
    gkv_txn_end(tx);
}

/* Adagrad and Adam pushes to both, so that all four companions exist. */
static void
optim_both(gkv_store *s, uint64_t *rs, const char *a, const char *b)
{
    static const char *const hs[] = {"adagrad", "adam"};
    uint64_t ids[200];
    float rows[200 * W];

    for (int k = 0; k < 4; k++) {
        gkv_push_args pa = {hs[k % 2], 0.05, 0, 0, 0, 0};
        gkvt_rand_rows(rs, ids, rows, 200, 100, N, W);
        ids[150] = ids[3];                           /* a duplicate */
        GKVT_OK(gkv_tensor_push(s, a, ids, 200, rows, sizeof rows, &pa));
        GKVT_OK(gkv_tensor_push(s, b, ids, 200, rows, sizeof rows, &pa));
    }
}

/* Snapshot bytes of every companion of 't' and of 't' itself, in order. */
static unsigned char *
family_stored(gkv_store *s, const char *t, size_t *len)
{
    unsigned char *all = NULL;
    gkv_txn *tx;

    *len = 0;
    GKVT_OK(gkv_txn_begin(s, &tx));
    for (size_t i = 0; i <= NSUF; i++) {
        char n[64];
        size_t l;
        unsigned char *b;

        snprintf(n, sizeof n, "%s%s", t, i < NSUF ? suffixes[i] : "");
        b = gkvt_tensor_all(s, tx, n, &l);
        all = realloc(all, *len + l);
        memcpy(all + *len, b, l);
        *len += l;
        free(b);
    }
    gkv_txn_end(tx);
    return all;
}

/* Direct writes to the state companions of a write-back tensor: push
 * with every handler but assign, delete, rename, create, write-back
 * start. Each is GKV_EINVAL with a message naming the companion, in RAM
 * and in the store nothing changes, and the optimizer goes on from the
 * same state as the twin's (also after a flush and a reopen). (Assign
 * pushes and range writes restore state: kv_opt_state_test.c.) */
static void
test_state_writes_refused(void **state)
{
    static const char *const hs[] = {"add", "sgd", "adagrad", "adam", "mul"};
    char *dir = gkvt_mkdtemp("wbst");
    gkv_tensor_spec sp = spec(GKV_F32);
    uint64_t rs = gkvt_seed() ^ 0x51, ids[50];
    float rows[50 * W];
    unsigned char *before, *after;
    size_t lb, la;
    gkv_store *s;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_handler_register(s, "mul", gkvt_h_mul, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_tensor_create(s, "ref", &sp));
    optim_both(s, &rs, "t", "ref");            /* companions in the store */
    GKVT_OK(gkv_writeback_start(s, "t", 100000));   /* flush when asked */
    optim_both(s, &rs, "t", "ref");            /* and changed in RAM */
    before = family_stored(s, "t", &lb);
    gkvt_rand_rows(&rs, ids, rows, 50, 100, N, W);
    for (size_t i = 0; i < NSUF; i++) {
        char n[64];
        gkv_tensor_desc d;

        snprintf(n, sizeof n, "t%s", suffixes[i]);
        GKVT_OK(gkv_tensor_info(s, NULL, n, &d));
        for (size_t h = 0; h < sizeof hs / sizeof *hs; h++) {
            gkv_push_args pa = {hs[h], 0.05, 0, 0, 0, 0};
            assert_int_equal(gkv_tensor_push(s, n, ids, 50, rows,
                                             50 * d.row_bytes, &pa),
                             GKV_EINVAL);
            assert_non_null(strstr(gkv_store_errmsg(s), n));
            assert_non_null(strstr(gkv_store_errmsg(s), "optimizer state"));
        }
        assert_int_equal(gkv_tensor_delete(s, n), GKV_EINVAL);
        assert_int_equal(gkv_tensor_rename(s, n, "moved"), GKV_EINVAL);
        assert_int_equal(gkv_tensor_rename(s, "ref", n), GKV_EINVAL);
        assert_int_equal(gkv_tensor_create(s, n, &sp), GKV_EINVAL);
        assert_int_equal(gkv_writeback_start(s, n, 0), GKV_EINVAL);
        assert_int_equal(gkv_writeback_stop(s, n), GKV_EINVAL);
    }
    /* nothing reached the store, and the RAM copies are the twin's */
    after = family_stored(s, "t", &la);
    assert_int_equal(la, lb);
    assert_memory_equal(before, after, la);
    free(after);
    family_same(s, NULL, "t", "ref", "after the refused writes");
    /* the optimizer goes on from that state */
    optim_both(s, &rs, "t", "ref");
    family_same(s, NULL, "t", "ref", "after more optimizer pushes");
    GKVT_OK(gkv_writeback_flush(s));
    family_same_stored(s, "t", "ref", "after a flush");
    GKVT_OK(gkv_writeback_stop(s, "t"));
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    GKVT_OK(gkv_store_open(&s, dir, GKV_RDONLY, NULL));
    family_same_stored(s, "t", "ref", "after reopening");
    gkv_store_close(s);
    free(before);
    gkvt_rmtree(dir);
}

/* Every call that changes rows of the write-back tensor itself: pushes
 * with every handler and range writes (whole chunks, parts of chunks, one
 * row) reach the RAM copy only: the store keeps the rows it had until the
 * flush, then holds the twin's, also after a reopen; delete and rename are
 * GKV_EBUSY and change nothing. */
static void
test_tensor_writes_to_copy(void **state)
{
    static const char *const hs[] = {"assign", "add", "sgd", "adagrad",
                                     "adam", "mul"};
    char *dir = gkvt_mkdtemp("wbtw");
    gkv_tensor_spec sp = spec(GKV_F32);
    uint64_t rs = gkvt_seed() ^ 0x52, ids[300];
    float rows[300 * W];
    unsigned char *b0, *b1;
    size_t l0, l1;
    gkv_tensor_desc d;
    gkv_store *s;
    gkv_txn *tx;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_handler_register(s, "mul", gkvt_h_mul, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_tensor_create(s, "ref", &sp));
    optim_both(s, &rs, "t", "ref");
    GKVT_OK(gkv_tensor_info(s, NULL, "t", &d));
    assert_true(d.chunk_rows > 2 && 2 * d.chunk_rows + 5 <= 300);   /* rows[] */
    GKVT_OK(gkv_writeback_start(s, "t", 100000));
    b0 = family_stored(s, "t", &l0);
    for (int round = 0; round < 18; round++) {
        gkv_push_args pa = {hs[round % 6], 0.05, 0, 0, 0, 0};
        size_t n = 1 + tools__splitmix64(&rs) % 300;
        uint64_t a = 100 + tools__splitmix64(&rs) % (N - 300);
        uint64_t len = round % 3 == 0 ? 1 : round % 3 == 1 ? d.chunk_rows
                                                           : 2 * d.chunk_rows + 5;

        gkvt_rand_rows(&rs, ids, rows, n, 100, N, W);
        ids[n / 2] = ids[0];
        GKVT_OK(gkv_tensor_push(s, "t", ids, n, rows, n * W * 4, &pa));
        GKVT_OK(gkv_tensor_push(s, "ref", ids, n, rows, n * W * 4, &pa));
        if (round % 3 == 1)     /* whole chunks */
            a = 100 + (a - 100) / d.chunk_rows * d.chunk_rows;
        GKVT_OK(gkv_tensor_write(s, "t", a, a + len, rows, len * W * 4));
        GKVT_OK(gkv_tensor_write(s, "ref", a, a + len, rows, len * W * 4));
        family_same(s, NULL, "t", "ref", "in RAM");
    }
    /* refused, and nothing changes */
    assert_int_equal(gkv_tensor_delete(s, "t"), GKV_EBUSY);
    assert_non_null(strstr(gkv_store_errmsg(s), "'t' is in write-back mode"));
    assert_int_equal(gkv_tensor_rename(s, "t", "u"), GKV_EBUSY);
    assert_int_equal(gkv_tensor_rename(s, "ref", "t"), GKV_EBUSY);
    assert_int_equal(gkv_tensor_create(s, "t", &sp), GKV_EEXIST);
    family_same(s, NULL, "t", "ref", "in RAM after the refused calls");
    /* the store still holds what it held at start */
    b1 = family_stored(s, "t", &l1);
    assert_int_equal(l0, l1);
    assert_memory_equal(b0, b1, l0);
    free(b1);
    GKVT_OK(gkv_writeback_flush(s));
    family_same_stored(s, "t", "ref", "after a flush");
    /* the twin's rows are not the start's: the comparison means something */
    GKVT_OK(gkv_txn_begin(s, &tx));
    b1 = gkvt_tensor_all(s, tx, "t", &l1);
    gkv_txn_end(tx);
    assert_true(memcmp(b0 + l0 - l1, b1, l1) != 0);
    free(b1);
    gkv_store_close(s);        /* close flushes; nothing was left */
    GKVT_OK(gkv_store_open(&s, dir, GKV_RDONLY, NULL));
    family_same_stored(s, "t", "ref", "after reopening");
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    free(b0);
    gkvt_rmtree(dir);
}

/* Names of the state companions of 'name' in the store. */
static int
state_count(gkv_store *s, const char *name)
{
    gkv_tensor_desc *v;
    size_t n, pl = strlen(name);
    int c = 0;

    GKVT_OK(gkv_tensor_list(s, NULL, 1, &v, &n));
    for (size_t i = 0; i < n; i++)
        if (strncmp(v[i].name, name, pl) == 0 && v[i].name[pl] == '#')
            c++;
    gkv_free(v);
    return c;
}

/* A push refused by its checks (bad ID, bad length, an optimizer on an
 * integer tensor) or one of no rows changes nothing in write-back mode
 * either: it used to create the optimizer-state companions in the store
 * (and load them) before checking. Then a good push still matches the twin
 * in RAM, after a flush and after a reopen. */
static void
test_bad_push_creates_no_state(void **state)
{
    char *dir = gkvt_mkdtemp("wbbp");
    gkv_tensor_spec sp = spec(GKV_F32), spi = spec(GKV_I32);
    uint64_t rs = gkvt_seed() ^ 0x53, ids[40];
    float rows[40 * W];
    gkv_push_args ag = {"adagrad", 0.05, 0, 0, 0, 0}, am = {"adam", 0.05, 0, 0, 0, 0};
    unsigned char *b0, *b1;
    size_t l0, l1;
    gkv_store *s;
    gkv_txn *tx;

    (void)state;
    spi.init = GKV_INIT_CONST;
    spi.a = 3;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_tensor_create(s, "ref", &sp));
    GKVT_OK(gkv_tensor_create(s, "ti", &spi));
    GKVT_OK(gkv_tensor_create(s, "refi", &spi));
    GKVT_OK(gkv_writeback_start(s, "t", 100000));
    GKVT_OK(gkv_writeback_start(s, "ti", 100000));
    GKVT_OK(gkv_txn_begin(s, &tx));
    b0 = gkvt_tensor_all(s, tx, "t", &l0);
    gkv_txn_end(tx);
    gkvt_rand_rows(&rs, ids, rows, 40, 100, N, W);
    for (int k = 0; k < 2; k++) {
        const char *t = k ? "ref" : "t", *ti = k ? "refi" : "ti";

        ids[17] = 100 + N;                           /* out of range */
        assert_int_equal(gkv_tensor_push(s, t, ids, 40, rows, sizeof rows, &ag),
                         GKV_ERANGE);
        assert_int_equal(gkv_tensor_push(s, t, ids, 40, rows, sizeof rows, &am),
                         GKV_ERANGE);
        ids[17] = 100;
        assert_int_equal(gkv_tensor_push(s, t, ids, 40, rows, sizeof rows - 4,
                                         &am), GKV_ESHAPE);
        assert_int_equal(gkv_tensor_push(s, ti, ids, 40, rows, sizeof rows, &ag),
                         GKV_EINVAL);
        assert_non_null(strstr(gkv_store_errmsg(s), "floating dtype"));
        GKVT_OK(gkv_tensor_push(s, t, ids, 0, rows, 0, &am));
        assert_int_equal(gkv_tensor_push(s, ti, ids, 0, rows, 0, &ag),
                         GKV_EINVAL);
    }
    /* the twin got no state: nor did the write-back tensors */
    assert_int_equal(state_count(s, "ref"), 0);
    assert_int_equal(state_count(s, "refi"), 0);
    assert_int_equal(state_count(s, "t"), 0);
    assert_int_equal(state_count(s, "ti"), 0);
    b1 = gkvt_tensor_all(s, NULL, "t", &l1);                /* RAM */
    assert_memory_equal(b0, b1, l0);
    free(b1);
    GKVT_OK(gkv_writeback_flush(s));
    assert_int_equal(state_count(s, "t"), 0);
    GKVT_OK(gkv_txn_begin(s, &tx));
    b1 = gkvt_tensor_all(s, tx, "t", &l1);                  /* store */
    gkv_txn_end(tx);
    assert_memory_equal(b0, b1, l0);
    free(b1);
    same(s, NULL, "ti", "refi", "", "integer tensor after refused pushes");
    /* a good push creates the state, as the twin's */
    optim_both(s, &rs, "t", "ref");
    family_same(s, NULL, "t", "ref", "in RAM");
    GKVT_OK(gkv_writeback_flush(s));
    family_same_stored(s, "t", "ref", "after a flush");
    gkv_store_close(s);
    GKVT_OK(gkv_store_open(&s, dir, GKV_RDONLY, NULL));
    family_same_stored(s, "t", "ref", "after reopening");
    assert_int_equal(state_count(s, "ti"), 0);
    same(s, NULL, "ti", "refi", "", "integer tensor after reopening");
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    free(b0);
    gkvt_rmtree(dir);
}

/* Another process deletes a tensor this handle holds in write-back mode.
 * A create of that name on this handle used to succeed while the old copy
 * stayed: this handle's pulls then read the old rows and its pushes went
 * to the copy, and the next flush dropped them. Now it is GKV_EBUSY and
 * the store has no such tensor; after the stop (GKV_ENOTFOUND, the copy
 * dropped) the create works and pushes reach the new tensor, as on a twin
 * created the same way (checked in the store and after a reopen). */
static void
test_create_over_dropped_copy(void **state)
{
    char *dir = gkvt_mkdtemp("wbcr"), *err = NULL;
    gkv_tensor_spec sp = spec(GKV_F32), sp2 = spec(GKV_F32);
    uint64_t rs = gkvt_seed() ^ 0x54, ids[100];
    float rows[100 * W];
    gkv_tensor_desc d;
    unsigned char *a, *b;
    size_t la, lb;
    gkv_store *s;
    gkv_txn *tx;

    (void)state;
    sp2.init = GKV_INIT_CONST;
    sp2.a = 7;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_writeback_start(s, "t", 100000));
    gkvt_rand_rows(&rs, ids, rows, 100, 100, N, W);
    GKVT_OK(gkv_tensor_push(s, "t", ids, 100, rows, sizeof rows, NULL));
    /* while the store has it: GKV_EEXIST, as for any tensor */
    assert_int_equal(gkv_tensor_create(s, "t", &sp2), GKV_EEXIST);
    {
        char *rm[] = {(char *)gkvt_prog("kvctl"), dir, "rm", "t", NULL};
        gkvt_wb_unguard(dir);           /* a writer that does not check */
        assert_int_equal(gkvt_run(rm, NULL, 0, NULL, &err, 60), 0);
        free(err);
    }
    assert_int_equal(gkv_tensor_create(s, "t", &sp2), GKV_EBUSY);
    assert_non_null(strstr(gkv_store_errmsg(s), "tensor 't' is in write-back "
                           "mode"));
    assert_non_null(strstr(gkv_store_errmsg(s), "gkv_writeback_stop"));
    GKVT_OK(gkv_txn_begin(s, &tx));
    assert_int_equal(gkv_tensor_info(s, tx, "t", &d), GKV_ENOTFOUND);
    gkv_txn_end(tx);
    assert_int_equal(gkv_writeback_stop(s, "t"), GKV_ENOTFOUND);
    assert_non_null(strstr(gkv_store_errmsg(s), "copy is dropped"));
    /* now the create works, and writes reach the new tensor */
    GKVT_OK(gkv_tensor_create(s, "t", &sp2));
    GKVT_OK(gkv_tensor_create(s, "ref", &sp2));
    gkvt_rand_rows(&rs, ids, rows, 100, 100, N, W);
    GKVT_OK(gkv_tensor_push(s, "t", ids, 100, rows, sizeof rows, NULL));
    GKVT_OK(gkv_tensor_push(s, "ref", ids, 100, rows, sizeof rows, NULL));
    GKVT_OK(gkv_tensor_write(s, "t", 1000, 1010, rows, 10 * W * 4));
    GKVT_OK(gkv_tensor_write(s, "ref", 1000, 1010, rows, 10 * W * 4));
    a = gkvt_tensor_all(s, NULL, "t", &la);
    b = gkvt_tensor_all(s, NULL, "ref", &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    free(a);
    free(b);
    assert_int_equal(gkv_writeback_flush(s), GKV_OK);   /* nothing dropped */
    gkv_store_close(s);
    GKVT_OK(gkv_store_open(&s, dir, GKV_RDONLY, NULL));
    a = gkvt_tensor_all(s, NULL, "t", &la);
    b = gkvt_tensor_all(s, NULL, "ref", &lb);
    assert_memory_equal(a, b, la);
    free(a);
    free(b);
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* Another process deletes the only tensor this handle holds in write-back
 * mode, and a flush drops its copy. The flusher thread used to keep
 * running: gkv_store_close() then freed the store under it (a
 * use-after-free that ASan reports) after waiting out its interval. Now a
 * close returns at once, and a stop that learns of the drop (GKV_ENOTFOUND)
 * ends the thread too. The other tensor, pushed directly, keeps its bytes
 * (checked after reopening). */
static void
test_close_after_last_copy_dropped(void **state)
{
    char *dir = gkvt_mkdtemp("wbcl"), *err = NULL;
    char *rm[] = {(char *)gkvt_prog("kvctl"), NULL, "rm", "t", NULL};
    gkv_tensor_spec sp = spec(GKV_F32);
    uint64_t rs = gkvt_seed() ^ 0x55, ids[100];
    float rows[100 * W];
    unsigned char *a = NULL, *b;
    size_t la = 0, lb;
    gkv_store *s;
    double t0;

    (void)state;
    rm[1] = dir;
    for (int how = 0; how < 2; how++) {
        GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
        GKVT_OK(gkv_tensor_create(s, "t", &sp));
        if (how == 0)
            GKVT_OK(gkv_tensor_create(s, "ref", &sp));
        GKVT_OK(gkv_writeback_start(s, "t", 20000));
        gkvt_rand_rows(&rs, ids, rows, 100, 100, N, W);
        GKVT_OK(gkv_tensor_push(s, "t", ids, 100, rows, sizeof rows, NULL));
        GKVT_OK(gkv_tensor_push(s, "ref", ids, 100, rows, sizeof rows, NULL));
        free(a);
        a = gkvt_tensor_all(s, NULL, "ref", &la);
        gkvt_wb_unguard(dir);           /* a writer that does not check */
        assert_int_equal(gkvt_run(rm, NULL, 0, NULL, &err, 60), 0);
        free(err);
        if (how == 0) {
            assert_int_equal(gkv_writeback_flush(s), GKV_ENOTFOUND);
        } else {
            assert_int_equal(gkv_writeback_stop(s, "t"), GKV_ENOTFOUND);
            assert_non_null(strstr(gkv_store_errmsg(s), "copy is dropped"));
            pthread_mutex_lock(&s->st_wb_mu);
            assert_int_equal(s->st_wb_running, 0);
            pthread_mutex_unlock(&s->st_wb_mu);
        }
        t0 = tools__now_s();
        gkv_store_close(s);
        if (tools__now_s() - t0 > 5)
            fail_msg("close took %.1f s: it waited for the flusher thread of "
                     "a store with no write-back tensor left",
                     tools__now_s() - t0);
    }
    GKVT_OK(gkv_store_open(&s, dir, GKV_RDONLY, NULL));
    b = gkvt_tensor_all(s, NULL, "ref", &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    free(a);
    free(b);
    gkvt_rmtree(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_writes_refused),
        cmocka_unit_test(test_tensor_writes_to_copy),
        cmocka_unit_test(test_bad_push_creates_no_state),
        cmocka_unit_test(test_create_over_dropped_copy),
        cmocka_unit_test(test_close_after_last_copy_dropped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
