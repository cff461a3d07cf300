/* kv_alloc_test.c - allocation failures, SQLite style: for every call that
 * may allocate, fail its 1st, 2nd, 3rd ... gkv__malloc until the call
 * succeeds. Each failure must be GKV_ENOMEM, free everything the call took
 * (gkv__alloc_live back where it was) and leave the store exactly as it was:
 * the same tensors, the same ids, the same bytes, and verify passing. When
 * the call finally succeeds, its effect must equal that of the same call
 * on a twin store that never saw a failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkvt.h"

#define MAX_ALLOCS 10000   /* no call here makes more; more means a loop */

struct fx {
    char *dir_a, *dir_b;
    gkv_store *a;          /* the store under fault injection */
    gkv_store *b;          /* its twin: the same calls, no failures */
};

/* ---- the state of a store, to compare byte for byte -------------------- */

struct snap {
    gkv_tensor_desc *d;    /* every tensor, optimizer state included */
    size_t n;
    unsigned char **rows;  /* rows[i]: all rows of d[i] */
    size_t *len;
};

static void
snap_take(gkv_store *s, struct snap *sn)
{
    GKVT_OK(gkv_tensor_list(s, NULL, 1, &sn->d, &sn->n));
    sn->rows = calloc(sn->n + 1, sizeof *sn->rows);
    sn->len = calloc(sn->n + 1, sizeof *sn->len);
    for (size_t i = 0; i < sn->n; i++) {
        const gkv_tensor_desc *d = &sn->d[i];

        sn->len[i] = (size_t)(d->hi - d->lo) * d->row_bytes;
        sn->rows[i] = malloc(sn->len[i]);
        GKVT_OK(gkv_tensor_read(s, NULL, d->name, d->lo, d->hi, sn->rows[i],
                                sn->len[i]));
    }
}

static void
snap_free(struct snap *sn)
{
    for (size_t i = 0; i < sn->n; i++)
        free(sn->rows[i]);
    free(sn->rows);
    free(sn->len);
    gkv_free(sn->d);
    memset(sn, 0, sizeof *sn);
}

/* Fails the test unless 'got' and 'want' hold the same tensors (names,
 * descriptions, internal ids) with the same bytes. */
static void
snap_check(const char *what, const struct snap *got, const struct snap *want)
{
    if (got->n != want->n)
        fail_msg("%s: %zu tensors, expected %zu", what, got->n, want->n);
    for (size_t i = 0; i < got->n; i++) {
        const gkv_tensor_desc *g = &got->d[i], *w = &want->d[i];

        if (strcmp(g->name, w->name) != 0)
            fail_msg("%s: tensor %zu is '%s', expected '%s'", what, i,
                     g->name, w->name);
        if (memcmp(g, w, sizeof *g) != 0)
            fail_msg("%s: tensor '%s': description differs (id %u vs %u, "
                     "dtype %d vs %d, chunk_rows %u vs %u)", what, g->name,
                     g->id, w->id, g->dtype, w->dtype, g->chunk_rows,
                     w->chunk_rows);
        if (got->len[i] != want->len[i] ||
            memcmp(got->rows[i], want->rows[i], got->len[i]) != 0) {
            size_t off = 0;
            while (off < got->len[i] && got->rows[i][off] == want->rows[i][off])
                off++;
            fail_msg("%s: tensor '%s': rows differ (first at byte %zu, row "
                     "%zu)", what, g->name, off, off / g->row_bytes);
        }
    }
}

/* ---- fixture: two identical stores ---------------------------------------- */

static gkv_tensor_spec
spec(gkv_dtype dt, uint64_t width, uint64_t lo, uint64_t hi, gkv_init init,
     double a, double b)
{
    gkv_tensor_spec sp = gkvt_spec(dt, width, lo, hi);

    sp.init = init;
    sp.a = a;
    sp.b = b;
    sp.seed = 17;
    return sp;
}

static gkv_err
max_handler(void *ctx, const gkv_tensor_desc *d, uint64_t id, void *row,
            const void *in)
{
    float *w = row;
    const float *x = in;

    (void)ctx;
    (void)id;
    for (uint64_t j = 0; j < d->row_elems; j++)
        if (x[j] > w[j])
            w[j] = x[j];
    return GKV_OK;
}

/* Builds the same tensors in 's', whatever the handle: feat (two default
 * chunks), hot (one-page chunks), cnt (i64, zeros, partly written), emb
 * (with adagrad state) and adm (with adam state). */
static void
populate(gkv_store *s)
{
    gkv_tensor_spec sp;
    gkv_push_args ag = {"adagrad", 0, 0, 0, 0, 0}, am = {"adam", 0, 0, 0, 0, 0};
    uint64_t ids[4] = {3, 9, 3, 1000};
    float g[4 * 4];
    int64_t c[50 * 2];

    sp = spec(GKV_F32, 16, 0, 5000, GKV_INIT_UNIFORM, -1, 1);
    GKVT_OK(gkv_tensor_create(s, "feat", &sp));
    sp = spec(GKV_F32, 8, 100, 3100, GKV_INIT_NORMAL, 0, 2);
    sp.flags = GKV_TENSOR_HOT;
    GKVT_OK(gkv_tensor_create(s, "hot", &sp));
    sp = spec(GKV_I64, 2, 0, 1000, GKV_INIT_ZEROS, 0, 0);
    sp.chunk_rows = 100;
    GKVT_OK(gkv_tensor_create(s, "cnt", &sp));
    for (int i = 0; i < 100; i++)
        c[i] = i * 7 - 300;
    GKVT_OK(gkv_tensor_write(s, "cnt", 420, 470, c, sizeof c));
    sp = spec(GKV_F32, 4, 0, 2000, GKV_INIT_CONST, 0.5, 0);
    GKVT_OK(gkv_tensor_create(s, "emb", &sp));
    sp.flags = GKV_TENSOR_HOT;
    GKVT_OK(gkv_tensor_create(s, "adm", &sp));
    for (int i = 0; i < 16; i++)
        g[i] = (float)(i % 5) * 0.25f - 0.5f;
    GKVT_OK(gkv_tensor_push(s, "emb", ids, 4, g, sizeof g, &ag));
    GKVT_OK(gkv_tensor_push(s, "adm", ids, 4, g, sizeof g, &am));
    GKVT_OK(gkv_handler_register(s, "max", max_handler, NULL));
}

static int teardown(void **state);

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);

    (void)gkvt_seed();
    *state = f;
    f->dir_a = gkvt_mkdtemp("alloc-a");
    f->dir_b = gkvt_mkdtemp("alloc-b");
    if (f->dir_a == NULL || f->dir_b == NULL ||
        gkv_store_open(&f->a, f->dir_a, GKV_CREATE | GKV_NOSYNC, NULL) != GKV_OK ||
        gkv_store_open(&f->b, f->dir_b, GKV_CREATE | GKV_NOSYNC, NULL) != GKV_OK) {
        teardown(state);          /* cmocka runs no teardown after a failed setup */
        return -1;
    }
    populate(f->a);
    populate(f->b);
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    gkvt_alloc_fail_at(-1);
    gkv_store_close(f->a);
    gkv_store_close(f->b);
    gkvt_rmtree(f->dir_a);
    gkvt_rmtree(f->dir_b);
    free(f);
    return 0;
}

/* ---- the countdown -------------------------------------------------------- */

/* One call under test. It runs on store 's'; 'twin' is non-zero for the
 * fault-free run on the twin store. It returns the call's result and may
 * check what a successful call returned. */
typedef gkv_err (*op_fn)(gkv_store *s, void *arg, int twin);

/* Runs op on the twin without failures, then on store a with its k-th
 * allocation failing for k = 1, 2, ... until it succeeds. Returns how many
 * allocations failed (the allocations op makes before its last one). */
static long
countdown(struct fx *f, const char *what, op_fn op, void *arg)
{
    struct snap before, now, twin;
    long k, live0;
    gkv_err rc;

    rc = op(f->b, arg, 1);
    if (rc != GKV_OK)
        fail_msg("%s on the twin store: %s (%s)", what, gkv_err_name(rc),
                 gkv_store_errmsg(f->b));
    snap_take(f->a, &before);
    for (k = 1; k <= MAX_ALLOCS; k++) {
        char where[128];

        snprintf(where, sizeof where, "%s, allocation %ld failing", what, k);
        live0 = gkvt_alloc_live();
        gkvt_alloc_fail_at(k - 1);
        rc = op(f->a, arg, 0);
        gkvt_alloc_fail_at(-1);
        if (rc == GKV_OK)
            break;
        if (rc != GKV_ENOMEM)
            fail_msg("%s: got %s (%s), expected GKV_ENOMEM", where,
                     gkv_err_name(rc), gkv_store_errmsg(f->a));
        if (strstr(gkv_store_errmsg(f->a), "memory") == NULL)
            fail_msg("%s: error detail \"%s\" does not say what ran out",
                     where, gkv_store_errmsg(f->a));
        if (gkvt_alloc_live() != live0)
            fail_msg("%s: %ld blocks leaked", where, gkvt_alloc_live() - live0);
        snap_take(f->a, &now);
        snap_check(where, &now, &before);
        snap_free(&now);
        rc = gkv_store_verify(f->a, NULL, NULL);
        if (rc != GKV_OK)
            fail_msg("%s: verify: %s (%s)", where, gkv_err_name(rc),
                     gkv_store_errmsg(f->a));
    }
    if (k > MAX_ALLOCS)
        fail_msg("%s: still failing after %d allocations", what, MAX_ALLOCS);
    if (getenv("GKVT_VERBOSE") != NULL)
        print_message("  %s: %ld allocations failed in turn\n", what, k - 1);
    /* success: the same effect as on the twin, nothing left allocated */
    assert_int_equal(gkvt_alloc_live(), live0);
    snap_take(f->a, &now);
    snap_take(f->b, &twin);
    snap_check(what, &now, &twin);
    snap_free(&now);
    snap_free(&twin);
    snap_free(&before);
    GKVT_OK(gkv_store_verify(f->a, NULL, NULL));
    return k - 1;
}

/* ---- create --------------------------------------------------------------- */

struct create_op { const char *name; gkv_tensor_spec sp; };

static gkv_err
op_create(gkv_store *s, void *arg, int twin)
{
    struct create_op *c = arg;

    (void)twin;
    return gkv_tensor_create(s, c->name, &c->sp);
}

static void
test_create_each_initializer(void **state)
{
    struct fx *f = *state;
    struct create_op ops[] = {
        {"c/zeros", spec(GKV_F32, 16, 0, 9000, GKV_INIT_ZEROS, 0, 0)},
        {"c/const", spec(GKV_F32, 16, 0, 9000, GKV_INIT_CONST, 2.5, 0)},
        {"c/uniform", spec(GKV_F32, 16, 0, 9000, GKV_INIT_UNIFORM, -3, 3)},
        {"c/normal", spec(GKV_F32, 16, 0, 9000, GKV_INIT_NORMAL, 1, 0.5)},
        {"c/normal_hot", spec(GKV_F64, 3, 50, 700, GKV_INIT_NORMAL, 0, 1)},
        {"c/const_i32", spec(GKV_I32, 5, 0, 1234, GKV_INIT_CONST, -7.5, 0)},
        {"c/uniform_bf16", spec(GKV_BF16, 8, 0, 4000, GKV_INIT_UNIFORM, 0, 1)},
    };

    ops[4].sp.flags = GKV_TENSOR_HOT;
    ops[5].sp.chunk_rows = 10;
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        countdown(f, ops[i].name, op_create, &ops[i]);
    {
        gkv_tensor_desc d;
        GKVT_OK(gkv_tensor_info(f->a, NULL, "c/const_i32", &d));
        assert_int_equal(d.nchunks, 124);
    }
}

/* ---- push ----------------------------------------------------------------- */

struct push_op {
    const char *name;
    const char *handler;
    uint64_t *ids;
    size_t n;
    void *rows;
    size_t rows_len;
};

static gkv_err
op_push(gkv_store *s, void *arg, int twin)
{
    struct push_op *p = arg;
    gkv_push_args pa = {p->handler, 0.05, 0, 0, 0, 0};

    (void)twin;
    return gkv_tensor_push(s, p->name, p->ids, p->n, p->rows, p->rows_len, &pa);
}

/* A push of n rows of 'width' floats at random IDs in [lo, hi) with
 * duplicates (unsorted unless 'sorted'), values in multiples of 1/8. */
static struct push_op
push_make(const char *name, const char *handler, size_t n, uint64_t lo,
          uint64_t hi, uint64_t width, int sorted, uint64_t *seed)
{
    struct push_op p = {name, handler, malloc(n * sizeof(uint64_t)), n,
                        malloc(n * width * sizeof(float)),
                        n * width * sizeof(float)};
    float *v = p.rows;

    for (size_t i = 0; i < n; i++)
        p.ids[i] = sorted ? lo + i * (hi - lo) / n : lo + tools__splitmix64(seed) % (hi - lo);
    if (!sorted && n > 2)
        p.ids[n - 1] = p.ids[0];
    for (size_t i = 0; i < n * width; i++)
        v[i] = (float)((int64_t)(tools__splitmix64(seed) % 33) - 16) / 8.0f;
    return p;
}

static void
push_free(struct push_op *p)
{
    free(p->ids);
    free(p->rows);
}

static void
test_push_each_handler(void **state)
{
    struct fx *f = *state;
    uint64_t seed = gkvt_seed() ^ 0xa110c;
    struct {
        const char *what, *name, *handler;
        size_t n;
        uint64_t lo, hi, width;
        int sorted;
        long min_allocs;      /* allocations the push must make */
    } cases[] = {
        /* >= 64 unsorted IDs: the radix sort takes three blocks */
        {"assign, radix-sorted IDs", "feat", "assign", 700, 0, 5000, 16, 0, 3},
        {"assign, insertion-sorted IDs", "feat", NULL, 40, 0, 5000, 16, 0, 1},
        {"assign, sorted IDs", "hot", "assign", 300, 100, 3100, 8, 1, 1},
        {"add", "hot", "add", 500, 100, 3100, 8, 0, 3},
        {"sgd", "feat", "sgd", 200, 0, 5000, 16, 0, 4},
        {"adagrad, existing state", "emb", "adagrad", 300, 0, 2000, 4, 0, 4},
        {"adagrad, new state", "feat", "adagrad", 300, 0, 5000, 16, 0, 4},
        {"adam, existing state", "adm", "adam", 300, 0, 2000, 4, 0, 4},
        {"adam, new state", "hot", "adam", 90, 100, 3100, 8, 0, 4},
        {"custom handler", "feat", "max", 400, 0, 5000, 16, 0, 3},
    };

    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct push_op p = push_make(cases[i].name, cases[i].handler, cases[i].n,
                                     cases[i].lo, cases[i].hi, cases[i].width,
                                     cases[i].sorted, &seed);
        long failed = countdown(f, cases[i].what, op_push, &p);

        if (failed < cases[i].min_allocs)
            fail_msg("push %s: only %ld allocations failed, expected at least "
                     "%ld: the countdown did not reach the push's buffers",
                     cases[i].what, failed, cases[i].min_allocs);
        push_free(&p);
    }
    {   /* the state companions were created exactly once */
        gkv_tensor_desc d;
        GKVT_OK(gkv_tensor_info(f->a, NULL, "feat#adagrad_s", &d));
        GKVT_OK(gkv_tensor_info(f->a, NULL, "hot#adam_t", &d));
        assert_int_equal(d.dtype, GKV_I64);
    }
}

/* ---- delete, rename ------------------------------------------------------- */

static gkv_err
op_delete(gkv_store *s, void *arg, int twin)
{
    (void)twin;
    return gkv_tensor_delete(s, arg);
}

static gkv_err
op_rename(gkv_store *s, void *arg, int twin)
{
    const char *const *ft = arg;

    (void)twin;
    return gkv_tensor_rename(s, ft[0], ft[1]);
}

static void
test_delete_and_rename(void **state)
{
    struct fx *f = *state;
    const char *ft[2] = {"adm", "node/adm"};
    gkv_tensor_desc d;

    countdown(f, "delete emb and its adagrad state", op_delete, "emb");
    assert_int_equal(gkv_tensor_info(f->a, NULL, "emb#adagrad_s", &d), GKV_ENOTFOUND);
    countdown(f, "rename adm and its adam state", op_rename, ft);
    GKVT_OK(gkv_tensor_info(f->a, NULL, "node/adm#adam_v", &d));
    countdown(f, "delete a zeros tensor", op_delete, "cnt");
}

/* ---- reads: pull, snapshots, verify, list ---------------------------------- */

struct pull_op {
    const char *name;
    uint64_t *ids;
    size_t n;
    size_t row_bytes;
    unsigned char *want;   /* rows as the twin returned them */
    unsigned char *got;
    int use_txn;
};

static gkv_err
op_pull(gkv_store *s, void *arg, int twin)
{
    struct pull_op *p = arg;
    unsigned char *dst = twin ? p->want : p->got;
    size_t len = p->n * p->row_bytes;
    gkv_txn *tx = NULL;
    gkv_err rc;

    memset(dst, 0xee, len);
    if (p->use_txn && (rc = gkv_txn_begin(s, &tx)) != GKV_OK)
        return rc;
    rc = gkv_tensor_pull(s, tx, p->name, p->ids, p->n, dst, len);
    gkv_txn_end(tx);
    if (rc == GKV_OK && !twin && memcmp(p->got, p->want, len) != 0)
        fail_msg("pull of '%s': rows differ from the twin's", p->name);
    return rc;
}

static void
test_pull(void **state)
{
    struct fx *f = *state;
    uint64_t seed = gkvt_seed() ^ 0x9011;
    const struct { const char *name; uint64_t lo, hi; size_t rb; } t[] = {
        {"feat", 0, 5000, 64}, {"hot", 100, 3100, 32}, {"cnt", 0, 1000, 16},
        {"emb#adagrad_s", 0, 2000, 16},
    };

    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        for (int use_txn = 0; use_txn < 2; use_txn++) {
            struct pull_op p = {t[i].name, NULL, 3000, t[i].rb, NULL, NULL, use_txn};
            char what[96];
            long failed;

            p.ids = malloc(p.n * sizeof *p.ids);
            p.want = malloc(p.n * p.row_bytes);
            p.got = malloc(p.n * p.row_bytes);
            for (size_t j = 0; j < p.n; j++)
                p.ids[j] = t[i].lo + tools__splitmix64(&seed) % (t[i].hi - t[i].lo);
            snprintf(what, sizeof what, "pull '%s'%s", t[i].name,
                     use_txn ? " in a snapshot" : "");
            failed = countdown(f, what, op_pull, &p);
            /* the chunk table's two blocks, and the snapshot's */
            assert_int_equal(failed, 2 + use_txn);
            free(p.ids);
            free(p.want);
            free(p.got);
        }
}

static gkv_err
op_verify(gkv_store *s, void *arg, int twin)
{
    gkv_verify_report rep;
    const char *name = arg;
    gkv_err rc;

    (void)twin;
    if ((rc = gkv_store_verify(s, name, &rep)) == GKV_OK) {
        assert_int_equal(rep.bad_chunks, 0);
        assert_true(rep.chunks_checked >= 1);
    }
    return rc;
}

static gkv_err
op_list(gkv_store *s, void *arg, int twin)
{
    const int *with_state = arg;
    gkv_tensor_desc *v;
    size_t n;
    gkv_err rc;

    (void)twin;
    if ((rc = gkv_tensor_list(s, NULL, *with_state, &v, &n)) != GKV_OK)
        return rc;
    /* 5 tensors, 4 state companions, 20 x/NN */
    assert_int_equal(n, *with_state ? 29 : 25);
    assert_string_equal(v[0].name, "adm");
    assert_string_equal(v[n - 1].name, "x/19");
    for (size_t i = 1; i < n; i++)
        assert_true(strcmp(v[i - 1].name, v[i].name) < 0);
    gkv_free(v);
    return GKV_OK;
}

static void
test_verify_and_list(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = spec(GKV_U8, 3, 0, 10, GKV_INIT_CONST, 1, 0);
    int zero = 0, one = 1;

    /* more than 16 tensors: the list array grows by realloc */
    for (int i = 0; i < 20; i++) {
        char name[16];
        snprintf(name, sizeof name, "x/%02d", i);
        GKVT_OK(gkv_tensor_create(f->a, name, &sp));
        GKVT_OK(gkv_tensor_create(f->b, name, &sp));
    }
    assert_int_equal(countdown(f, "verify all", op_verify, NULL), 5);
    countdown(f, "verify one", op_verify, "emb");
    assert_int_equal(countdown(f, "list", op_list, &zero), 2);
    assert_int_equal(countdown(f, "list with state", op_list, &one), 2);
}

/* ---- open, handlers --------------------------------------------------------- */

static void
test_open_and_register(void **state)
{
    struct fx *f = *state;
    long k, live0;
    gkv_store *s;
    gkv_err rc;

    gkv_store_close(f->a);      /* one handle per store and process */
    f->a = NULL;
    for (k = 1; k <= MAX_ALLOCS; k++) {
        live0 = gkvt_alloc_live();
        gkvt_alloc_fail_at(k - 1);
        rc = gkv_store_open(&s, f->dir_a, 0, NULL);
        gkvt_alloc_fail_at(-1);
        if (rc == GKV_OK)
            break;
        assert_int_equal(rc, GKV_ENOMEM);
        assert_null(s);
        assert_int_equal(gkvt_alloc_live(), live0);
    }
    assert_true(k >= 3);                 /* the handle and its path */
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    for (k = 1; k <= MAX_ALLOCS; k++) {
        live0 = gkvt_alloc_live();
        gkvt_alloc_fail_at(k - 1);
        rc = gkv_handler_register(s, "max", max_handler, NULL);
        gkvt_alloc_fail_at(-1);
        if (rc == GKV_OK)
            break;
        assert_int_equal(rc, GKV_ENOMEM);
        assert_non_null(strstr(gkv_store_errmsg(s), "memory"));
        assert_int_equal(gkvt_alloc_live(), live0);
    }
    assert_int_equal(k, 2);
    {   /* the handler registered on the second try works */
        uint64_t id = 7;
        float in[16], got[16], before[16];

        GKVT_OK(gkv_tensor_pull(s, NULL, "feat", &id, 1, before, sizeof before));
        for (int j = 0; j < 16; j++)
            in[j] = j % 2 ? 5.0f : -5.0f;
        GKVT_OK(gkv_tensor_push(s, "feat", &id, 1, in, sizeof in,
                                &(gkv_push_args){"max", 0, 0, 0, 0, 0}));
        GKVT_OK(gkv_tensor_pull(s, NULL, "feat", &id, 1, got, sizeof got));
        for (int j = 0; j < 16; j++)
            assert_true(got[j] == (j % 2 ? 5.0f : before[j]));
    }
    live0 = gkvt_alloc_live();
    gkv_store_close(s);
    assert_int_equal(gkvt_alloc_live(), live0 - 3);   /* handle, path, handler */
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_each_initializer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_each_handler, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_and_rename, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pull, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_and_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_and_register, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
