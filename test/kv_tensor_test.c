/* kv_tensor_test.c - tensors of a store (kv/gkv_kv.h): create, info and
 * list; bad names and specs; every initializer; delete (its space reused)
 * and rename. Rows: kv_rows_test.c; the store: kv_store_test.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>
#include "gkvt.h"

static int
setup(void **state)
{
    return gkvt_store_setup(state, sizeof(struct gkvt_store_fx), "kv_tensor");
}

/* ---- create, names, specs --------------------------------------------- */

static void
test_create_info_list(void **state)
{
    struct gkvt_store_fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 128, 100, 2100);
    gkv_tensor_desc d, *v;
    size_t n;

    sp.ndim = 2;
    sp.shape[0] = 4;
    sp.shape[1] = 32;
    GKVT_OK(gkv_tensor_create(f->s, "node/paper/feat", &sp));
    sp = gkvt_spec(GKV_I64, 1, 0, 10);
    sp.ndim = 0;
    GKVT_OK(gkv_tensor_create(f->s, "label", &sp));
    GKVT_OK(gkv_tensor_info(f->s, NULL, "node/paper/feat", &d));
    assert_string_equal(d.name, "node/paper/feat");
    assert_int_equal(d.dtype, GKV_F32);
    assert_int_equal(d.ndim, 2);
    assert_int_equal(d.row_elems, 128);
    assert_int_equal(d.row_bytes, 512);
    assert_int_equal(d.lo, 100);
    assert_int_equal(d.hi, 2100);
    assert_int_equal(d.chunk_rows, 512);       /* 256 KiB of 512 B rows */
    assert_int_equal(d.nchunks, 4);
    GKVT_OK(gkv_tensor_info(f->s, NULL, "label", &d));
    assert_int_equal(d.row_bytes, 8);
    GKVT_OK(gkv_tensor_list(f->s, NULL, 0, &v, &n));
    assert_int_equal(n, 2);
    assert_string_equal(v[0].name, "label");    /* name order */
    assert_string_equal(v[1].name, "node/paper/feat");
    gkv_free(v);
    assert_int_equal(gkv_tensor_create(f->s, "label", &sp), GKV_EEXIST);
    assert_int_equal(gkv_tensor_info(f->s, NULL, "nope", &d), GKV_ENOTFOUND);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "nope"));
}

static void
test_bad_names_and_specs(void **state)
{
    struct gkvt_store_fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 10), bad;
    char longname[GKV_NAME_MAX + 2];
    gkv_tensor_desc *v;
    size_t n;

    memset(longname, 'a', sizeof longname);
    longname[GKV_NAME_MAX + 1] = '\0';
    assert_int_equal(gkv_tensor_create(f->s, "", &sp), GKV_EINVAL);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "empty"));
    assert_int_equal(gkv_tensor_create(f->s, NULL, &sp), GKV_EINVAL);
    assert_int_equal(gkv_tensor_create(f->s, longname, &sp), GKV_EINVAL);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "too long"));
    longname[GKV_NAME_MAX] = '\0';                     /* exactly the max: fine */
    GKVT_OK(gkv_tensor_create(f->s, longname, &sp));
    assert_int_equal(gkv_tensor_create(f->s, "a b", &sp), GKV_EINVAL);
    assert_int_equal(gkv_tensor_create(f->s, "a#b", &sp), GKV_EINVAL);
    assert_int_equal(gkv_tensor_create(f->s, "t", NULL), GKV_EINVAL);
    bad = sp; bad.dtype = (gkv_dtype)42;
    assert_int_equal(gkv_tensor_create(f->s, "t", &bad), GKV_EINVAL);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "dtype"));
    bad = sp; bad.ndim = 5;
    assert_int_equal(gkv_tensor_create(f->s, "t", &bad), GKV_EINVAL);
    bad = sp; bad.shape[0] = 0;
    assert_int_equal(gkv_tensor_create(f->s, "t", &bad), GKV_EINVAL);
    bad = sp; bad.hi = bad.lo;
    assert_int_equal(gkv_tensor_create(f->s, "t", &bad), GKV_EINVAL);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "empty ID range"));
    bad = sp; bad.init = GKV_INIT_UNIFORM; bad.a = 1; bad.b = 1;
    assert_int_equal(gkv_tensor_create(f->s, "t", &bad), GKV_EINVAL);
    bad = sp; bad.init = GKV_INIT_NORMAL; bad.a = 0; bad.b = -1;
    assert_int_equal(gkv_tensor_create(f->s, "t", &bad), GKV_EINVAL);
    bad = sp; bad.init = (gkv_init)9;
    assert_int_equal(gkv_tensor_create(f->s, "t", &bad), GKV_EINVAL);
    bad = sp; bad.flags = 0x80;
    assert_int_equal(gkv_tensor_create(f->s, "t", &bad), GKV_EINVAL);
    bad = gkvt_spec(GKV_F64, 1u << 20, 0, 10); bad.chunk_rows = 1000;   /* 8 GiB chunks */
    assert_int_equal(gkv_tensor_create(f->s, "t", &bad), GKV_EINVAL);
    bad = gkvt_spec(GKV_F64, 1ull << 40, 0, 10);
    assert_int_equal(gkv_tensor_create(f->s, "t", &bad), GKV_EINVAL);
    /* nothing but the one good tensor was created */
    GKVT_OK(gkv_tensor_list(f->s, NULL, 1, &v, &n));
    assert_int_equal(n, 1);
    gkv_free(v);
}

/* ---- initializers ------------------------------------------------------ */

static void
test_initializers(void **state)
{
    struct gkvt_store_fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 16, 1000, 21000);
    size_t len, len2;
    float *v, *w;
    double sum = 0, sq = 0;
    size_t n;

    sp.init = GKV_INIT_CONST;
    sp.a = 2.5;
    GKVT_OK(gkv_tensor_create(f->s, "c", &sp));
    v = (float *)gkvt_tensor_all(f->s, NULL, "c", &len);
    for (size_t i = 0; i < len / 4; i++)
        assert_true(v[i] == 2.5f);
    free(v);

    sp.init = GKV_INIT_UNIFORM;
    sp.a = -1;
    sp.b = 3;
    sp.seed = 42;
    GKVT_OK(gkv_tensor_create(f->s, "u", &sp));
    sp.chunk_rows = 7;                 /* other chunking, same values */
    GKVT_OK(gkv_tensor_create(f->s, "u7", &sp));
    v = (float *)gkvt_tensor_all(f->s, NULL, "u", &len);
    w = (float *)gkvt_tensor_all(f->s, NULL, "u7", &len2);
    assert_int_equal(len, len2);
    assert_memory_equal(v, w, len);
    n = len / 4;
    for (size_t i = 0; i < n; i++) {
        assert_true(v[i] >= -1.0f && v[i] < 3.0f);
        sum += v[i];
    }
    assert_true(fabs(sum / n - 1.0) < 0.02);   /* mean 1, sd 1.15, n = 320,000 */
    free(v);
    free(w);

    sp.chunk_rows = 0;
    sp.init = GKV_INIT_NORMAL;
    sp.a = 5;
    sp.b = 2;
    GKVT_OK(gkv_tensor_create(f->s, "n", &sp));
    v = (float *)gkvt_tensor_all(f->s, NULL, "n", &len);
    sum = 0;
    for (size_t i = 0; i < n; i++) {
        sum += v[i];
        sq += (double)v[i] * v[i];
    }
    assert_true(fabs(sum / n - 5.0) < 0.02);
    assert_true(fabs(sqrt(sq / n - (sum / n) * (sum / n)) - 2.0) < 0.02);
    free(v);

    /* integer dtype: constant rounds toward zero */
    sp = gkvt_spec(GKV_I32, 3, 0, 5);
    sp.init = GKV_INIT_CONST;
    sp.a = -7.9;
    GKVT_OK(gkv_tensor_create(f->s, "i", &sp));
    {
        int32_t *iv = (int32_t *)gkvt_tensor_all(f->s, NULL, "i", &len);
        for (size_t i = 0; i < len / 4; i++)
            assert_int_equal(iv[i], -7);
        free(iv);
    }

    /* uniform [a, b) in every dtype: the dtype's rounding of a value just
     * below b (f16, bf16, f32) or trunc toward zero (a negative integer
     * range) reached b; no element may equal it */
    {
        static const struct { gkv_dtype dt; double a, b; } u[] = {
            {GKV_F16, 0, 1}, {GKV_BF16, 0, 1}, {GKV_F32, 0, 1},
            {GKV_BF16, -3, -2}, {GKV_I32, -10, -5}, {GKV_I8, 0, 4},
        };
        for (size_t k = 0; k < sizeof u / sizeof u[0]; k++) {
            gkv_tensor_spec us = gkvt_spec(u[k].dt, 64, 0, 4096);
            gkv_tensor_desc d;
            unsigned char *b;
            char name[16];
            size_t hits_lo = 0;

            us.init = GKV_INIT_UNIFORM;
            us.a = u[k].a;
            us.b = u[k].b;
            us.seed = 7;
            snprintf(name, sizeof name, "u%zu", k);
            GKVT_OK(gkv_tensor_create(f->s, name, &us));
            GKVT_OK(gkv_tensor_info(f->s, NULL, name, &d));
            b = gkvt_tensor_all(f->s, NULL, name, &len);
            for (size_t i = 0; i < len / gkv_dtype_size(u[k].dt); i++) {
                double x;
                switch (u[k].dt) {
                case GKV_F16: { uint16_t h; memcpy(&h, b + 2 * i, 2);
                                x = gkv_f16_to_f32(h); break; }
                case GKV_BF16: { uint16_t h; memcpy(&h, b + 2 * i, 2);
                                 x = gkv_bf16_to_f32(h); break; }
                case GKV_F32: { float g; memcpy(&g, b + 4 * i, 4); x = g; break; }
                case GKV_I32: { int32_t g; memcpy(&g, b + 4 * i, 4); x = g; break; }
                default: x = (int8_t)b[i]; break;
                }
                if (!(x >= u[k].a && x < u[k].b))
                    fail_msg("%s uniform [%g, %g): element %zu is %.9g",
                             gkv_dtype_name(u[k].dt), u[k].a, u[k].b, i, x);
                hits_lo += x == u[k].a;
            }
            /* integers: each value of [a, b) comes up, a included */
            if (u[k].dt == GKV_I32 || u[k].dt == GKV_I8)
                assert_true(hits_lo > len / gkv_dtype_size(u[k].dt) /
                            (size_t)(u[k].b - u[k].a) / 2);
            free(b);
        }
    }
}

/* ---- delete, rename ------------------------------------------------------ */

static void
test_delete_reuses_space_and_rename(void **state)
{
    struct gkvt_store_fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 64, 0, 20000);
    gkv_store_stat st;
    gkv_push_args ag = {"adagrad", 0, 0, 0, 0, 0};
    uint64_t used_after_first = 0, id = 7;
    float row[64] = {1}, got[64];
    gkv_tensor_desc d;

    sp.init = GKV_INIT_CONST;
    sp.a = 1;
    for (int i = 0; i < 8; i++) {
        GKVT_OK(gkv_tensor_create(f->s, "big", &sp));
        GKVT_OK(gkv_tensor_push(f->s, "big", &id, 1, row, sizeof row, &ag));
        GKVT_OK(gkv_tensor_delete(f->s, "big"));
        GKVT_OK(gkv_store_stat_get(f->s, &st));
        assert_int_equal(st.ntensors, 0);
        if (i == 0)
            used_after_first = st.used_bytes;
    }
    /* 8 rounds of 5 MiB: the pages freed by each delete are reused */
    assert_true(st.used_bytes <= 2 * used_after_first + (1u << 20));
    assert_int_equal(gkv_tensor_delete(f->s, "big"), GKV_ENOTFOUND);
    assert_int_equal(gkv_tensor_info(f->s, NULL, "big#adagrad_s", &d), GKV_ENOTFOUND);

    GKVT_OK(gkv_tensor_create(f->s, "a", &sp));
    GKVT_OK(gkv_tensor_create(f->s, "b", &sp));
    GKVT_OK(gkv_tensor_push(f->s, "a", &id, 1, row, sizeof row, &ag));
    assert_int_equal(gkv_tensor_rename(f->s, "a", "b"), GKV_EEXIST);
    assert_int_equal(gkv_tensor_rename(f->s, "zz", "c"), GKV_ENOTFOUND);
    assert_int_equal(gkv_tensor_rename(f->s, "a", "c d"), GKV_EINVAL);
    GKVT_OK(gkv_tensor_rename(f->s, "a", "c"));
    assert_int_equal(gkv_tensor_info(f->s, NULL, "a", &d), GKV_ENOTFOUND);
    GKVT_OK(gkv_tensor_info(f->s, NULL, "c#adagrad_s", &d));
    GKVT_OK(gkv_tensor_pull(f->s, NULL, "c", &id, 1, got, sizeof got));
    assert_true(got[0] < 1.0f && got[1] == 1.0f);   /* stepped row followed */
    GKVT_OK(gkv_store_verify(f->s, NULL, NULL));

    /* replace: "c" (with its adagrad state) onto "b" (without), then a
     * fresh "e" with state onto "c"-less "b": the old tensor and state go
     * in the same transaction; a missing 'to' is a rename; errors change
     * nothing */
    assert_int_equal(gkv_tensor_replace(f->s, "zz", "b"), GKV_ENOTFOUND);
    assert_int_equal(gkv_tensor_replace(f->s, "b", "b"), GKV_EEXIST);
    GKVT_OK(gkv_tensor_info(f->s, NULL, "b", &d));
    GKVT_OK(gkv_tensor_replace(f->s, "c", "b"));
    assert_int_equal(gkv_tensor_info(f->s, NULL, "c", &d), GKV_ENOTFOUND);
    GKVT_OK(gkv_tensor_info(f->s, NULL, "b#adagrad_s", &d));
    GKVT_OK(gkv_tensor_pull(f->s, NULL, "b", &id, 1, got, sizeof got));
    assert_true(got[0] < 1.0f && got[1] == 1.0f);    /* c's rows, stepped */
    sp.a = 3;
    GKVT_OK(gkv_tensor_create(f->s, "e", &sp));
    GKVT_OK(gkv_tensor_replace(f->s, "e", "b"));
    assert_int_equal(gkv_tensor_info(f->s, NULL, "b#adagrad_s", &d),
                     GKV_ENOTFOUND);                 /* b's old state went */
    GKVT_OK(gkv_tensor_pull(f->s, NULL, "b", &id, 1, got, sizeof got));
    assert_true(got[0] == 3.0f && got[63] == 3.0f);
    GKVT_OK(gkv_tensor_replace(f->s, "b", "g"));     /* no 'g': a rename */
    assert_int_equal(gkv_tensor_info(f->s, NULL, "b", &d), GKV_ENOTFOUND);
    GKVT_OK(gkv_tensor_info(f->s, NULL, "g", &d));
    GKVT_OK(gkv_store_stat_get(f->s, &st));
    assert_int_equal(st.ntensors, 1);
    GKVT_OK(gkv_store_verify(f->s, NULL, NULL));
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, gkvt_store_teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_create_info_list),
        T(test_bad_names_and_specs),
        T(test_initializers),
        T(test_delete_reuses_space_and_rename),
    };
    return cmocka_run_group_tests_name("kv_tensor", tests, NULL, NULL);
}
