/* kv_push_finite_test.c - a push through add, sgd, adagrad or adam that
 * carries a NaN or an infinity is refused whole (GKV_EINVAL, naming the
 * tensor, the handler, the row ID and the column), for every float dtype,
 * directly and in write-back mode: the rows and the optimizer state are
 * byte for byte what they were. assign stores such values (data), and the
 * next assign replaces them. The scan (gkv_dtype_nonfinite) finds a bad
 * value anywhere and passes every finite one.
 * Finite values whose result is not finite in the dtype it is stored in
 * (adagrad's sum of squares of 3e38 in f32, 60000 + 60000 in f16, lr 1e30
 * times a gradient of 1e30) are refused the same way, naming where (the
 * row or its state companion) and why, directly and in write-back mode
 * (where earlier rows of the push were already stepped: they are put
 * back); a result that is exactly the largest finite value, or rounds to
 * it, is applied. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkvt.h"

#define W  5            /* row width */
#define LO 10
#define N  200          /* rows, IDs [LO, LO + N) */
#define NP 8            /* IDs per push */

static const gkv_dtype dtypes[] = {GKV_F32, GKV_F16, GKV_BF16, GKV_F64};
static const char *const handlers[] = {"add", "sgd", "adagrad", "adam"};
/* the tensor, then its companions */
static const char *const fam_suf[5] = {
    "", "#adagrad_s", "#adam_m", "#adam_v", "#adam_t"
};

enum bad { BAD_NAN, BAD_PINF, BAD_NINF };
static const char *const bad_text[] = {"NaN", "+inf", "-inf"};

static double
bad_value(enum bad b)
{
    return b == BAD_NAN ? NAN : b == BAD_PINF ? INFINITY : -INFINITY;
}

/* NP rows of small finite gradients, IDs spread over the tensor. */
static void
batch(gkv_dtype dt, uint64_t *ids, unsigned char *rows, unsigned salt)
{
    for (size_t i = 0; i < NP; i++) {
        ids[i] = LO + (i * 23 + salt) % N;
        for (size_t j = 0; j < W; j++)
            gkvt_elem_set(dt, rows, i * W + j, 0.125 * (double)((i + j + salt) % 5) - 0.25);
    }
}

/* Every row of the tensor and of each companion it has (NULL: none),
 * read without a snapshot (so the RAM copy in write-back mode). */
struct fam { unsigned char *b[5]; size_t len[5]; };

static struct fam
fam_get(gkv_store *s, const char *name)
{
    struct fam f;

    for (int i = 0; i < 5; i++) {
        char n[128];
        gkv_tensor_desc d;
        gkv_err rc;

        snprintf(n, sizeof n, "%s%s", name, fam_suf[i]);
        f.b[i] = NULL;
        f.len[i] = 0;
        if ((rc = gkv_tensor_info(s, NULL, n, &d)) == GKV_ENOTFOUND)
            continue;
        GKVT_OK(rc);
        f.len[i] = (size_t)(d.hi - d.lo) * d.row_bytes;
        assert_non_null(f.b[i] = malloc(f.len[i]));
        GKVT_OK(gkv_tensor_read(s, NULL, n, d.lo, d.hi, f.b[i], f.len[i]));
    }
    return f;
}

static void
fam_same(const struct fam *a, const struct fam *b, const char *what)
{
    for (int i = 0; i < 5; i++)
        if ((a->b[i] == NULL) != (b->b[i] == NULL) || a->len[i] != b->len[i] ||
            (a->b[i] != NULL && memcmp(a->b[i], b->b[i], a->len[i]) != 0))
            fail_msg("%s: '%s' changed", what, fam_suf[i][0] ? fam_suf[i] : "the tensor");
}

static void
fam_free(struct fam *f)
{
    for (int i = 0; i < 5; i++)
        free(f->b[i]);
}

/* Every handler, dtype and kind of bad value on tensor "emb" of a fresh
 * store, in write-back mode or not. */
static void
refuse_all(int writeback)
{
    char *dir = gkvt_mkdtemp("finite");
    unsigned char rows[NP * W * 8];
    uint64_t ids[NP];
    gkv_store *s;

    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    for (size_t di = 0; di < sizeof dtypes / sizeof *dtypes; di++) {
        gkv_dtype dt = dtypes[di];
        gkv_tensor_spec sp = gkvt_spec_init(dt, W, LO, LO + N, GKV_INIT_UNIFORM);

        sp.flags = GKV_TENSOR_HOT;
        GKVT_OK(gkv_tensor_create(s, "emb", &sp));
        if (writeback)
            GKVT_OK(gkv_writeback_start(s, "emb", 1000));
        for (size_t hi = 0; hi < sizeof handlers / sizeof *handlers; hi++) {
            gkv_push_args pa = {.handler = handlers[hi], .lr = 0.1};

            /* a good push first, so that the optimizer state exists */
            batch(dt, ids, rows, (unsigned)hi);
            GKVT_OK(gkv_tensor_push(s, "emb", ids, NP, rows, NP * W * gkv_dtype_size(dt), &pa));
            for (int b = BAD_NAN; b <= BAD_NINF; b++) {
                size_t bi = 3 + (size_t)b, bj = (size_t)(b + 1) % W;
                struct fam before, after;
                char want[160], what[160];
                gkv_err rc;

                batch(dt, ids, rows, (unsigned)(hi + 7 * (unsigned)b));
                gkvt_elem_set(dt, rows, bi * W + bj, bad_value((enum bad)b));
                before = fam_get(s, "emb");
                rc = gkv_tensor_push(s, "emb", ids, NP, rows,
                                     NP * W * gkv_dtype_size(dt), &pa);
                snprintf(what, sizeof what, "%s %s %s%s", gkv_dtype_name(dt),
                         handlers[hi], bad_text[b], writeback ? " write-back" : "");
                if (rc != GKV_EINVAL)
                    fail_msg("%s: push answered %s, not GKV_EINVAL", what,
                             gkv_err_name(rc));
                snprintf(want, sizeof want, "tensor 'emb': push '%s': row %llu "
                         "col %zu is %s: refused, nothing applied", handlers[hi],
                         (unsigned long long)ids[bi], bj, bad_text[b]);
                if (strstr(gkv_store_errmsg(s), want) == NULL)
                    fail_msg("%s: message \"%s\", expected \"%s\"", what,
                             gkv_store_errmsg(s), want);
                after = fam_get(s, "emb");
                fam_same(&before, &after, what);
                fam_free(&before);
                fam_free(&after);
            }
        }
        if (writeback) {
            GKVT_OK(gkv_writeback_stop(s, "emb"));
        }
        GKVT_OK(gkv_tensor_delete(s, "emb"));
    }
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

static void
test_refused_direct(void **state)
{
    (void)state;
    refuse_all(0);
}

static void
test_refused_writeback(void **state)
{
    (void)state;
    refuse_all(1);
}

/* A refused first optimizer push creates no state companion. */
static void
test_refused_first_push_creates_no_state(void **state)
{
    char *dir = gkvt_mkdtemp("finite");
    gkv_tensor_spec sp = gkvt_spec_init(GKV_F32, W, LO, LO + N, GKV_INIT_UNIFORM);
    gkv_push_args pa = {.handler = "adam"};
    unsigned char rows[NP * W * 4];
    uint64_t ids[NP];
    gkv_tensor_desc d;
    gkv_store *s;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "emb", &sp));
    for (int wb = 0; wb < 2; wb++) {
        if (wb)
            GKVT_OK(gkv_writeback_start(s, "emb", 1000));
        batch(GKV_F32, ids, rows, 1);
        gkvt_elem_set(GKV_F32, rows, NP * W - 1, NAN);
        assert_int_equal(gkv_tensor_push(s, "emb", ids, NP, rows, sizeof rows, &pa),
                         GKV_EINVAL);
        assert_int_equal(gkv_tensor_info(s, NULL, "emb#adam_m", &d), GKV_ENOTFOUND);
    }
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* assign stores a NaN as given (it is data), and the next assign replaces
 * it; integer tensors have nothing to check. */
static void
test_assign_stores_nan(void **state)
{
    char *dir = gkvt_mkdtemp("finite");
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, W, LO, LO + N);
    gkv_tensor_spec si = gkvt_spec(GKV_I32, W, LO, LO + N);
    float row[W] = {1, NAN, INFINITY, -INFINITY, 5}, back[W];
    float good[W] = {1, 2, 3, 4, 5};
    int32_t irow[W] = {-1, 0x7f800000, 0x7fc00000, 3, 4};
    gkv_push_args add = {.handler = "add"};
    uint64_t id = LO + 4;
    gkv_store *s;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "emb", &sp));
    GKVT_OK(gkv_tensor_push(s, "emb", &id, 1, row, sizeof row, NULL));
    GKVT_OK(gkv_tensor_pull(s, NULL, "emb", &id, 1, back, sizeof back));
    assert_memory_equal(back, row, sizeof row);
    GKVT_OK(gkv_tensor_push(s, "emb", &id, 1, good, sizeof good, NULL));
    GKVT_OK(gkv_tensor_pull(s, NULL, "emb", &id, 1, back, sizeof back));
    assert_memory_equal(back, good, sizeof good);
    /* integer bit patterns that would be a float NaN or inf are numbers */
    GKVT_OK(gkv_tensor_create(s, "cnt", &si));
    GKVT_OK(gkv_tensor_push(s, "cnt", &id, 1, irow, sizeof irow, &add));
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* The scan must find a bad value anywhere in a large push: the last
 * element of many rows, in an unaligned buffer. */
static void
test_large_unaligned(void **state)
{
    enum { R = 3000, WW = 37 };
    char *dir = gkvt_mkdtemp("finite");
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, WW, 0, R);
    gkv_push_args pa = {.handler = "sgd"};
    unsigned char *buf = calloc(1, (size_t)R * WW * 4 + 1), *rows = buf + 1;
    uint64_t *ids = malloc(R * sizeof *ids);
    char want[128];
    gkv_store *s;

    (void)state;
    assert_non_null(buf);
    assert_non_null(ids);
    for (size_t i = 0; i < R; i++)
        ids[i] = i;
    gkvt_elem_set(GKV_F32, rows, (size_t)R * WW - 1, -INFINITY);
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "emb", &sp));
    assert_int_equal(gkv_tensor_push(s, "emb", ids, R, rows, (size_t)R * WW * 4, &pa),
                     GKV_EINVAL);
    snprintf(want, sizeof want, "row %d col %d is -inf", R - 1, WW - 1);
    assert_non_null(strstr(gkv_store_errmsg(s), want));
    gkvt_elem_set(GKV_F32, rows, (size_t)R * WW - 1, 0);
    GKVT_OK(gkv_tensor_push(s, "emb", ids, R, rows, (size_t)R * WW * 4, &pa));
    gkv_store_close(s);
    gkvt_rmtree(dir);
    free(buf);
    free(ids);
}

/* gkv_dtype_nonfinite itself: the largest finite values, negative ones,
 * zeros and subnormals pass; a NaN or an infinity is found wherever it is
 * (first, last of a block, first of the next, in the tail), and named. */
static void
test_scan_edges(void **state)
{
    enum { NE = 700 };
    static const size_t at[] = {0, 255, 256, 511, 512, 699};
    /* per dtype: the largest finite value, a subnormal */
    static const double big[] = {3.4028234663852886e38, 65504.0,
                                 3.3895313892515355e38, 1.7976931348623157e308};
    static const double tiny[] = {1e-45, 6e-8, 1e-40, 5e-324};
    unsigned char buf[NE * 8 + 1], *p = buf + 1;
    const char *what;

    (void)state;
    for (size_t di = 0; di < sizeof dtypes / sizeof *dtypes; di++) {
        gkv_dtype dt = dtypes[di];

        for (size_t j = 0; j < NE; j++)
            gkvt_elem_set(dt, p, j, j % 4 == 0 ? big[di] : j % 4 == 1 ? -big[di] :
                     j % 4 == 2 ? tiny[di] : -0.0);
        assert_int_equal(gkv_dtype_nonfinite(dt, p, NE, &what), SIZE_MAX);
        for (size_t k = 0; k < sizeof at / sizeof *at; k++)
            for (int b = BAD_NAN; b <= BAD_NINF; b++) {
                unsigned char keep[8];
                size_t es = gkv_dtype_size(dt);

                memcpy(keep, p + at[k] * es, es);
                gkvt_elem_set(dt, p, at[k], bad_value((enum bad)b));
                assert_int_equal(gkv_dtype_nonfinite(dt, p, NE, &what), at[k]);
                assert_string_equal(what, bad_text[b]);
                /* only the first is named */
                gkvt_elem_set(dt, p, NE - 1, NAN);
                assert_int_equal(gkv_dtype_nonfinite(dt, p, NE, NULL), at[k]);
                gkvt_elem_set(dt, p, NE - 1, 1.0);
                memcpy(p + at[k] * es, keep, es);
            }
    }
    /* integer dtypes hold no NaN */
    memset(buf, 0xff, sizeof buf);
    assert_int_equal(gkv_dtype_nonfinite(GKV_I32, buf, NE, &what), SIZE_MAX);
}

/* ---- results that overflow ---------------------------------------------- */

/* One overflow per handler and dtype: row bi's element bj of the push is
 * 'val' (the others small), after an assign of 'init' to it (0: none).
 * 'where' is "" (the row) or the companion's suffix. */
struct ovf {
    gkv_dtype dt;
    const char *h;
    double lr, init, val;
    const char *sign, *where, *why;
};

static const struct ovf ovfs[] = {
    {GKV_F32,  "add",     0,    0x1p127,  0x1p127,  "+inf", "", "adding 1.70141e+38 overflows f32"},
    {GKV_F32,  "sgd",     1e30, 0,        1e30,     "-inf", "", "gradient 1e+30 with lr 1e+30 overflows f32"},
    {GKV_F32,  "adagrad", 0.1,  0,        3e38,     "+inf", "#adagrad_s", "gradient 3e+38 overflows f32"},
    {GKV_F32,  "adam",    0.1,  0,        3e38,     "+inf", "#adam_v", "gradient 3e+38 overflows f32"},
    {GKV_F64,  "add",     0,    0x1p1023, 0x1p1023, "+inf", "", "adding 8.98847e+307 overflows f64"},
    {GKV_F64,  "sgd",     1e30, 0,        1e300,    "-inf", "", "gradient 1e+300 with lr 1e+30 overflows f64"},
    {GKV_F64,  "adagrad", 0.1,  0,        1e200,    "+inf", "#adagrad_s", "gradient 1e+200 overflows f64"},
    {GKV_F64,  "adam",    0.1,  0,        1e200,    "+inf", "#adam_v", "gradient 1e+200 overflows f64"},
    {GKV_F16,  "add",     0,    60000,    60000,    "+inf", "", "adding 60000 overflows f16"},
    {GKV_F16,  "sgd",     1e5,  0,        2,        "-inf", "", "gradient 2 with lr 100000 overflows f16"},
    {GKV_F16,  "adagrad", 1e4,  -64000,   1,        "-inf", "", "gradient 1 with lr 10000 overflows f16"},
    {GKV_F16,  "adam",    1e4,  -64000,   1,        "-inf", "", "gradient 1 with lr 10000 overflows f16"},
    {GKV_BF16, "add",     0,    0x1p127,  0x1p127,  "+inf", "", "adding 1.70141e+38 overflows bf16"},
    {GKV_BF16, "sgd",     1e30, 0,        0x1p100,  "-inf", "", "gradient 1.26765e+30 with lr 1e+30 overflows bf16"},
    {GKV_BF16, "adagrad", 0.1,  0,        0x1p64,   "+inf", "#adagrad_s", "gradient 1.84467e+19 overflows f32"},
    {GKV_BF16, "adam",    0.1,  0,        0x1p70,   "+inf", "#adam_v", "gradient 1.18059e+21 overflows f32"},
};

/* Every case of ovfs on tensor "emb" of a fresh store, in write-back mode
 * or not: refused with the exact message, nothing changed. */
static void
overflow_all(int writeback)
{
    char *dir = gkvt_mkdtemp("finite");
    unsigned char rows[NP * W * 8];
    uint64_t ids[NP];
    gkv_store *s;

    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    for (size_t c = 0; c < sizeof ovfs / sizeof *ovfs; c++) {
        const struct ovf *o = &ovfs[c];
        gkv_tensor_spec sp = gkvt_spec_init(o->dt, W, LO, LO + N, GKV_INIT_UNIFORM);
        gkv_push_args pa = {.handler = o->h, .lr = o->lr};
        gkv_push_args good = {.handler = o->h, .lr = 0.1};
        const size_t rb = W * gkv_dtype_size(o->dt), bi = 3, bj = c % W;
        struct fam before, after;
        char want[256], what[96];
        gkv_err rc;

        snprintf(what, sizeof what, "%s %s%s", gkv_dtype_name(o->dt), o->h,
                 writeback ? " write-back" : "");
        GKVT_OK(gkv_tensor_create(s, "emb", &sp));
        if (writeback)
            GKVT_OK(gkv_writeback_start(s, "emb", 1000));
        /* a good push first, so that the optimizer state exists */
        batch(o->dt, ids, rows, (unsigned)c);
        GKVT_OK(gkv_tensor_push(s, "emb", ids, NP, rows, NP * rb, &good));
        batch(o->dt, ids, rows, (unsigned)c + 1);
        if (o->init != 0) {
            unsigned char one[W * 8] = {0};
            gkvt_elem_set(o->dt, one, bj, o->init);
            GKVT_OK(gkv_tensor_push(s, "emb", &ids[bi], 1, one, rb, NULL));
        }
        gkvt_elem_set(o->dt, rows, bi * W + bj, o->val);
        before = fam_get(s, "emb");
        rc = gkv_tensor_push(s, "emb", ids, NP, rows, NP * rb, &pa);
        if (rc != GKV_EINVAL)
            fail_msg("%s: push answered %s, not GKV_EINVAL", what, gkv_err_name(rc));
        snprintf(want, sizeof want, "tensor 'emb': push '%s': row %llu col %zu "
                 "would become %s%s%s%s (%s): refused, nothing applied", o->h,
                 (unsigned long long)ids[bi], bj, o->sign,
                 o->where[0] ? " in its state 'emb" : "", o->where,
                 o->where[0] ? "'" : "", o->why);
        if (strcmp(gkv_store_errmsg(s), want) != 0)
            fail_msg("%s: message \"%s\", expected \"%s\"", what,
                     gkv_store_errmsg(s), want);
        after = fam_get(s, "emb");
        fam_same(&before, &after, what);
        fam_free(&before);
        fam_free(&after);
        /* the column still takes pushes */
        gkvt_elem_set(o->dt, rows, bi * W + bj, 0.5);
        GKVT_OK(gkv_tensor_push(s, "emb", ids, NP, rows, NP * rb, &good));
        if (writeback)
            GKVT_OK(gkv_writeback_stop(s, "emb"));
        GKVT_OK(gkv_tensor_delete(s, "emb"));
    }
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

static void
test_overflow_direct(void **state)
{
    (void)state;
    overflow_all(0);
}

static void
test_overflow_writeback(void **state)
{
    (void)state;
    overflow_all(1);
}

/* Copies of one ID whose f64 gradients sum past f64 (summed, or averaged:
 * the sum comes first), and a refused first optimizer push, which creates
 * no state companion in a direct push. */
static void
test_overflow_dups_and_first_push(void **state)
{
    char *dir = gkvt_mkdtemp("finite");
    gkv_tensor_spec sp = gkvt_spec_init(GKV_F64, 1, LO, LO + N, GKV_INIT_UNIFORM);
    gkv_push_args pa = {.handler = "sgd", .flags = GKV_PUSH_DUPS_SUM};
    uint64_t ids[2] = {LO + 7, LO + 7};
    double g[2] = {1.5e308, 1.5e308}, back, was;
    gkv_tensor_desc d;
    gkv_store *s;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "emb", &sp));
    GKVT_OK(gkv_tensor_pull(s, NULL, "emb", ids, 1, &was, sizeof was));
    assert_int_equal(gkv_tensor_push(s, "emb", ids, 2, g, sizeof g, &pa), GKV_EINVAL);
    assert_string_equal(gkv_store_errmsg(s), "tensor 'emb': push 'sgd': row 17 "
                        "col 0 would become -inf (the gradients of its 2 copies "
                        "sum past f64): refused, nothing applied");
    GKVT_OK(gkv_tensor_pull(s, NULL, "emb", ids, 1, &back, sizeof back));
    assert_memory_equal(&back, &was, sizeof back);
    pa.flags = 0;
    assert_int_equal(gkv_tensor_push(s, "emb", ids, 2, g, sizeof g, &pa), GKV_EINVAL);
    assert_non_null(strstr(gkv_store_errmsg(s), "(the gradients of its 2 copies "
                           "sum past f64)"));
    GKVT_OK(gkv_tensor_pull(s, NULL, "emb", ids, 1, &back, sizeof back));
    assert_memory_equal(&back, &was, sizeof back);
    /* the first adagrad push overflows: no companion is left behind */
    pa.handler = "adagrad";
    pa.lr = 0.1;
    assert_int_equal(gkv_tensor_push(s, "emb", ids, 1, g, sizeof *g, &pa), GKV_EINVAL);
    assert_non_null(strstr(gkv_store_errmsg(s), "would become +inf in its state "
                           "'emb#adagrad_s' (gradient 1.5e+308 overflows f64)"));
    assert_int_equal(gkv_tensor_info(s, NULL, "emb#adagrad_s", &d), GKV_ENOTFOUND);
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* A row already holding a NaN or an infinity (assign stores them) still
 * takes add and optimizer pushes: only a value the push makes not finite
 * counts, and it is named. */
static void
test_overflow_row_already_nan(void **state)
{
    char *dir = gkvt_mkdtemp("finite");
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, W, LO, LO + N);
    gkv_push_args add = {.handler = "add"}, ada = {.handler = "adagrad"};
    float row[W] = {NAN, 1, INFINITY, 3e38f, 0}, in[W] = {1, 1, 1, 0, 1};
    float back[W], want[W] = {NAN, 2, INFINITY, 3e38f, 1};
    uint64_t id = LO + 9;
    gkv_store *s;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "emb", &sp));
    for (int wb = 0; wb < 2; wb++) {
        if (wb)
            GKVT_OK(gkv_writeback_start(s, "emb", 1000));
        GKVT_OK(gkv_tensor_push(s, "emb", &id, 1, row, sizeof row, NULL));
        GKVT_OK(gkv_tensor_push(s, "emb", &id, 1, in, sizeof in, &add));
        GKVT_OK(gkv_tensor_pull(s, NULL, "emb", &id, 1, back, sizeof back));
        assert_memory_equal(back, want, sizeof back);
        GKVT_OK(gkv_tensor_push(s, "emb", &id, 1, in, sizeof in, &ada));
        /* col 3 (3e38) would pass f32: refused, though cols 0 and 2 are
         * not finite already */
        GKVT_OK(gkv_tensor_pull(s, NULL, "emb", &id, 1, want, sizeof want));
        in[3] = 3e38f;
        assert_int_equal(gkv_tensor_push(s, "emb", &id, 1, in, sizeof in, &add),
                         GKV_EINVAL);
        assert_string_equal(gkv_store_errmsg(s), "tensor 'emb': push 'add': row "
                            "19 col 3 would become +inf (adding 3e+38 overflows "
                            "f32): refused, nothing applied");
        GKVT_OK(gkv_tensor_pull(s, NULL, "emb", &id, 1, back, sizeof back));
        assert_memory_equal(back, want, sizeof back);
        in[3] = 0;
        memcpy(want, (float[W]){NAN, 2, INFINITY, 3e38f, 1}, sizeof want);
    }
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* A result that is exactly the largest finite value of its dtype, or
 * rounds to it, is applied; half an ulp more rounds to inf and is
 * refused. */
static void
edge_all(int writeback)
{
    static const gkv_dtype dts[] = {GKV_F32, GKV_F64, GKV_F16, GKV_BF16};
    static const double big[] = {0x1p127, 0x1p1023, 60000, 0x1p127};
    static const double max[] = {0x1.fffffep127, 0x1.fffffffffffffp1023,
                                 65504, 0x1.fep127};
    char *dir = gkvt_mkdtemp("finite");
    gkv_push_args add = {.handler = "add"}, sgd = {.handler = "sgd", .lr = 1};
    uint64_t id = LO + 11;
    gkv_store *s;

    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    for (size_t di = 0; di < sizeof dts / sizeof *dts; di++) {
        gkv_dtype dt = dts[di];
        gkv_tensor_spec sp = gkvt_spec(dt, W, LO, LO + N);
        const size_t rb = W * gkv_dtype_size(dt);
        unsigned char row[W * 8] = {0}, in[W * 8] = {0}, back[W * 8], want[W * 8];

        GKVT_OK(gkv_tensor_create(s, "emb", &sp));
        if (writeback)
            GKVT_OK(gkv_writeback_start(s, "emb", 1000));
        /* add: big + (max - big) = max, and -max on the other side */
        for (size_t j = 0; j < W; j++) {
            gkvt_elem_set(dt, row, j, j % 2 ? -big[di] : big[di]);
            gkvt_elem_set(dt, in, j, j % 2 ? -(max[di] - big[di]) : max[di] - big[di]);
            gkvt_elem_set(dt, want, j, j % 2 ? -max[di] : max[di]);
        }
        GKVT_OK(gkv_tensor_push(s, "emb", &id, 1, row, rb, NULL));
        GKVT_OK(gkv_tensor_push(s, "emb", &id, 1, in, rb, &add));
        GKVT_OK(gkv_tensor_pull(s, NULL, "emb", &id, 1, back, rb));
        assert_memory_equal(back, want, rb);
        /* sgd: 0 - 1 * max = -max */
        memset(row, 0, sizeof row);
        GKVT_OK(gkv_tensor_push(s, "emb", &id, 1, row, rb, NULL));
        for (size_t j = 0; j < W; j++) {
            gkvt_elem_set(dt, in, j, max[di]);
            gkvt_elem_set(dt, want, j, -max[di]);
        }
        GKVT_OK(gkv_tensor_push(s, "emb", &id, 1, in, rb, &sgd));
        GKVT_OK(gkv_tensor_pull(s, NULL, "emb", &id, 1, back, rb));
        assert_memory_equal(back, want, rb);
        if (dt == GKV_F32) {
            /* max + a quarter ulp rounds to max; + half an ulp to inf */
            float m = 0x1.fffffep127f, q = 0x1p102f, h = 0x1p103f;

            for (size_t j = 0; j < W; j++) {
                memcpy(row + 4 * j, &m, 4);
                memcpy(in + 4 * j, &q, 4);
            }
            GKVT_OK(gkv_tensor_push(s, "emb", &id, 1, row, rb, NULL));
            GKVT_OK(gkv_tensor_push(s, "emb", &id, 1, in, rb, &add));
            GKVT_OK(gkv_tensor_pull(s, NULL, "emb", &id, 1, back, rb));
            assert_memory_equal(back, row, rb);
            memcpy(in + 4 * (W - 1), &h, 4);
            assert_int_equal(gkv_tensor_push(s, "emb", &id, 1, in, rb, &add),
                             GKV_EINVAL);
            assert_non_null(strstr(gkv_store_errmsg(s), "row 21 col 4 would "
                                   "become +inf (adding 1.01412e+31 overflows f32)"));
            GKVT_OK(gkv_tensor_pull(s, NULL, "emb", &id, 1, back, rb));
            assert_memory_equal(back, row, rb);
        }
        if (writeback)
            GKVT_OK(gkv_writeback_stop(s, "emb"));
        GKVT_OK(gkv_tensor_delete(s, "emb"));
    }
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

static void
test_edge_direct(void **state)
{
    (void)state;
    edge_all(0);
}

static void
test_edge_writeback(void **state)
{
    (void)state;
    edge_all(1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_direct),
        cmocka_unit_test(test_refused_writeback),
        cmocka_unit_test(test_refused_first_push_creates_no_state),
        cmocka_unit_test(test_assign_stores_nan),
        cmocka_unit_test(test_large_unaligned),
        cmocka_unit_test(test_scan_edges),
        cmocka_unit_test(test_overflow_direct),
        cmocka_unit_test(test_overflow_writeback),
        cmocka_unit_test(test_overflow_dups_and_first_push),
        cmocka_unit_test(test_overflow_row_already_nan),
        cmocka_unit_test(test_edge_direct),
        cmocka_unit_test(test_edge_writeback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
