/* kv_rows_test.c - rows of a tensor (kv/gkv_kv.h): pull against a
 * reference over every chunking, bad pulls, snapshots and row views, range
 * reads and writes; pushes: assign and add (halves, bytes, integers exact),
 * every optimizer against a reference, custom handlers and their rollback,
 * bad pushes that change nothing; NULL buffers. */
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
    return gkvt_store_setup(state, sizeof(struct gkvt_store_fx), "kv_rows");
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

/* ---- pull, read, view ------------------------------------------------ */

static void
check_pull_random(gkv_store *s, const char *name, uint64_t lo, uint64_t hi,
                  uint64_t w, uint64_t *seed)
{
    size_t n = 5000;
    uint64_t *ids = malloc(n * sizeof *ids);
    float *out = malloc(n * w * sizeof *out);

    for (size_t i = 0; i < n; i++)
        ids[i] = lo + tools__splitmix64(seed) % (hi - lo);
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
    struct gkvt_store_fx *f = *state;
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
    struct gkvt_store_fx *f = *state;
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
    struct gkvt_store_fx *f = *state;
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
    struct gkvt_store_fx *f = *state;
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
        uint64_t a = tools__splitmix64(&seed) % 1000, b = tools__splitmix64(&seed) % 1000;
        if (a > b) { uint64_t t = a; a = b; b = t; }
        for (uint64_t i = a; i < b; i++)
            for (int j = 0; j < 3; j++)
                in[(i - a) * 3 + j] = ref[i * 3 + j] = (int32_t)(round * 10000 + i * 3 + j);
        GKVT_OK(gkv_tensor_write(f->s, "t", 50 + a, 50 + b, in, (b - a) * 12));
        a = tools__splitmix64(&seed) % 1000;
        b = a + tools__splitmix64(&seed) % (1000 - a);
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
    struct gkvt_store_fx *f = *state;
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
            ids[i] = 100 + tools__splitmix64(&seed) % (N / 4);   /* many duplicates */
            for (int j = 0; j < W; j++) {
                in[i * W + j] = (int64_t)(tools__splitmix64(&seed) % 1000) - 500;
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
    struct gkvt_store_fx *f = *state;
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
    struct gkvt_store_fx *f = *state;
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
    struct gkvt_store_fx *f = *state;
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
    struct gkvt_store_fx *f = *state;
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
                ids[i] = tools__splitmix64(&seed) % N;
                seen[ids[i]]++;
                for (int j = 0; j < E; j++) {
                    in[i * E + j] = (float)((double)(tools__splitmix64(&seed) % 2001) / 1000.0 - 1.0);
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
    struct gkvt_store_fx *f = *state;
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

static void
test_push_bad_input_changes_nothing(void **state)
{
    struct gkvt_store_fx *f = *state;
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

#define T(name) cmocka_unit_test_setup_teardown(name, setup, gkvt_store_teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_pull_matches_reference),
        T(test_pull_bad_input),
        T(test_snapshot_and_row_view),
        T(test_read_and_write_ranges),
        T(test_push_assign_last_wins_add_sums),
        T(test_push_add_halves_and_bytes),
        T(test_push_add_integers_exact),
        T(test_pull_read_null_args),
        T(test_optimizers_match_reference),
        T(test_custom_handler_and_rollback),
        T(test_push_bad_input_changes_nothing),
    };
    return cmocka_run_group_tests_name("kv_rows", tests, NULL, NULL);
}
