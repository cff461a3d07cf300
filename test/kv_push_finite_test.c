/* kv_push_finite_test.c - a push through add, sgd, adagrad or adam that
 * carries a NaN or an infinity is refused whole (GKV_EINVAL, naming the
 * tensor, the handler, the row ID and the column), for every float dtype,
 * directly and in write-back mode: the rows and the optimizer state are
 * byte for byte what they were. assign stores such values (data), and the
 * next assign replaces them. The scan (gkv_dtype_nonfinite) finds a bad
 * value anywhere and passes every finite one. */
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
