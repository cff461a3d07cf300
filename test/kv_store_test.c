/* kv_store_test.c - the store API: open, tensors, pull, push, handlers,
 * optimizers, verify, and every bad input the issue names. */
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
#include <lmdb.h>
#include "gkvt.h"
#include "kv_int.h"

struct fx {
    char *dir;
    gkv_store *s;
};

static int
setup(void **state)
{
    return gkvt_store_setup(state, sizeof(struct fx), "store");
}

static int
teardown(void **state)
{
    return gkvt_store_teardown(state);
}

/* Fills a tensor of f32 rows with value(row, col) = row * 1000 + col. */
static void
fill_f32(gkv_store *s, const char *name, uint64_t lo, uint64_t hi, uint64_t w)
{
    size_t n = hi - lo;
    float *v = malloc(n * w * sizeof *v);

    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < w; j++)
            v[i * w + j] = (float)((lo + i) * 1000 + j);
    GKVT_OK(gkv_tensor_write(s, name, lo, hi, v, n * w * sizeof *v));
    free(v);
}

/* ---- error list, dtypes, halves ---------------------------------------- */

static void
test_error_list_is_complete(void **state)
{
    int codes[] = {
#define X(name, val, text) val,
        GKV_ERRORS(X)
#undef X
    };
    size_t n = sizeof codes / sizeof *codes;

    (void)state;
    for (size_t i = 0; i < n; i++) {
        assert_string_not_equal(gkv_strerror(codes[i]), "unknown error");
        assert_memory_equal(gkv_err_name(codes[i]), "GKV_", 4);
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(codes[i], codes[j]);
            assert_string_not_equal(gkv_err_name(codes[i]), gkv_err_name(codes[j]));
        }
    }
    assert_string_equal(gkv_err_name(GKV_ESHAPE), "GKV_ESHAPE");
    assert_string_equal(gkv_strerror(12345), "unknown error");
    assert_string_equal(gkv_err_name(-999), "GKV_E?");
}

static void
test_dtypes_and_halves(void **state)
{
    gkv_dtype dt;

    (void)state;
    assert_int_equal(gkv_dtype_size(GKV_BF16), 2);
    assert_int_equal(gkv_dtype_size(GKV_I64), 8);
    assert_int_equal(gkv_dtype_size((gkv_dtype)99), 0);
    GKVT_OK(gkv_dtype_parse("float32", &dt));
    assert_int_equal(dt, GKV_F32);
    GKVT_OK(gkv_dtype_parse("bf16", &dt));
    assert_int_equal(dt, GKV_BF16);
    assert_int_equal(gkv_dtype_parse("complex64", &dt), GKV_EINVAL);
    assert_string_equal(gkv_dtype_name(GKV_U8), "u8");
    /* f16: exact values, rounding to even, overflow, subnormals */
    assert_int_equal(gkv_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(gkv_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(gkv_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(gkv_f32_to_f16(65520.0f), 0x7c00);
    assert_int_equal(gkv_f32_to_f16(0x1.0p-24f), 0x0001);
    assert_int_equal(gkv_f32_to_f16(1.0f + 0x1.0p-11f), 0x3c00);   /* tie: even */
    assert_int_equal(gkv_f32_to_f16(1.0f + 0x1.8p-11f), 0x3c01);
    assert_true(isnan(gkv_f16_to_f32(gkv_f32_to_f16(NAN))));
    for (uint32_t h = 0; h < 0x7c00; h++)          /* every finite positive */
        assert_int_equal(gkv_f32_to_f16(gkv_f16_to_f32((uint16_t)h)), h);
    /* bf16 */
    assert_int_equal(gkv_f32_to_bf16(1.0f), 0x3f80);
    assert_true(gkv_bf16_to_f32(0x4049) == 3.140625f);
    assert_int_equal(gkv_f32_to_bf16(1.0f + 0x1.0p-8f), 0x3f80);    /* tie: even */
}

/* ---- open ------------------------------------------------------------ */

static void
test_open_missing_and_not_a_store(void **state)
{
    char *dir = gkvt_mkdtemp("open");
    char path[4096], file[4096];
    gkv_store *s = (gkv_store *)1;
    int fd;

    (void)state;
    snprintf(path, sizeof path, "%s/nope", dir);
    assert_int_equal(gkv_store_open(&s, path, 0, NULL), GKV_ENOENT);
    assert_null(s);
    assert_non_null(strstr(gkv_store_errmsg(NULL), "nope"));
    assert_int_equal(gkv_store_open(&s, path, GKV_RDONLY, NULL), GKV_ENOENT);
    /* an empty directory without GKV_CREATE holds no store */
    assert_int_equal(gkv_store_open(&s, dir, 0, NULL), GKV_ENOENT);
    /* a plain file is not a store */
    snprintf(file, sizeof file, "%s/file", dir);
    fd = open(file, O_CREAT | O_WRONLY, 0644);
    close(fd);
    assert_int_equal(gkv_store_open(&s, file, GKV_CREATE, NULL), GKV_ENOENT);
    assert_int_equal(gkv_store_open(&s, "", 0, NULL), GKV_EINVAL);
    assert_int_equal(gkv_store_open(&s, dir, GKV_CREATE | GKV_RDONLY, NULL), GKV_EINVAL);
    assert_int_equal(gkv_store_open(&s, dir, GKV_CREATE | 0x100, NULL), GKV_EINVAL);
    assert_non_null(strstr(gkv_store_errmsg(NULL), "unknown open flags 0x100"));
    assert_null(s);
    /* a directory holding an empty data.mdb (what a failed create leaves)
     * or another program's LMDB files: a plain open made a gkv store of
     * it; it is no store, and stays untouched, until GKV_CREATE */
    {
        char lmdb[4096], data[4200];
        struct stat sb;
        snprintf(lmdb, sizeof lmdb, "%s/lmdb", dir);
        assert_int_equal(mkdir(lmdb, 0755), 0);
        snprintf(data, sizeof data, "%s/data.mdb", lmdb);
        fd = open(data, O_CREAT | O_WRONLY, 0644);
        close(fd);
        assert_int_equal(gkv_store_open(&s, lmdb, 0, NULL), GKV_ENOENT);
        assert_null(s);
        assert_non_null(strstr(gkv_store_errmsg(NULL), "holds no gkv store"));
        assert_int_equal(gkv_store_open(&s, lmdb, GKV_RDONLY, NULL),
                         GKV_ENOENT);
        GKVT_OK(gkv_store_open(&s, lmdb, GKV_CREATE, NULL));
        gkv_store_close(s);
        GKVT_OK(gkv_store_open(&s, lmdb, 0, NULL));
        gkv_store_close(s);
        assert_int_equal(stat(data, &sb), 0);
    }
    /* create, close, reopen read-only */
    GKVT_OK(gkv_store_open(&s, path, GKV_CREATE, NULL));
    gkv_store_close(s);
    GKVT_OK(gkv_store_open(&s, path, GKV_RDONLY, NULL));
    assert_string_equal(gkv_store_path(s), path);
    gkv_store_close(s);
    gkv_store_close(NULL);
    gkvt_rmtree(dir);
}

static void
test_newer_format_is_eversion(void **state)
{
    char *dir = gkvt_mkdtemp("fmt");
    gkv_store *s;
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    uint32_t v = KV_FORMAT + 1;
    MDB_val k = {6, "format"}, d = {4, &v};
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 10);

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    gkv_store_close(s);
    /* write a newer format number with raw LMDB, as a newer gkv would */
    assert_int_equal(mdb_env_create(&env), 0);
    mdb_env_set_maxdbs(env, 4);
    assert_int_equal(mdb_env_open(env, dir, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "meta", 0, &dbi), 0);
    assert_int_equal(mdb_put(txn, dbi, &k, &d, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    assert_int_equal(gkv_store_open(&s, dir, 0, NULL), GKV_EVERSION);
    assert_non_null(strstr(gkv_store_errmsg(NULL), "format 2"));
    assert_int_equal(gkv_store_open(&s, dir, GKV_RDONLY, NULL), GKV_EVERSION);
    gkvt_rmtree(dir);
}

/* ---- create, names, specs --------------------------------------------- */

static void
test_create_info_list(void **state)
{
    struct fx *f = *state;
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
    struct fx *f = *state;
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
    struct fx *f = *state;
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

/* ---- pull, read, view ------------------------------------------------ */

static void
check_pull_random(gkv_store *s, const char *name, uint64_t lo, uint64_t hi,
                  uint64_t w, uint64_t *seed)
{
    size_t n = 5000;
    uint64_t *ids = malloc(n * sizeof *ids);
    float *out = malloc(n * w * sizeof *out);

    for (size_t i = 0; i < n; i++)
        ids[i] = lo + gkvt_rand(seed) % (hi - lo);
    ids[1] = ids[0];                     /* duplicates allowed */
    ids[n - 1] = hi - 1;
    ids[n - 2] = lo;
    GKVT_OK(gkv_tensor_pull(s, NULL, name, ids, n, out, n * w * sizeof *out));
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < w; j++)
            assert_true(out[i * w + j] == (float)(ids[i] * 1000 + j));
    free(ids);
    free(out);
}

static void
test_pull_matches_reference(void **state)
{
    struct fx *f = *state;
    uint64_t seed = gkvt_seed();
    const uint32_t chunkings[] = {0, 1, 7, 64, 100000};

    for (size_t k = 0; k < sizeof chunkings / sizeof *chunkings; k++) {
        char name[32];
        gkv_tensor_spec sp = gkvt_spec(GKV_F32, 24, 5000, 25000);

        sp.chunk_rows = chunkings[k];
        snprintf(name, sizeof name, "t%zu", k);
        GKVT_OK(gkv_tensor_create(f->s, name, &sp));
        fill_f32(f->s, name, 5000, 25000, 24);
        check_pull_random(f->s, name, 5000, 25000, 24, &seed);
    }
    {
        gkv_tensor_spec sp = gkvt_spec(GKV_F32, 24, 0, 20000);
        sp.flags = GKV_TENSOR_HOT;
        GKVT_OK(gkv_tensor_create(f->s, "hot", &sp));
        fill_f32(f->s, "hot", 0, 20000, 24);
        check_pull_random(f->s, "hot", 0, 20000, 24, &seed);
    }
}

static void
test_pull_bad_input(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 10, 20);
    uint64_t ids[3] = {10, 25, 11};
    float out[12];

    GKVT_OK(gkv_tensor_create(f->s, "t", &sp));
    assert_int_equal(gkv_tensor_pull(f->s, NULL, "t", ids, 3, out, sizeof out),
                     GKV_ERANGE);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "ID 25 (index 1)"));
    ids[1] = 9;
    assert_int_equal(gkv_tensor_pull(f->s, NULL, "t", ids, 3, out, sizeof out),
                     GKV_ERANGE);
    /* hi itself is outside: the range is half-open */
    ids[1] = 20;
    assert_int_equal(gkv_tensor_pull(f->s, NULL, "t", ids, 3, out, sizeof out),
                     GKV_ERANGE);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "ID 20 (index 1) is outside "
                           "[10, 20)"));
    /* a bad ID past the first batch of lookups (16): the message gives its
     * index in the whole pull, not in its batch */
    {
        uint64_t many[24];
        float big[24 * 4];

        for (int i = 0; i < 24; i++)
            many[i] = 10 + (uint64_t)i % 10;
        many[20] = 20;
        assert_int_equal(gkv_tensor_pull(f->s, NULL, "t", many, 24, big,
                                         sizeof big), GKV_ERANGE);
        assert_non_null(strstr(gkv_store_errmsg(f->s), "ID 20 (index 20)"));
        many[20] = 9;
        assert_int_equal(gkv_tensor_pull(f->s, NULL, "t", many, 24, big,
                                         sizeof big), GKV_ERANGE);
        assert_non_null(strstr(gkv_store_errmsg(f->s), "ID 9 (index 20)"));
    }
    ids[1] = 12;
    assert_int_equal(gkv_tensor_pull(f->s, NULL, "t", ids, 3, out, sizeof out - 1),
                     GKV_ESHAPE);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "expected 48"));
    assert_int_equal(gkv_tensor_pull(f->s, NULL, "u", ids, 3, out, sizeof out),
                     GKV_ENOTFOUND);
    GKVT_OK(gkv_tensor_pull(f->s, NULL, "t", ids, 0, out, 0));
    assert_int_equal(gkv_tensor_read(f->s, NULL, "t", 5, 12, out, 7 * 16), GKV_ERANGE);
    assert_int_equal(gkv_tensor_read(f->s, NULL, "t", 12, 11, out, 0), GKV_ERANGE);
    assert_int_equal(gkv_tensor_read(f->s, NULL, "t", 10, 12, out, 16), GKV_ESHAPE);
    /* unwritten rows of a zeros tensor read as zeros */
    GKVT_OK(gkv_tensor_pull(f->s, NULL, "t", ids, 3, out, sizeof out));
    for (int i = 0; i < 12; i++)
        assert_true(out[i] == 0.0f);
}

static void
test_snapshot_and_row_view(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 8, 0, 3000);
    gkv_txn *tx;
    const void *row;
    float v[8], newrow[8];
    uint64_t id = 1234;

    GKVT_OK(gkv_tensor_create(f->s, "t", &sp));
    GKVT_OK(gkv_txn_begin(f->s, &tx));
    GKVT_OK(gkv_row_view(tx, "t", 5, &row));
    assert_true(((const float *)row)[3] == 0.0f);   /* unwritten: zeros */
    gkv_txn_end(tx);
    fill_f32(f->s, "t", 0, 3000, 8);
    GKVT_OK(gkv_txn_begin(f->s, &tx));
    GKVT_OK(gkv_row_view(tx, "t", id, &row));
    assert_int_equal((uintptr_t)row % 4, 0);
    memcpy(v, row, sizeof v);
    assert_true(v[7] == 1234007.0f);
    /* a push after the snapshot began is invisible to it */
    for (int j = 0; j < 8; j++)
        newrow[j] = -1.0f;
    GKVT_OK(gkv_tensor_push(f->s, "t", &id, 1, newrow, sizeof newrow, NULL));
    assert_memory_equal(row, v, sizeof v);
    GKVT_OK(gkv_tensor_pull(f->s, tx, "t", &id, 1, v, sizeof v));
    assert_true(v[0] == 1234000.0f);
    assert_int_equal(gkv_row_view(tx, "t", 3000, &row), GKV_ERANGE);
    assert_int_equal(gkv_row_view(NULL, "t", 1, &row), GKV_EINVAL);
    assert_non_null(strstr(gkv_store_errmsg(NULL), "gkv_row_view: no snapshot"));
    gkv_txn_end(tx);
    GKVT_OK(gkv_tensor_pull(f->s, NULL, "t", &id, 1, v, sizeof v));
    assert_true(v[0] == -1.0f);
}

static void
test_read_and_write_ranges(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_I32, 3, 50, 1050);
    int32_t ref[1000 * 3], got[1000 * 3], in[1000 * 3];
    uint64_t seed = gkvt_seed() ^ 7;

    sp.chunk_rows = 37;
    sp.init = GKV_INIT_CONST;
    sp.a = 9;
    GKVT_OK(gkv_tensor_create(f->s, "t", &sp));
    for (int i = 0; i < 3000; i++)
        ref[i] = 9;
    for (int round = 0; round < 50; round++) {
        uint64_t a = gkvt_rand(&seed) % 1000, b = gkvt_rand(&seed) % 1000;
        if (a > b) { uint64_t t = a; a = b; b = t; }
        for (uint64_t i = a; i < b; i++)
            for (int j = 0; j < 3; j++)
                in[(i - a) * 3 + j] = ref[i * 3 + j] = (int32_t)(round * 10000 + i * 3 + j);
        GKVT_OK(gkv_tensor_write(f->s, "t", 50 + a, 50 + b, in, (b - a) * 12));
        a = gkvt_rand(&seed) % 1000;
        b = a + gkvt_rand(&seed) % (1000 - a);
        GKVT_OK(gkv_tensor_read(f->s, NULL, "t", 50 + a, 50 + b, got, (b - a) * 12));
        assert_memory_equal(got, ref + a * 3, (b - a) * 12);
    }
    assert_int_equal(gkv_tensor_write(f->s, "t", 40, 60, in, 20 * 12), GKV_ERANGE);
    assert_int_equal(gkv_tensor_write(f->s, "t", 50, 60, in, 10 * 12 + 1), GKV_ESHAPE);
    GKVT_OK(gkv_tensor_read(f->s, NULL, "t", 50, 1050, got, sizeof got));
    assert_memory_equal(got, ref, sizeof ref);
    GKVT_OK(gkv_store_verify(f->s, "t", NULL));
}

/* ---- push ------------------------------------------------------------ */

static void
test_push_assign_last_wins_add_sums(void **state)
{
    struct fx *f = *state;
    enum { N = 3000, W = 5, P = 4000 };
    gkv_tensor_spec sp = gkvt_spec(GKV_I64, W, 100, 100 + N);
    static int64_t ref[N * W], in[P * W], got[N * W];
    static uint64_t ids[P];
    uint64_t seed = gkvt_seed() ^ 11;
    gkv_push_args add = {"add", 0, 0, 0, 0, 0};

    sp.chunk_rows = 13;
    GKVT_OK(gkv_tensor_create(f->s, "t", &sp));
    memset(ref, 0, sizeof ref);
    for (int round = 0; round < 6; round++) {
        int is_add = round % 2;
        for (int i = 0; i < P; i++) {
            ids[i] = 100 + gkvt_rand(&seed) % (N / 4);   /* many duplicates */
            for (int j = 0; j < W; j++) {
                in[i * W + j] = (int64_t)(gkvt_rand(&seed) % 1000) - 500;
                if (is_add)
                    ref[(ids[i] - 100) * W + j] += in[i * W + j];
                else
                    ref[(ids[i] - 100) * W + j] = in[i * W + j];  /* in order: last wins */
            }
        }
        GKVT_OK(gkv_tensor_push(f->s, "t", ids, P, in, sizeof in, is_add ? &add : NULL));
        GKVT_OK(gkv_tensor_read(f->s, NULL, "t", 100, 100 + N, got, sizeof got));
        assert_memory_equal(got, ref, sizeof ref);
    }
    GKVT_OK(gkv_store_verify(f->s, NULL, NULL));
}

static void
test_push_add_halves_and_bytes(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F16, 2, 0, 4);
    uint16_t in[4] = {gkv_f32_to_f16(1.5f), gkv_f32_to_f16(-2.0f),
                      gkv_f32_to_f16(0.25f), gkv_f32_to_f16(4.0f)};
    uint16_t out[2];
    uint64_t ids[2] = {3, 3};
    gkv_push_args add = {"add", 0, 0, 0, 0, 0};
    uint8_t b[2] = {250, 10};

    GKVT_OK(gkv_tensor_create(f->s, "h", &sp));
    GKVT_OK(gkv_tensor_push(f->s, "h", ids, 2, in, sizeof in, &add));
    GKVT_OK(gkv_tensor_pull(f->s, NULL, "h", ids, 1, out, sizeof out));
    assert_true(gkv_f16_to_f32(out[0]) == 1.75f);
    assert_true(gkv_f16_to_f32(out[1]) == 2.0f);
    sp = gkvt_spec(GKV_U8, 1, 0, 4);
    GKVT_OK(gkv_tensor_create(f->s, "b", &sp));
    GKVT_OK(gkv_tensor_push(f->s, "b", ids, 2, b, 2, &add));
    GKVT_OK(gkv_tensor_pull(f->s, NULL, "b", ids, 1, b, 1));
    assert_int_equal(b[0], 255);                  /* saturates, no wrap */
}

/* ---- "add" on integers ---------------------------------------------------
 * row_add used exact integer adds only when the stored row happened to be
 * 8-byte (i64) or 4-byte (i32) aligned, which depends on where LMDB put
 * the chunk; otherwise the sum went through double: rounded above 2^53,
 * and clamped where the aligned path wrapped. A write-back copy (aligned)
 * and the store (often not) gave different results. Fixed: exact integer
 * sums, saturating at the dtype's limits (DESIGN.md: integer stores
 * clamp), wherever the row lies, on both paths. Small tensors after
 * values of other sizes put rows at varied alignments; the test checks it
 * met both an aligned and an unaligned row. */

struct iadd { int64_t start; int64_t in[2]; int nin; int64_t want; };

static int64_t
i_get(gkv_store *s, const char *name, gkv_dtype dt)
{
    uint64_t id = 0;
    int64_t v64;
    int32_t v32;
    int8_t v8;

    if (dt == GKV_I64) {
        GKVT_OK(gkv_tensor_pull(s, NULL, name, &id, 1, &v64, 8));
        return v64;
    }
    if (dt == GKV_I32) {
        GKVT_OK(gkv_tensor_pull(s, NULL, name, &id, 1, &v32, 4));
        return v32;
    }
    GKVT_OK(gkv_tensor_pull(s, NULL, name, &id, 1, &v8, 1));
    return v8;
}

/* Sets row 0 of 'name' to c->start, adds c->in, and checks c->want. */
static void
i_case(gkv_store *s, const char *name, gkv_dtype dt, const struct iadd *c,
       const char *where)
{
    uint64_t ids[2] = {0, 0};
    unsigned char v[8], in[16];
    size_t sz = gkv_dtype_size(dt);
    int64_t got;

    for (int i = 0; i < c->nin; i++) {
        int64_t x = c->in[i];
        int32_t x32 = (int32_t)x;
        int8_t x8 = (int8_t)x;
        memcpy(in + i * sz, sz == 8 ? (void *)&x : sz == 4 ? (void *)&x32
                                                              : (void *)&x8, sz);
    }
    {
        int64_t x = c->start;
        int32_t x32 = (int32_t)x;
        int8_t x8 = (int8_t)x;
        memcpy(v, sz == 8 ? (void *)&x : sz == 4 ? (void *)&x32 : (void *)&x8, sz);
    }
    GKVT_OK(gkv_tensor_push(s, name, ids, 1, v, sz, NULL));
    GKVT_OK(gkv_tensor_push(s, name, ids, (size_t)c->nin, in, c->nin * sz,
                            &(gkv_push_args){"add", 0, 0, 0, 0, 0}));
    got = i_get(s, name, dt);
    if (got != c->want)
        fail_msg("%s: %s: %lld + %lld%s = %lld, expected %lld", where, name,
                 (long long)c->start, (long long)c->in[0],
                 c->nin > 1 ? " + ..." : "", (long long)got,
                 (long long)c->want);
}

static void
test_push_add_integers_exact(void **state)
{
    struct fx *f = *state;
    static const struct iadd c64[] = {
        {(1LL << 60) + 1, {1}, 1, (1LL << 60) + 2},      /* above 2^53 */
        {(1LL << 62) + 3, {-(1LL << 61)}, 1, (1LL << 61) + 3},
        {INT64_MAX, {1}, 1, INT64_MAX},                  /* saturates */
        {INT64_MIN, {-1}, 1, INT64_MIN},
        {INT64_MAX - 5, {INT64_MAX, -7}, 2, INT64_MAX - 7},  /* in order */
        {-9, {4}, 1, -5},
    };
    static const struct iadd c32[] = {
        {INT32_MAX, {1}, 1, INT32_MAX},
        {INT32_MIN, {-1}, 1, INT32_MIN},
        {1 << 30, {1 << 30}, 1, INT32_MAX},
        {123456789, {-23456789}, 1, 100000000},
    };
    static const struct iadd c8[] = {
        {120, {10}, 1, 127},
        {-120, {-10}, 1, -128},
        {5, {-7}, 1, -2},
    };
    static const struct { gkv_dtype dt; const struct iadd *c; size_t n; } ty[] = {
        {GKV_I64, c64, sizeof c64 / sizeof *c64},
        {GKV_I32, c32, sizeof c32 / sizeof *c32},
        {GKV_I8, c8, sizeof c8 / sizeof *c8},
    };
    int aligned = 0, unaligned = 0;

    for (int pad = 1; pad <= 8; pad++) {
        for (size_t t = 0; t < sizeof ty / sizeof *ty; t++) {
            gkv_tensor_spec ps = gkvt_spec(GKV_U8, (uint64_t)pad, 0, 1);
            gkv_tensor_spec sp;
            char pn[32], n[32];
            size_t sz = gkv_dtype_size(ty[t].dt);
            const void *row;
            gkv_txn *tx;

            memset(&sp, 0, sizeof sp);
            sp.dtype = ty[t].dt;
            sp.hi = 1;
            sp.init = GKV_INIT_CONST;   /* written at create */
            ps.init = GKV_INIT_CONST;
            ps.a = 1;
            snprintf(pn, sizeof pn, "pad%d_%zu", pad, t);
            snprintf(n, sizeof n, "c%d_%zu", pad, t);
            GKVT_OK(gkv_tensor_create(f->s, pn, &ps));
            GKVT_OK(gkv_tensor_create(f->s, n, &sp));
            GKVT_OK(gkv_txn_begin(f->s, &tx));
            GKVT_OK(gkv_row_view(tx, n, 0, &row));
            if (sz > 1 && (uintptr_t)row % sz != 0)
                unaligned++;
            else if (sz > 1)
                aligned++;
            gkv_txn_end(tx);
            for (size_t i = 0; i < ty[t].n; i++)
                i_case(f->s, n, ty[t].dt, &ty[t].c[i], "direct");
            /* the same in write-back mode (a RAM copy: aligned) */
            GKVT_OK(gkv_writeback_start(f->s, n, 100000));
            for (size_t i = 0; i < ty[t].n; i++)
                i_case(f->s, n, ty[t].dt, &ty[t].c[i], "write-back");
            GKVT_OK(gkv_writeback_stop(f->s, n));
        }
    }
    if (aligned == 0 || unaligned == 0)
        fail_msg("integer rows met: %d aligned, %d unaligned; the test needs "
                 "both", aligned, unaligned);
    GKVT_OK(gkv_store_verify(f->s, NULL, NULL));
}

/* ---- NULL buffers --------------------------------------------------------
 * Pull and range read dereferenced a NULL ids or dst with rows to move
 * (push and write refuse them). Fixed: GKV_EINVAL, naming the tensor, in
 * plain and write-back mode, with a snapshot or without; nothing to move
 * with NULL is fine. */
static void
test_pull_read_null_args(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 10, 20);
    uint64_t ids[2] = {10, 11};
    float out[8], g[4] = {1, 1, 1, 1};
    gkv_txn *tx;

    GKVT_OK(gkv_tensor_create(f->s, "t", &sp));
    GKVT_OK(gkv_tensor_push(f->s, "t", ids, 1, g, sizeof g,
                            &(gkv_push_args){"adam", 0, 0, 0, 0, 0}));
    for (int wb = 0; wb < 2; wb++) {
        static const char *const names[] = {"t", "t#adam_m"};

        if (wb)
            GKVT_OK(gkv_writeback_start(f->s, "t", 100000));
        for (int snap = 0; snap < 2; snap++) {
            tx = NULL;
            if (snap)
                GKVT_OK(gkv_txn_begin(f->s, &tx));
            for (int i = 0; i < 2; i++) {
                const char *n = names[i];

                assert_int_equal(gkv_tensor_pull(f->s, tx, n, NULL, 2, out,
                                                 sizeof out), GKV_EINVAL);
                assert_non_null(strstr(gkv_store_errmsg(f->s), n));
                assert_non_null(strstr(gkv_store_errmsg(f->s), "NULL"));
                assert_int_equal(gkv_tensor_pull(f->s, tx, n, ids, 2, NULL,
                                                 sizeof out), GKV_EINVAL);
                assert_non_null(strstr(gkv_store_errmsg(f->s), "NULL"));
                assert_int_equal(gkv_tensor_read(f->s, tx, n, 10, 12, NULL,
                                                 sizeof out), GKV_EINVAL);
                assert_non_null(strstr(gkv_store_errmsg(f->s), "NULL"));
                /* nothing to move: NULL is fine */
                GKVT_OK(gkv_tensor_pull(f->s, tx, n, NULL, 0, NULL, 0));
                GKVT_OK(gkv_tensor_read(f->s, tx, n, 12, 12, NULL, 0));
                GKVT_OK(gkv_tensor_pull(f->s, tx, n, ids, 2, out, sizeof out));
            }
            gkv_txn_end(tx);
        }
        if (wb)
            GKVT_OK(gkv_writeback_stop(f->s, "t"));
    }
}

/* Reference optimizer in double precision, with f32 state as stored. */
static void
ref_step(const char *opt, float *w, float *s1, float *s2, int64_t *t,
         const double *g, int E, double lr, double eps, double b1, double b2)
{
    for (int j = 0; j < E; j++) {
        if (strcmp(opt, "sgd") == 0) {
            w[j] = (float)(w[j] - lr * g[j]);
        } else if (strcmp(opt, "adagrad") == 0) {
            s1[j] = (float)(s1[j] + g[j] * g[j]);
            w[j] = (float)(w[j] - lr * g[j] / (sqrt(s1[j]) + eps));
        }
    }
    if (strcmp(opt, "adam") == 0) {
        ++*t;
        for (int j = 0; j < E; j++) {
            s1[j] = (float)(b1 * s1[j] + (1 - b1) * g[j]);
            s2[j] = (float)(b2 * s2[j] + (1 - b2) * g[j] * g[j]);
            w[j] = (float)(w[j] - lr * (s1[j] / (1 - pow(b1, *t))) /
                           (sqrt(s2[j] / (1 - pow(b2, *t))) + eps));
        }
    }
}

static void
test_optimizers_match_reference(void **state)
{
    struct fx *f = *state;
    enum { N = 500, E = 6, P = 800 };
    const char *opts[] = {"sgd", "adagrad", "adam"};
    uint64_t seed = gkvt_seed() ^ 23;

    /* o: the optimizer; mode 0 (DGL: the copies' gradients averaged) and
     * 1 (GKV_PUSH_DUPS_SUM) */
    for (int om = 0; om < 6; om++) {
        static float w[N * E], s1[N * E], s2[N * E], in[P * E], got[N * E];
        static int64_t t[N];
        static uint64_t ids[P];
        int o = om % 3, mode = om / 3;
        gkv_tensor_spec sp = gkvt_spec(GKV_F32, E, 0, N);
        gkv_push_args pa = {opts[o], 0.05, 0, 0, 0,
                            mode ? GKV_PUSH_DUPS_SUM : 0};
        double eps = o == 2 ? 1e-8 : 1e-10;
        char name[32], tname[48];

        snprintf(name, sizeof name, "%s%d", opts[o], mode);

        sp.init = GKV_INIT_UNIFORM;
        sp.a = -1;
        sp.b = 1;
        sp.seed = 3;
        sp.flags = GKV_TENSOR_HOT;
        GKVT_OK(gkv_tensor_create(f->s, name, &sp));
        GKVT_OK(gkv_tensor_read(f->s, NULL, name, 0, N, w, sizeof w));
        memset(s1, 0, sizeof s1);
        memset(s2, 0, sizeof s2);
        memset(t, 0, sizeof t);
        for (int round = 0; round < 4; round++) {
            static double gsum[N * E];
            static int seen[N];

            memset(gsum, 0, sizeof gsum);
            memset(seen, 0, sizeof seen);
            for (int i = 0; i < P; i++) {
                ids[i] = gkvt_rand(&seed) % N;
                seen[ids[i]]++;
                for (int j = 0; j < E; j++) {
                    in[i * E + j] = (float)((double)(gkvt_rand(&seed) % 2001) / 1000.0 - 1.0);
                    gsum[ids[i] * E + j] += in[i * E + j];
                }
            }
            /* duplicates: gradients averaged (or summed), one step per
             * distinct ID */
            for (int r = 0; r < N; r++)
                if (seen[r]) {
                    if (mode == 0)
                        for (int j = 0; j < E; j++)
                            gsum[r * E + j] /= seen[r];
                    ref_step(opts[o], w + r * E, s1 + r * E, s2 + r * E, t + r,
                             gsum + r * E, E, 0.05, eps, 0.9, 0.999);
                }
            GKVT_OK(gkv_tensor_push(f->s, name, ids, P, in, sizeof in, &pa));
            GKVT_OK(gkv_tensor_read(f->s, NULL, name, 0, N, got, sizeof got));
            for (int i = 0; i < N * E; i++)
                assert_true(fabsf(got[i] - w[i]) <= 1e-5f * (1 + fabsf(w[i])));
        }
        if (o == 2) {
            int64_t tt[N];
            snprintf(tname, sizeof tname, "%s#adam_t", name);
            GKVT_OK(gkv_tensor_read(f->s, NULL, tname, 0, N, tt, sizeof tt));
            assert_memory_equal(tt, t, sizeof tt);
        }
    }
    {
        gkv_tensor_desc *v;
        size_t n, nstate = 0;
        GKVT_OK(gkv_tensor_list(f->s, NULL, 1, &v, &n));
        for (size_t i = 0; i < n; i++)
            nstate += v[i].is_state;
        assert_int_equal(nstate, 8);    /* adagrad_s, adam_m, adam_v, adam_t */
        gkv_free(v);
        GKVT_OK(gkv_tensor_list(f->s, NULL, 0, &v, &n));
        assert_int_equal(n, 6);
        gkv_free(v);
    }
    GKVT_OK(gkv_store_verify(f->s, NULL, NULL));
}

static gkv_err
max_handler(void *ctx, const gkv_tensor_desc *d, uint64_t id, void *row, const void *in)
{
    float *w = row;
    const float *x = in;

    (*(int *)ctx)++;
    if (x[0] < -1000)
        return GKV_EINVAL;          /* refuses: the whole push must roll back */
    for (uint64_t j = 0; j < d->row_elems; j++)
        if (x[j] > w[j])
            w[j] = x[j];
    (void)id;
    return GKV_OK;
}

static void
test_custom_handler_and_rollback(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 2, 0, 100);
    float in[6] = {5, -5, 7, 1, 3, 9}, out[4], before[200], after[200];
    uint64_t ids[3] = {4, 4, 50};
    gkv_push_args pa = {"max", 0, 0, 0, 0, 0};
    int calls = 0;

    GKVT_OK(gkv_tensor_create(f->s, "t", &sp));
    assert_int_equal(gkv_tensor_push(f->s, "t", ids, 3, in, sizeof in, &pa),
                     GKV_EHANDLER);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "max"));
    assert_int_equal(gkv_handler_register(f->s, "add", max_handler, &calls), GKV_EINVAL);
    assert_int_equal(gkv_handler_register(f->s, "", max_handler, &calls), GKV_EINVAL);
    GKVT_OK(gkv_handler_register(f->s, "max", max_handler, &calls));
    GKVT_OK(gkv_tensor_push(f->s, "t", ids, 3, in, sizeof in, &pa));
    assert_int_equal(calls, 3);
    GKVT_OK(gkv_tensor_pull(f->s, NULL, "t", ids + 1, 2, out, sizeof out));
    assert_true(out[0] == 7 && out[1] == 1 && out[2] == 3 && out[3] == 9);
    /* a handler error on the last row undoes the rows before it */
    GKVT_OK(gkv_tensor_read(f->s, NULL, "t", 0, 100, before, sizeof before));
    in[0] = 100;
    in[4] = -5000;
    assert_int_equal(gkv_tensor_push(f->s, "t", ids, 3, in, sizeof in, &pa), GKV_EHANDLER);
    GKVT_OK(gkv_tensor_read(f->s, NULL, "t", 0, 100, after, sizeof after));
    assert_memory_equal(before, after, sizeof before);
}

/* A tensor whose initializer would write more than the disk can hold (a
 * mistyped range) is refused at once with GKV_EMAPFULL, before a byte is
 * written: materializing it held every row in RAM until the commit, and
 * such a create ran the process out of memory. On a 12 MiB disk (so that
 * a regression fails at once when the map cannot grow, instead of writing
 * petabytes): 20 MB of rows, and 2^62 rows of 16 bytes (bytes past 2^64:
 * counted as 2^64 - 1, not wrapped); the same range of zeros stores
 * nothing and is fine; and the store's own file counts as room: 7 MB
 * created, deleted, then created again (more than the free disk, less than
 * the file's freed pages plus it) is not refused. */
static void
test_create_beyond_disk_refused(void **state)
{
    char *dir = gkvt_mkdtemp("tmpfs");
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 128, 0, 40000);   /* 20 MB */
    gkv_tensor_desc d;
    gkv_store *s;
    double t0;

    (void)state;
    gkvt_tmpfs_or_skip(dir, "size=12m");
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, &(gkv_open_opts){1u << 20, 0}));
    sp.init = GKV_INIT_CONST;
    sp.a = 1;
    t0 = gkvt_now_s();
    assert_int_equal(gkv_tensor_create(s, "big", &sp), GKV_EMAPFULL);
    assert_non_null(strstr(gkv_store_errmsg(s), "tensor 'big': its "
                           "initializer writes 20480000 bytes"));
    sp = gkvt_spec(GKV_F32, 4, 0, 1ull << 62);
    sp.init = GKV_INIT_CONST;
    sp.a = 1;
    assert_int_equal(gkv_tensor_create(s, "huge", &sp), GKV_EMAPFULL);
    assert_non_null(strstr(gkv_store_errmsg(s), "writes 18446744073709551615 "
                           "bytes"));
    assert_true(gkvt_now_s() - t0 < 5);
    assert_int_equal(gkv_tensor_info(s, NULL, "huge", &d), GKV_ENOTFOUND);
    sp.init = GKV_INIT_ZEROS;
    GKVT_OK(gkv_tensor_create(s, "huge", &sp));
    sp = gkvt_spec(GKV_F32, 128, 0, 14000);                  /* 7.2 MB */
    sp.init = GKV_INIT_CONST;
    sp.a = 1;
    GKVT_OK(gkv_tensor_create(s, "a", &sp));
    GKVT_OK(gkv_tensor_delete(s, "a"));
    GKVT_OK(gkv_tensor_create(s, "b", &sp));
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    gkvt_tmpfs_done(dir);
}

static void
test_push_bad_input_changes_nothing(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 1000);
    gkv_push_args adam = {"adam", 0, 0, 0, 0, 0}, bad = {"add", 0, 0, 0, 0, 0};
    static float in[100 * 4];
    uint64_t ids[100];
    size_t len, len2;
    unsigned char *b0, *b1;

    sp.init = GKV_INIT_NORMAL;
    sp.b = 1;
    GKVT_OK(gkv_tensor_create(f->s, "t", &sp));
    sp = gkvt_spec(GKV_I32, 4, 0, 1000);
    GKVT_OK(gkv_tensor_create(f->s, "i", &sp));
    for (int i = 0; i < 100; i++) {
        ids[i] = (uint64_t)i * 7;
        in[i * 4] = 1;
    }
    b0 = gkvt_tensor_all(f->s, NULL, "t", &len);
    ids[57] = 1000;                               /* one bad ID in the middle */
    assert_int_equal(gkv_tensor_push(f->s, "t", ids, 100, in, sizeof in, NULL), GKV_ERANGE);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "ID 1000 (index 57)"));
    assert_int_equal(gkv_tensor_push(f->s, "t", ids, 100, in, sizeof in, &adam), GKV_ERANGE);
    ids[57] = 3;
    assert_int_equal(gkv_tensor_push(f->s, "t", ids, 100, in, sizeof in - 4, NULL), GKV_ESHAPE);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "tensor 't'"));
    assert_int_equal(gkv_tensor_push(f->s, "nope", ids, 100, in, sizeof in, NULL), GKV_ENOTFOUND);
    assert_int_equal(gkv_tensor_push(f->s, "i", ids, 100, in, sizeof in, &adam), GKV_EINVAL);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "floating"));
    bad.lr = -1;
    bad.handler = "sgd";
    assert_int_equal(gkv_tensor_push(f->s, "t", ids, 100, in, sizeof in, &bad), GKV_EINVAL);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "bad optimizer parameters"));
    adam.flags = 0x6;
    assert_int_equal(gkv_tensor_push(f->s, "t", ids, 100, in, sizeof in, &adam),
                     GKV_EINVAL);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "unknown push flags 0x6"));
    adam.flags = 0;
    b1 = gkvt_tensor_all(f->s, NULL, "t", &len2);
    assert_memory_equal(b0, b1, len);
    free(b1);
    /* assign ignores optimizer parameters, whatever they are */
    bad.handler = "assign";
    bad.beta1 = 7;
    GKVT_OK(gkv_tensor_push(f->s, "t", ids, 1, in, 16, &bad));
    GKVT_OK(gkv_tensor_push(f->s, "t", ids, 1, b0, 16, NULL));   /* back */
    b1 = gkvt_tensor_all(f->s, NULL, "t", &len2);
    assert_memory_equal(b0, b1, len);
    free(b0);
    free(b1);
    {   /* the failed adam push created no state */
        gkv_tensor_desc d;
        assert_int_equal(gkv_tensor_info(f->s, NULL, "t#adam_m", &d), GKV_ENOTFOUND);
    }
}

/* ---- delete, rename ------------------------------------------------------ */

static void
test_delete_reuses_space_and_rename(void **state)
{
    struct fx *f = *state;
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

/* ---- read-only, map growth, corruption -------------------------------- */

static void
test_read_only_store_refuses_writes(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 10);
    gkv_store *ro;
    uint64_t id = 1;
    float row[4] = {1, 2, 3, 4}, got[4];

    GKVT_OK(gkv_tensor_create(f->s, "t", &sp));
    GKVT_OK(gkv_tensor_push(f->s, "t", &id, 1, row, sizeof row, NULL));
    gkv_store_close(f->s);      /* one handle per store and process */
    f->s = NULL;
    GKVT_OK(gkv_store_open(&ro, f->dir, GKV_RDONLY, NULL));
    assert_int_equal(gkv_tensor_create(ro, "u", &sp), GKV_ERDONLY);
    assert_non_null(strstr(gkv_store_errmsg(ro), "read-only"));
    assert_int_equal(gkv_tensor_push(ro, "t", &id, 1, row, sizeof row, NULL), GKV_ERDONLY);
    assert_int_equal(gkv_tensor_write(ro, "t", 0, 1, row, sizeof row), GKV_ERDONLY);
    assert_int_equal(gkv_tensor_delete(ro, "t"), GKV_ERDONLY);
    assert_int_equal(gkv_tensor_rename(ro, "t", "u"), GKV_ERDONLY);
    GKVT_OK(gkv_tensor_pull(ro, NULL, "t", &id, 1, got, sizeof got));
    assert_memory_equal(got, row, sizeof row);
    GKVT_OK(gkv_store_verify(ro, NULL, NULL));
    gkv_store_close(ro);
}

static void
test_tiny_map_grows(void **state)
{
    char *dir = gkvt_mkdtemp("grow");
    gkv_open_opts o = {1u << 20, 0};              /* 1 MiB map */
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 128, 0, 40000);   /* 20 MB */
    gkv_store *s, *s2;
    gkv_store_stat st;
    gkv_txn *tx;
    uint64_t id = 39999;
    float got[128];

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, &o));
    GKVT_OK(gkv_store_stat_get(s, &st));
    assert_true(st.map_size <= (2u << 20));
    sp.init = GKV_INIT_CONST;
    sp.a = 3;
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_store_stat_get(s, &st));
    assert_true(st.map_size >= 20u << 20);
    GKVT_OK(gkv_tensor_pull(s, NULL, "t", &id, 1, got, sizeof got));
    assert_true(got[127] == 3.0f);
    /* another process adopts the grown map and grows it further; this
     * handle adopts what it set */
    {
        pid_t pid = fork();
        int wst;

        assert_true(pid >= 0);
        if (pid == 0)
            _exit(gkv_store_open(&s2, dir, 0, &o) == GKV_OK &&
                  gkv_tensor_create(s2, "u", &sp) == GKV_OK ? 0 : 1);
        assert_int_equal(waitpid(pid, &wst, 0), pid);
        assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    }
    GKVT_OK(gkv_tensor_pull(s, NULL, "u", &id, 1, got, sizeof got));
    assert_true(got[0] == 3.0f);
    /* while a snapshot of this handle stays open, the map cannot grow:
     * the write fails cleanly and changes nothing */
    kv__grow_wait_ms = 200;
    GKVT_OK(gkv_txn_begin(s, &tx));
    sp.hi = 400000;
    assert_int_equal(gkv_tensor_create(s, "v", &sp), GKV_EMAPFULL);
    assert_non_null(strstr(gkv_store_errmsg(s), "snapshots"));
    gkv_txn_end(tx);
    kv__grow_wait_ms = 10000;
    assert_int_equal(gkv_tensor_info(s, NULL, "v", &(gkv_tensor_desc){0}), GKV_ENOTFOUND);
    GKVT_OK(gkv_tensor_create(s, "v", &sp));
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

static void
test_disk_full_is_emapfull(void **state)
{
    char *dir = gkvt_mkdtemp("tmpfs");
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 128, 0, 4000);   /* 2 MB */
    gkv_store *s;
    size_t len, len2;
    unsigned char *b0, *b1;

    (void)state;
    gkvt_tmpfs_or_skip(dir, "size=12m");
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, &(gkv_open_opts){1u << 20, 0}));
    sp.init = GKV_INIT_CONST;
    sp.a = 1;
    GKVT_OK(gkv_tensor_create(s, "small", &sp));
    b0 = gkvt_tensor_all(s, NULL, "small", &len);
    sp.hi = 40000;                                        /* 20 MB > 12 MB disk */
    assert_int_equal(gkv_tensor_create(s, "huge", &sp), GKV_EMAPFULL);
    assert_non_null(strstr(gkv_store_errmsg(s), "disk"));
    b1 = gkvt_tensor_all(s, NULL, "small", &len2);
    assert_memory_equal(b0, b1, len);
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    /* and it reopens with exactly the committed data */
    GKVT_OK(gkv_store_open(&s, dir, 0, NULL));
    free(b1);
    b1 = gkvt_tensor_all(s, NULL, "small", &len2);
    assert_memory_equal(b0, b1, len);
    gkv_store_close(s);
    free(b0);
    free(b1);
    gkvt_tmpfs_done(dir);
}

/* Every descriptor an open store holds is close-on-exec (LMDB opened
 * data.mdb without it: a program a service started kept the file open),
 * writable and read-only opens, with write-back on. */
static void
test_store_fds_close_on_exec(void **state)
{
    char *dir = gkvt_mkdtemp("cloexec");
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 100);

    (void)state;
    for (int ro = 0; ro < 2; ro++) {
        gkv_store *s;
        DIR *d;
        struct dirent *e;
        int seen = 0;

        GKVT_OK(gkv_store_open(&s, dir, ro ? GKV_RDONLY : GKV_CREATE, NULL));
        if (!ro) {
            GKVT_OK(gkv_tensor_create(s, "t", &sp));
            GKVT_OK(gkv_writeback_start(s, "t", 1000));
        }
        d = opendir("/proc/self/fd");
        assert_non_null(d);
        while ((e = readdir(d)) != NULL) {
            char link[300], target[4300];
            ssize_t n;
            int fd = atoi(e->d_name);

            snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
            if ((n = readlink(link, target, sizeof target - 1)) <= 0)
                continue;
            target[n] = '\0';
            if (strncmp(target, dir, strlen(dir)) != 0)
                continue;
            seen++;
            if (!(fcntl(fd, F_GETFD) & FD_CLOEXEC))
                fail_msg("%s open: fd %d (%s) is not close-on-exec",
                         ro ? "read-only" : "writable", fd, target);
        }
        closedir(d);
        assert_true(seen >= 2);                 /* data.mdb and lock.mdb */
        gkv_store_close(s);
    }
    gkvt_rmtree(dir);
}

/* A push copies each chunk it touches whole (a missing one is made), so a
 * few thousand IDs spread over a large zero tensor cost a chunk each:
 * 2000 IDs 2^24 apart, 32 KB of rows, needed 512 MB of RAM and disk. On a
 * 12 MiB disk it is GKV_EMAPFULL at once, naming the chunks; nothing
 * changes; a push of IDs in a few chunks goes through. */
static void
test_push_beyond_disk_refused(void **state)
{
    char *dir = gkvt_mkdtemp("tmpfs");
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 1ull << 40);
    gkv_push_args add = {"add", 0, 0, 0, 0, 0};
    static uint64_t ids[2000];
    static float rows[2000 * 4], got[4];
    gkv_store_stat st0, st1;
    gkv_store *s;

    (void)state;
    gkvt_tmpfs_or_skip(dir, "size=12m");
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, &(gkv_open_opts){1u << 20, 0}));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));          /* zeros: no chunks */
    for (int i = 0; i < 2000; i++) {
        ids[i] = (uint64_t)i << 24;
        rows[i * 4] = 1;
    }
    GKVT_OK(gkv_store_stat_get(s, &st0));
    assert_int_equal(gkv_tensor_push(s, "t", ids, 2000, rows, sizeof rows, &add),
                     GKV_EMAPFULL);
    assert_non_null(strstr(gkv_store_errmsg(s), "tensor 't': the push touches "
                           "2000 chunks"));
    GKVT_OK(gkv_store_stat_get(s, &st1));
    assert_int_equal(st1.nchunks, st0.nchunks);
    /* IDs 0, 1 and 2 share a chunk */
    ids[1] = 1;
    ids[2] = 2;
    GKVT_OK(gkv_tensor_push(s, "t", ids, 3, rows, 3 * 16, &add));
    GKVT_OK(gkv_tensor_pull(s, NULL, "t", ids + 2, 1, got, sizeof got));
    assert_true(got[0] == 1 && got[1] == 0);
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    gkvt_tmpfs_done(dir);
}

/* On a full disk, a tensor deleted makes room for the next write at once:
 * LMDB keeps the pages the last commit freed (a torn next commit must find
 * its tree whole), so the create after the delete failed GKV_EMAPFULL
 * until some other write committed; the store now commits once more and
 * retries. The other tensors keep their bytes. */
static void
test_disk_full_delete_makes_room(void **state)
{
    char *dir = gkvt_mkdtemp("tmpfs"), name[16];
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 256, 0, 1024);   /* 1 MiB */
    gkv_store *s;
    size_t len, len2;
    unsigned char *b0, *b1;
    gkv_err rc = GKV_OK;
    int made = 0;

    (void)state;
    gkvt_tmpfs_or_skip(dir, "size=6m");
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, NULL));
    sp.init = GKV_INIT_CONST;
    sp.a = 3;
    while (made < 20) {
        snprintf(name, sizeof name, "t%d", made);
        if ((rc = gkv_tensor_create(s, name, &sp)) != GKV_OK)
            break;
        made++;
    }
    assert_int_equal(rc, GKV_EMAPFULL);             /* the disk is full */
    assert_true(made >= 2);
    b0 = gkvt_tensor_all(s, NULL, "t0", &len);
    GKVT_OK(gkv_tensor_delete(s, "t1"));
    GKVT_OK(gkv_tensor_create(s, "again", &sp));
    b1 = gkvt_tensor_all(s, NULL, "t0", &len2);
    assert_memory_equal(b0, b1, len);
    free(b1);
    b1 = gkvt_tensor_all(s, NULL, "again", &len2);
    assert_int_equal(len2, len);
    assert_memory_equal(b0, b1, len);               /* the same const rows */
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    free(b0);
    free(b1);
    gkvt_tmpfs_done(dir);
}

/* A second handle on one store in one process would reset LMDB's reader
 * table (its locks are per process) and let writes reuse the pages the
 * first handle's snapshot reads: refused with GKV_EBUSY, by any path to
 * the directory, while the snapshot reads what it read; after a close
 * the directory opens again, and a forked child opens its own. */
static void
test_second_handle_refused(void **state)
{
    char *dir = gkvt_mkdtemp("twice"), p[4200];
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 64, 0, 4096);
    gkv_store *s, *s2 = NULL;
    gkv_txn *tx;
    unsigned char *b0, *b1, *row;
    size_t len = (size_t)4096 * 256;
    pid_t pid;
    int st;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    sp.init = GKV_INIT_CONST;
    sp.a = 1;
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_txn_begin(s, &tx));
    b0 = malloc(len);
    b1 = malloc(len);
    row = malloc(len);
    GKVT_OK(gkv_tensor_read(s, tx, "t", 0, 4096, b0, len));
    snprintf(p, sizeof p, "%s/.", dir);
    assert_int_equal(gkv_store_open(&s2, dir, 0, NULL), GKV_EBUSY);
    assert_null(s2);
    assert_non_null(strstr(gkv_store_errmsg(NULL), "open already in this "
                           "process"));
    assert_int_equal(gkv_store_open(&s2, p, GKV_RDONLY, NULL), GKV_EBUSY);
    /* writes that would reuse the snapshot's pages, had its slot gone */
    memset(row, 0x55, len);
    for (int i = 0; i < 4; i++)
        GKVT_OK(gkv_tensor_write(s, "t", 0, 4096, row, len));
    GKVT_OK(gkv_tensor_read(s, tx, "t", 0, 4096, b1, len));
    assert_memory_equal(b0, b1, len);
    gkv_txn_end(tx);
    /* a forked child is another process: it opens the store itself */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        gkv_store *c;
        _exit(gkv_store_open(&c, dir, GKV_RDONLY, NULL) == GKV_OK &&
              gkv_tensor_read(c, NULL, "t", 0, 4096, b1, len) == GKV_OK &&
              memcmp(b1, row, len) == 0 ? 0 : 1);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    gkv_store_close(s);
    GKVT_OK(gkv_store_open(&s2, p, GKV_RDONLY, NULL));
    GKVT_OK(gkv_tensor_read(s2, NULL, "t", 0, 4096, b1, len));
    assert_memory_equal(b1, row, len);
    gkv_store_close(s2);
    free(b0);
    free(b1);
    free(row);
    gkvt_rmtree(dir);
}

/* fork() while another thread is inside gkv_store_open (holding the
 * lock of the list of open stores) left that lock held in the child for
 * good: the child's own open hung. Now the fork waits for it. */
struct hold_arg {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int held;
};

__attribute__((unused)) static void *
hold_list(void *p)
{
    struct hold_arg *h = p;

    kv__open_list_hold(1);
    pthread_mutex_lock(&h->mu);
    h->held = 1;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
    gkvt_sleep_ms(300);
    kv__open_list_hold(0);
    return NULL;
}

static void
test_fork_during_open(void **state)
{
#if defined(__SANITIZE_THREAD__)
    (void)state;
    skip();                 /* TSan reports a fork with threads running */
#else
    char *dir = gkvt_mkdtemp("forkopen");
    struct hold_arg h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    pthread_t t;
    pid_t pid;
    int st;

    (void)state;
    assert_int_equal(pthread_create(&t, NULL, hold_list, &h), 0);
    pthread_mutex_lock(&h.mu);
    while (!h.held)
        pthread_cond_wait(&h.cv, &h.mu);
    pthread_mutex_unlock(&h.mu);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        gkv_store *c;
        alarm(30);                     /* a hang ends as SIGALRM */
        _exit(gkv_store_open(&c, dir, GKV_CREATE, NULL) == GKV_OK ? 0 : 1);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    pthread_join(t, NULL);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("the child's open: %s %d", WIFEXITED(st) ? "exit" : "signal",
                 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    gkvt_rmtree(dir);
#endif
}

/* A forked child that closes (or uses) the parent's handle: its close
 * wrote the write-back copy as of the fork over the parent's newer
 * commit, and its calls went to the parent's LMDB environment. Now the
 * close only frees memory and the calls are refused, naming the fork. */
static void
test_inherited_handle_after_fork(void **state)
{
#if defined(__SANITIZE_THREAD__)
    (void)state;
    skip();                 /* TSan reports a fork with threads running */
#else
    char *dir = gkvt_mkdtemp("forkinh");
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 16);
    gkv_store *s;
    uint64_t id = 3;
    float v7[4] = {7, 7, 7, 7}, v9[4] = {9, 9, 9, 9}, got[4];
    int go[2], done[2], st;
    pid_t pid;
    char c;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_tensor_create(s, "plain", &sp));
    GKVT_OK(gkv_writeback_start(s, "t", 100000));
    GKVT_OK(gkv_tensor_push(s, "t", &id, 1, v7, sizeof v7, NULL));
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(done), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        gkv_err prc;
        alarm(10);
        close(done[0]);
        if (read(go[0], &c, 1) != 1)
            _exit(2);
        prc = gkv_tensor_pull(s, NULL, "plain", &id, 1, got, sizeof got);
        if (prc != GKV_EINVAL || strstr(gkv_store_errmsg(s), "before a fork()") == NULL) {
            fprintf(stderr, "child: pull %s: %s\n", gkv_err_name(prc),
                    gkv_store_errmsg(s));
            _exit(3);
        }
        /* the write-back tensor too (its RAM copy is the fork's) */
        if (gkv_tensor_push(s, "t", &id, 1, v7, sizeof v7, NULL) != GKV_EINVAL ||
            gkv_tensor_write(s, "t", 0, 1, v7, sizeof v7) != GKV_EINVAL ||
            gkv_tensor_pull(s, NULL, "t", &id, 1, got, sizeof got) != GKV_EINVAL ||
            gkv_writeback_flush(s) != GKV_EINVAL)
            _exit(5);
        gkv_store_close(s);            /* must not write 7 over 9 */
        _exit(write(done[1], "x", 1) == 1 ? 0 : 4);
    }
    close(done[1]);
    GKVT_OK(gkv_tensor_push(s, "t", &id, 1, v9, sizeof v9, NULL));
    GKVT_OK(gkv_writeback_flush(s));
    assert_int_equal(write(go[1], "x", 1), 1);
    (void)!read(done[0], &c, 1);       /* EOF too, should the child fail */
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("child: status %d", st);
    gkv_store_close(s);
    GKVT_OK(gkv_store_open(&s, dir, GKV_RDONLY, NULL));
    GKVT_OK(gkv_tensor_pull(s, NULL, "t", &id, 1, got, sizeof got));
    assert_memory_equal(got, v9, sizeof v9);
    gkv_store_close(s);
    close(go[0]);
    close(go[1]);
    close(done[0]);
    gkvt_rmtree(dir);
#endif
}

/* A thread that holds a snapshot while another thread's write needs the
 * map to grow: its next read waited out the grower's 10 s (the grower
 * waits for its snapshot); now it goes on at once. Its own write needing
 * growth fails at once (waiting would wait for itself). */
struct grow_arg {
    gkv_store *s;
    gkv_err rc;
};

static void *
grow_writer(void *p)
{
    struct grow_arg *g = p;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 128, 0, 400000);   /* 200 MB */

    sp.init = GKV_INIT_CONST;
    sp.a = 1;
    g->rc = gkv_tensor_create(g->s, "big", &sp);
    return NULL;
}

static void *
end_txn(void *tx)
{
    gkv_txn_end(tx);
    return NULL;
}

static void
test_snapshot_holder_not_stalled(void **state)
{
    char *dir = gkvt_mkdtemp("growsnap");
    gkv_open_opts o = {1u << 20, 0};
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 16);
    struct grow_arg g;
    gkv_tensor_desc d;
    gkv_txn *tx;
    pthread_t t;
    double t0;

    (void)state;
    /* the grower must still be waiting when the snapshot ends below, and
     * reads that waited it out would take far longer than the bounds */
    kv__grow_wait_ms = 20000;
    GKVT_OK(gkv_store_open(&g.s, dir, GKV_CREATE | GKV_NOSYNC, &o));
    GKVT_OK(gkv_tensor_create(g.s, "small", &sp));
    GKVT_OK(gkv_txn_begin(g.s, &tx));
    assert_int_equal(pthread_create(&t, NULL, grow_writer, &g), 0);
    gkvt_sleep_ms(300);                 /* the writer is waiting to grow */
    t0 = gkvt_now_s();
    for (int i = 0; i < 20; i++)
        GKVT_OK(gkv_tensor_info(g.s, NULL, "small", &d));
    assert_true(gkvt_now_s() - t0 < 5);
    /* this thread's own write that needs growth: at once */
    t0 = gkvt_now_s();
    sp.hi = 400000;
    sp.shape[0] = 128;
    sp.init = GKV_INIT_CONST;
    sp.a = 2;
    assert_int_equal(gkv_tensor_create(g.s, "mine", &sp), GKV_EMAPFULL);
    assert_true(gkvt_now_s() - t0 < 5);
    gkv_txn_end(tx);
    pthread_join(t, NULL);
    GKVT_OK(g.rc);              /* it grew once the snapshot ended */
    /* a snapshot this thread began and another thread ended: this
     * thread's next growth is not refused as if it still held it */
    {
        pthread_t e;
        GKVT_OK(gkv_txn_begin(g.s, &tx));
        assert_int_equal(pthread_create(&e, NULL, end_txn, tx), 0);
        pthread_join(e, NULL);
        sp.hi = 800000;
        GKVT_OK(gkv_tensor_create(g.s, "mine", &sp));
    }
    kv__grow_wait_ms = 10000;
    gkv_store_close(g.s);
    gkvt_rmtree(dir);
}

/* A read-only open whose lock.mdb the process cannot write (a store on
 * read-only storage, another user's store): the message names the lock
 * file and why a reader needs it, not only "Permission denied". Root
 * only: the open runs in a child as user nobody. */
static void
test_lock_file_not_writable(void **state)
{
    char *dir = gkvt_mkdtemp("rolock"), p[4200], msg[1024] = "";
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 16);
    gkv_store *s;
    int fd[2], st;
    ssize_t n;
    pid_t pid;

    (void)state;
    if (geteuid() != 0) {
        gkvt_rmtree(dir);
        skip();
    }
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    gkv_store_close(s);
    snprintf(p, sizeof p, "%s/lock.mdb", dir);
    assert_int_equal(chmod(p, 0444), 0);
    assert_int_equal(chmod(dir, 0555), 0);
    assert_int_equal(pipe(fd), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        gkv_err rc;
        close(fd[0]);
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(3);
        rc = gkv_store_open(&s, dir, GKV_RDONLY, NULL);
        (void)!write(fd[1], gkv_store_errmsg(NULL),
                     strlen(gkv_store_errmsg(NULL)));
        _exit(rc == GKV_EPERM ? 0 : 1);
    }
    close(fd[1]);
    n = read(fd[0], msg, sizeof msg - 1);
    msg[n > 0 ? n : 0] = '\0';
    close(fd[0]);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_int_equal(chmod(dir, 0700), 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
        strstr(msg, "its lock file lock.mdb cannot be made or written") == NULL)
        fail_msg("status %d: %s", st, msg);
    gkvt_rmtree(dir);
}

/* A disk that fills while the map has room (the default 1 GiB map on a
 * 12 MB tmpfs): LMDB's short write comes back as EIO; the commit's error
 * says the disk is full (GKV_EMAPFULL, as when the map cannot grow), and
 * what was committed before is intact. Root only. */
static void
test_disk_full_with_room_in_map(void **state)
{
    char *dir = gkvt_mkdtemp("tmpfs");
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 128, 0, 4000);   /* 2 MB */
    gkv_store *s;
    unsigned char *b0, *b1, *big;
    size_t len, len2, bl = (size_t)40000 * 512;               /* 20 MB */
    gkv_err rc;

    (void)state;
    gkvt_tmpfs_or_skip(dir, "size=12m");
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, NULL));
    sp.init = GKV_INIT_CONST;
    sp.a = 1;
    GKVT_OK(gkv_tensor_create(s, "small", &sp));
    b0 = gkvt_tensor_all(s, NULL, "small", &len);
    sp.hi = 40000;
    sp.init = GKV_INIT_ZEROS;
    GKVT_OK(gkv_tensor_create(s, "huge", &sp));  /* zeros: no pages yet */
    big = malloc(bl);
    memset(big, 7, bl);
    rc = gkv_tensor_write(s, "huge", 0, 40000, big, bl);
    if (rc != GKV_EMAPFULL || strstr(gkv_store_errmsg(s), "disk") == NULL)
        fail_msg("rc %d: %s", (int)rc, gkv_store_errmsg(s));
    b1 = gkvt_tensor_all(s, NULL, "small", &len2);
    assert_memory_equal(b0, b1, len);
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    free(b0);
    free(b1);
    free(big);
    gkvt_tmpfs_done(dir);
}

/* A file system with no free block: creating a store is an error naming
 * the lock file, not SIGBUS when LMDB touches the lock file it could only
 * ftruncate; nothing is left in the directory. Root only (a tmpfs). */
static void
test_full_disk_at_create(void **state)
{
    char *dir = gkvt_mkdtemp("tmpfs"), p[4200], fill[4096];
    gkv_store *s = NULL;
    int fd;

    (void)state;
    gkvt_tmpfs_or_skip(dir, "size=1m");
    snprintf(p, sizeof p, "%s/fill", dir);
    fd = open(p, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    memset(fill, 1, sizeof fill);
    while (write(fd, fill, sizeof fill) == (ssize_t)sizeof fill)
        ;
    close(fd);
    snprintf(p, sizeof p, "%s/st", dir);
    assert_int_equal(gkv_store_open(&s, p, GKV_CREATE, NULL), GKV_EMAPFULL);
    assert_null(s);
    if (strstr(gkv_store_errmsg(NULL), "lock file") == NULL ||
        strstr(gkv_store_errmsg(NULL), "No space left") == NULL)
        fail_msg("message: %s", gkv_store_errmsg(NULL));
    snprintf(p, sizeof p, "%s/st/lock.mdb", dir);
    assert_int_equal(access(p, F_OK), -1);
    gkvt_tmpfs_done(dir);
}

/* An empty data.mdb (what a create that failed early leaves) holds no
 * store: said so by every open without GKV_CREATE, read-only ones making
 * no lock file; GKV_CREATE makes a store of it. */
static void
test_empty_data_mdb(void **state)
{
    char *dir = gkvt_mkdtemp("emptydb"), p[4200];
    gkv_store *s = NULL;
    int fd;

    (void)state;
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    fd = open(p, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    close(fd);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(gkv_store_open(&s, dir, i ? 0 : GKV_RDONLY, NULL),
                         GKV_ENOENT);
        assert_null(s);
        if (strstr(gkv_store_errmsg(NULL), "holds no gkv store (data.mdb is "
                   "empty)") == NULL)
            fail_msg("message: %s", gkv_store_errmsg(NULL));
    }
    snprintf(p, sizeof p, "%s/lock.mdb", dir);
    assert_int_equal(access(p, F_OK), -1);
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &(gkv_tensor_spec){.dtype = GKV_F32,
                                                         .lo = 0, .hi = 4}));
    gkv_store_close(s);
    GKVT_OK(gkv_store_open(&s, dir, GKV_RDONLY, NULL));
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* Deleting a tensor does not shrink used_bytes (the file keeps its
 * size): free_bytes shows what later writes reuse, and they do. */
static void
test_stat_free_bytes(void **state)
{
    char *dir = gkvt_mkdtemp("freeb");
    gkv_store *s = NULL;
    gkv_tensor_spec sp = {.dtype = GKV_F32, .ndim = 1, .shape = {64},
                          .lo = 0, .hi = 20000, .init = GKV_INIT_UNIFORM,
                          .a = 0, .b = 1, .seed = 3};
    gkv_store_stat a, b, c;
    const uint64_t tb = 20000ull * 64 * 4;       /* the tensor's bytes */

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_store_stat_get(s, &a));
    assert_true(a.free_bytes < tb / 4);
    GKVT_OK(gkv_tensor_delete(s, "t"));
    GKVT_OK(gkv_store_stat_get(s, &b));
    assert_true(b.used_bytes >= a.used_bytes);
    if (b.free_bytes < tb)
        fail_msg("free %llu bytes after deleting a tensor of %llu",
                 (unsigned long long)b.free_bytes, (unsigned long long)tb);
    assert_true(b.free_bytes <= b.used_bytes);
    /* LMDB reuses pages a transaction freed from the next-but-one on (the
     * previous meta page may still point at them) */
    GKVT_OK(gkv_tensor_create(s, "tiny", &(gkv_tensor_spec){.dtype = GKV_F32,
                                                            .lo = 0, .hi = 4}));
    GKVT_OK(gkv_tensor_create(s, "u", &sp));
    GKVT_OK(gkv_store_stat_get(s, &c));
    assert_true(c.free_bytes < tb / 4);             /* reused */
    assert_true(c.used_bytes < b.used_bytes + tb / 4);
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* A data.mdb cut short (a partial copy of a partition) faulted (SIGBUS)
 * on the first read of a missing page, in verify or a server's start; now
 * every open refuses it, naming both sizes. */
static void
test_truncated_data_mdb(void **state)
{
    char *dir = gkvt_mkdtemp("cutdb"), p[4200];
    gkv_store *s = NULL;
    gkv_tensor_spec sp = {.dtype = GKV_F32, .ndim = 1, .shape = {64},
                          .lo = 0, .hi = 20000, .init = GKV_INIT_UNIFORM,
                          .a = 0, .b = 1, .seed = 3};
    struct stat sb;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));        /* 5 MB of pages */
    gkv_store_close(s);
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    assert_int_equal(stat(p, &sb), 0);
    assert_true(sb.st_size > (4 << 20));
    /* one page short is as bad as 40 % */
    assert_int_equal(truncate(p, sb.st_size - 4096), 0);
    assert_int_equal(gkv_store_open(&s, dir, GKV_RDONLY, NULL), GKV_ECORRUPT);
    assert_int_equal(truncate(p, sb.st_size * 6 / 10), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(gkv_store_open(&s, dir, i ? 0 : GKV_RDONLY, NULL),
                         GKV_ECORRUPT);
        assert_null(s);
        if (strstr(gkv_store_errmsg(NULL), "was cut short") == NULL ||
            strstr(gkv_store_errmsg(NULL), "data.mdb is") == NULL)
            fail_msg("message: %s", gkv_store_errmsg(NULL));
    }
    gkvt_rmtree(dir);
}

/* Flips one byte of the stored row 'id' in data.mdb, found by its bytes. */
static void
flip_row_byte(const char *dir, const void *pattern, size_t plen)
{
    char path[4096];
    struct stat sb;
    unsigned char *buf, c;
    int fd;

    snprintf(path, sizeof path, "%s/data.mdb", dir);
    fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    fstat(fd, &sb);
    buf = malloc((size_t)sb.st_size);
    assert_int_equal(pread(fd, buf, (size_t)sb.st_size, 0), sb.st_size);
    for (off_t off = 0; off + (off_t)plen <= sb.st_size; off++)
        if (memcmp(buf + off, pattern, plen) == 0) {
            c = buf[off + 3] ^ 0x40;
            assert_int_equal(pwrite(fd, &c, 1, off + 3), 1);
            close(fd);
            free(buf);
            return;
        }
    fail_msg("pattern not found in %s", path);
}

static void
test_verify_finds_flipped_byte(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_U8, 64, 0, 10000);
    gkv_verify_report rep;
    unsigned char row[64];
    uint64_t id = 5555;

    GKVT_OK(gkv_tensor_create(f->s, "a", &sp));
    GKVT_OK(gkv_tensor_create(f->s, "b", &sp));
    for (int i = 0; i < 64; i++)
        row[i] = (unsigned char)(0xA5 ^ (i * 37));
    GKVT_OK(gkv_tensor_push(f->s, "b", &id, 1, row, sizeof row, NULL));
    GKVT_OK(gkv_store_verify(f->s, NULL, &rep));
    assert_int_equal(rep.bad_chunks, 0);
    assert_true(rep.chunks_checked >= 1);
    gkv_store_close(f->s);
    f->s = NULL;
    flip_row_byte(f->dir, row, sizeof row);
    GKVT_OK(gkv_store_open(&f->s, f->dir, 0, NULL));
    assert_int_equal(gkv_store_verify(f->s, NULL, &rep), GKV_ECORRUPT);
    assert_int_equal(rep.bad_chunks, 1);
    assert_string_equal(rep.first_bad, "b");
    assert_int_equal(rep.first_bad_chunk, id / 4096);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "tensor 'b': chunk 1"));
    GKVT_OK(gkv_store_verify(f->s, "a", NULL));
    assert_int_equal(gkv_store_verify(f->s, "b", NULL), GKV_ECORRUPT);
}

/* Deletes data keys number 'a' and 'b' (in key order) with plain LMDB. */
static void
drop_chunks(const char *dir, int a, int b)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_cursor *cur;
    MDB_val k, d;
    int i = 0, rc;

    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 4), 0);
    assert_int_equal(mdb_env_open(env, dir, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "data", 0, &dbi), 0);
    assert_int_equal(mdb_cursor_open(txn, dbi, &cur), 0);
    for (rc = mdb_cursor_get(cur, &k, &d, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT), i++)
        if (i == a || i == b)
            assert_int_equal(mdb_cursor_del(cur, 0), 0);
    mdb_cursor_close(cur);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

static void
test_verify_finds_missing_chunks(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 100);   /* 10 chunks of 10 */
    gkv_tensor_spec zs = gkvt_spec(GKV_F32, 4, 0, 100);
    gkv_verify_report rep;
    float row[4];
    uint64_t id = 25;

    sp.chunk_rows = zs.chunk_rows = 10;
    sp.init = GKV_INIT_CONST;
    sp.a = 1.5;
    GKVT_OK(gkv_tensor_create(f->s, "c", &sp));
    GKVT_OK(gkv_store_verify(f->s, NULL, &rep));
    assert_int_equal(rep.chunks_checked, 10);
    gkv_store_close(f->s);
    f->s = NULL;
    drop_chunks(f->dir, 2, 9);         /* chunk 2 and the last chunk */
    GKVT_OK(gkv_store_open(&f->s, f->dir, 0, NULL));
    assert_int_equal(gkv_store_verify(f->s, "c", &rep), GKV_ECORRUPT);
    assert_int_equal(rep.bad_chunks, 2);
    assert_int_equal(rep.chunks_checked, 8);
    assert_int_equal(rep.first_bad_chunk, 2);
    assert_int_equal(rep.first_bad_row, 20);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "chunk 2 (rows 20..29): chunk is missing"));
    assert_non_null(strstr(gkv_store_errmsg(f->s), "and 1 more"));
    assert_int_equal(gkv_tensor_pull(f->s, NULL, "c", &id, 1, row, sizeof row),
                     GKV_ECORRUPT);
    /* a zeros tensor has no chunks until written: that is not damage */
    GKVT_OK(gkv_tensor_create(f->s, "z", &zs));
    GKVT_OK(gkv_tensor_push(f->s, "z", &id, 1, row, sizeof row, NULL));
    GKVT_OK(gkv_store_verify(f->s, "z", &rep));
    assert_int_equal(rep.chunks_checked, 1);
}

static void
test_stat_prefault_sync(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F64, 8, 0, 1000);
    gkv_store_stat st;
    gkv_push_args ad = {"adagrad", 0, 0, 0, 0, 0};
    uint64_t id = 3;
    double row[8] = {1};

    GKVT_OK(gkv_tensor_create(f->s, "d", &sp));
    GKVT_OK(gkv_tensor_push(f->s, "d", &id, 1, row, sizeof row, &ad));
    GKVT_OK(gkv_store_prefault(f->s));
    GKVT_OK(gkv_store_sync(f->s));
    GKVT_OK(gkv_store_stat_get(f->s, &st));
    assert_int_equal(st.format, KV_FORMAT);
    assert_int_equal(st.ntensors, 1);
    assert_int_equal(st.data_bytes, 2 * 1000 * 64);  /* the row and its state */
    assert_int_equal(st.nchunks, 2);
    assert_int_equal(st.page_size, 4096);
    assert_true(st.used_bytes > 0 && st.used_bytes <= st.map_size);
    {   /* f64 tensors keep f64 optimizer state */
        gkv_tensor_desc d;
        GKVT_OK(gkv_tensor_info(f->s, NULL, "d#adagrad_s", &d));
        assert_int_equal(d.dtype, GKV_F64);
        assert_true(d.is_state);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_list_is_complete),
        cmocka_unit_test(test_dtypes_and_halves),
        cmocka_unit_test(test_open_missing_and_not_a_store),
        cmocka_unit_test(test_newer_format_is_eversion),
        cmocka_unit_test_setup_teardown(test_create_info_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_names_and_specs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_initializers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pull_matches_reference, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pull_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_and_row_view, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_and_write_ranges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_assign_last_wins_add_sums, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_add_halves_and_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_add_integers_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pull_read_null_args, setup, teardown),
        cmocka_unit_test_setup_teardown(test_optimizers_match_reference, setup, teardown),
        cmocka_unit_test_setup_teardown(test_custom_handler_and_rollback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_bad_input_changes_nothing, setup, teardown),
        cmocka_unit_test(test_create_beyond_disk_refused),
        cmocka_unit_test(test_disk_full_delete_makes_room),
        cmocka_unit_test(test_push_beyond_disk_refused),
        cmocka_unit_test(test_store_fds_close_on_exec),
        cmocka_unit_test_setup_teardown(test_delete_reuses_space_and_rename, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_only_store_refuses_writes, setup, teardown),
        cmocka_unit_test(test_tiny_map_grows),
        cmocka_unit_test(test_disk_full_is_emapfull),
        cmocka_unit_test(test_full_disk_at_create),
        cmocka_unit_test(test_second_handle_refused),
        cmocka_unit_test(test_fork_during_open),
        cmocka_unit_test(test_inherited_handle_after_fork),
        cmocka_unit_test(test_snapshot_holder_not_stalled),
        cmocka_unit_test(test_lock_file_not_writable),
        cmocka_unit_test(test_disk_full_with_room_in_map),
        cmocka_unit_test(test_empty_data_mdb),
        cmocka_unit_test(test_truncated_data_mdb),
        cmocka_unit_test(test_stat_free_bytes),
        cmocka_unit_test_setup_teardown(test_verify_finds_flipped_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_finds_missing_chunks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stat_prefault_sync, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
