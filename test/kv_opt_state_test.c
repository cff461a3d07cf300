/* kv_opt_state_test.c - optimizer state can be checkpointed (read),
 * restored (assign push or range write of a '#' companion) and reset
 * (gkv_opt_reset), in plain and write-back mode. The reference is always
 * the same pushes on a store that was never interrupted: bytes must be
 * identical. Bad input changes nothing, byte for byte. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <lmdb.h>
#include "gkvt.h"
#include "kv/kv_test.h"     /* kv__wb_flush_hook */

#define W  6            /* row width */
#define N  1500         /* rows, IDs [LO, LO + N) */
#define LO 50
#define NP 64           /* IDs per push */

/* the tensor, then its companions; index 0 is the tensor itself */
static const char *const fam_suf[5] = {
    "", "#adagrad_s", "#adam_m", "#adam_v", "#adam_t"
};

static gkv_tensor_spec
spec(gkv_dtype dt)
{
    gkv_tensor_spec sp = gkvt_spec(dt, W, LO, LO + N);

    sp.flags = GKV_TENSOR_HOT;    /* many chunks */
    sp.init = GKV_INIT_UNIFORM;
    sp.a = -1;
    sp.b = 1;
    sp.seed = 5;
    return sp;
}

static gkv_store *
open_store(const char *dir, const char *sub)
{
    char p[512];
    gkv_store *s;

    snprintf(p, sizeof p, "%s/%s", dir, sub);
    GKVT_OK(gkv_store_open(&s, p, GKV_CREATE | GKV_NOSYNC, NULL));
    return s;
}

/* All rows of 'name' through tx (NULL: without a snapshot, so a RAM copy
 * when there is one), or NULL when there is no such tensor. */
static unsigned char *
dump(gkv_store *s, gkv_txn *tx, const char *name, size_t *len)
{
    gkv_tensor_desc d;
    unsigned char *b;
    gkv_err rc;

    *len = 0;
    if ((rc = gkv_tensor_info(s, tx, name, &d)) == GKV_ENOTFOUND)
        return NULL;
    GKVT_OK(rc);
    *len = (size_t)(d.hi - d.lo) * d.row_bytes;
    assert_non_null(b = malloc(*len));
    rc = gkv_tensor_read(s, tx, name, d.lo, d.hi, b, *len);
    if (rc == GKV_ENOTFOUND && tx == NULL) {   /* info read the store */
        free(b);
        return NULL;
    }
    GKVT_OK(rc);
    return b;
}

/* A tensor and its four companions (NULL: absent). */
struct fam { unsigned char *b[5]; size_t len[5]; };

static struct fam
fam_get(gkv_store *s, gkv_txn *tx, const char *name)
{
    struct fam f;

    for (int i = 0; i < 5; i++) {
        char n[128];
        snprintf(n, sizeof n, "%s%s", name, fam_suf[i]);
        f.b[i] = dump(s, tx, n, &f.len[i]);
    }
    return f;
}

/* The same through a fresh snapshot: the store as last written. */
static struct fam
fam_stored(gkv_store *s, const char *name)
{
    gkv_txn *tx;
    struct fam f;

    GKVT_OK(gkv_txn_begin(s, &tx));
    f = fam_get(s, tx, name);
    gkv_txn_end(tx);
    return f;
}

static void
fam_free(struct fam *f)
{
    for (int i = 0; i < 5; i++)
        free(f->b[i]);
}

/* 1 when a and b hold the same tensors with the same bytes; else 0 and
 * *which names the first that differs. */
static int
fam_eq(const struct fam *a, const struct fam *b, int *which)
{
    for (int i = 0; i < 5; i++) {
        *which = i;
        if ((a->b[i] == NULL) != (b->b[i] == NULL) || a->len[i] != b->len[i] ||
            (a->b[i] != NULL && memcmp(a->b[i], b->b[i], a->len[i]) != 0))
            return 0;
    }
    return 1;
}

static void
fam_same(const struct fam *a, const struct fam *b, const char *when)
{
    int i;

    if (!fam_eq(a, b, &i))
        fail_msg("%s: tensor%s differs (%s here, %s in the reference)", when,
                 fam_suf[i], a->b[i] ? "present" : "absent",
                 b->b[i] ? "present" : "absent");
}

/* Families of 'name' in s (tx NULL: as this handle sees it) and in ref
 * (a plain store) are the same. */
static void
same_as_ref(gkv_store *s, gkv_txn *tx, gkv_store *ref, const char *name,
            const char *when)
{
    struct fam a = fam_get(s, tx, name), b = fam_get(ref, NULL, name);

    fam_same(&a, &b, when);
    fam_free(&a);
    fam_free(&b);
}

static void
same_as_ref_stored(gkv_store *s, gkv_store *ref, const char *name,
                   const char *when)
{
    gkv_txn *tx;

    GKVT_OK(gkv_txn_begin(s, &tx));
    same_as_ref(s, tx, ref, name, when);
    gkv_txn_end(tx);
}

/* k optimizer pushes of NP random IDs (duplicates included) with random
 * gradients, all drawn from 'seed': two stores given the same seed get the
 * same pushes. */
static void
rounds(gkv_store *s, const char *name, const char *opt, gkv_dtype dt,
       uint64_t seed, int k)
{
    gkv_push_args pa = {opt, 0.05, 0, 0, 0, 0};
    uint64_t rs = seed, ids[NP];
    double g[NP * W];
    float gf[NP * W];

    for (int r = 0; r < k; r++) {
        for (int i = 0; i < NP; i++) {
            ids[i] = LO + tools__splitmix64(&rs) % (i % 4 == 0 ? 40 : N);
            for (int j = 0; j < W; j++) {
                g[i * W + j] = (double)((int)(tools__splitmix64(&rs) % 2001) - 1000) / 700.0;
                gf[i * W + j] = (float)g[i * W + j];
            }
        }
        if (dt == GKV_F64)
            GKVT_OK(gkv_tensor_push(s, name, ids, NP, g, sizeof g, &pa));
        else
            GKVT_OK(gkv_tensor_push(s, name, ids, NP, gf, sizeof gf, &pa));
    }
}

/* Copies 'name' (the tensor and what state it has) from 'from' (read
 * through one snapshot: the checkpoint) into 'to', where the tensor
 * exists. The state goes half by range write, half by assign push with
 * the IDs in reverse order. */
static void
checkpoint_restore(gkv_store *from, gkv_store *to, const char *name,
                   int state)
{
    gkv_txn *tx;
    struct fam f;

    GKVT_OK(gkv_txn_begin(from, &tx));
    f = fam_get(from, tx, name);
    gkv_txn_end(tx);
    assert_non_null(f.b[0]);
    GKVT_OK(gkv_tensor_write(to, name, LO, LO + N, f.b[0], f.len[0]));
    for (int i = 1; state && i < 5; i++) {
        char n[128];
        size_t rb = f.len[i] / N, half = N / 2;
        uint64_t *ids;

        if (f.b[i] == NULL)
            continue;
        snprintf(n, sizeof n, "%s%s", name, fam_suf[i]);
        GKVT_OK(gkv_tensor_write(to, n, LO, LO + half, f.b[i], half * rb));
        assert_non_null(ids = malloc((N - half) * sizeof *ids));
        unsigned char *rows = malloc((N - half) * rb);
        assert_non_null(rows);
        for (size_t k = 0; k < N - half; k++) {
            size_t r = N - 1 - k;
            ids[k] = LO + r;
            memcpy(rows + k * rb, f.b[i] + r * rb, rb);
        }
        GKVT_OK(gkv_tensor_push(to, n, ids, N - half, rows, (N - half) * rb,
                                NULL));
        free(ids);
        free(rows);
    }
    fam_free(&f);
}

/* ---- checkpoint, restore, go on ------------------------------------- */

/* Plain mode, adam and adagrad, f32 and f64: checkpoint a trained store,
 * restore it into a fresh one, push on both: bytes identical to the
 * uninterrupted run, also after reopening. Restoring the weights without
 * the state gives other bytes (so the comparison can fail). */
static void
test_restore_plain(void **state)
{
    static const char *const opts[] = {"adam", "adagrad"};
    static const gkv_dtype dts[] = {GKV_F32, GKV_F64};
    char *dir = gkvt_mkdtemp("optst");

    (void)state;
    for (int o = 0; o < 2; o++)
        for (int d = 0; d < 2; d++) {
            gkv_tensor_spec sp = spec(dts[d]);
            gkv_store *a, *b, *c;
            char sub[32];
            struct fam fa, fc;
            int which;

            snprintf(sub, sizeof sub, "a%d%d", o, d);
            a = open_store(dir, sub);
            snprintf(sub, sizeof sub, "b%d%d", o, d);
            b = open_store(dir, sub);
            snprintf(sub, sizeof sub, "c%d%d", o, d);
            c = open_store(dir, sub);
            GKVT_OK(gkv_tensor_create(a, "emb", &sp));
            GKVT_OK(gkv_tensor_create(b, "emb", &sp));
            GKVT_OK(gkv_tensor_create(c, "emb", &sp));
            rounds(a, "emb", opts[o], dts[d], 1, 6);
            checkpoint_restore(a, b, "emb", 1);
            checkpoint_restore(a, c, "emb", 0);          /* weights only */
            same_as_ref(b, NULL, a, "emb", "right after the restore");
            rounds(a, "emb", opts[o], dts[d], 2, 6);
            rounds(b, "emb", opts[o], dts[d], 2, 6);
            rounds(c, "emb", opts[o], dts[d], 2, 6);
            same_as_ref(b, NULL, a, "emb", "after pushes on the restored store");
            fa = fam_get(a, NULL, "emb");
            fc = fam_get(c, NULL, "emb");
            assert_int_equal(fam_eq(&fa, &fc, &which), 0);
            assert_int_equal(which, 0);   /* the weights differ already */
            fam_free(&fa);
            fam_free(&fc);
            GKVT_OK(gkv_store_verify(b, NULL, NULL));
            gkv_store_close(b);
            snprintf(sub, sizeof sub, "b%d%d", o, d);
            b = open_store(dir, sub);
            same_as_ref(b, NULL, a, "emb", "after reopening");
            gkv_store_close(a);
            gkv_store_close(b);
            gkv_store_close(c);
        }
    gkvt_rmtree(dir);
}

/* Write-back mode: the restore goes to the RAM copy (adam: no companion
 * yet, the write creates it; adagrad: the copy has state from earlier
 * pushes, which the restore overwrites). A snapshot sees the store as
 * last flushed; after pushes, a flush, more pushes, and close/reopen the
 * bytes are the uninterrupted run's. */
static void
test_restore_writeback(void **state)
{
    static const char *const opts[] = {"adam", "adagrad"};
    char *dir = gkvt_mkdtemp("optwb");

    (void)state;
    for (int o = 0; o < 2; o++) {
        gkv_tensor_spec sp = spec(GKV_F32);
        gkv_store *a, *b;
        char sub[32];
        struct fam st, fa;

        snprintf(sub, sizeof sub, "a%d", o);
        a = open_store(dir, sub);
        snprintf(sub, sizeof sub, "b%d", o);
        b = open_store(dir, sub);
        GKVT_OK(gkv_tensor_create(a, "emb", &sp));
        GKVT_OK(gkv_tensor_create(b, "emb", &sp));
        rounds(a, "emb", opts[o], GKV_F32, 1, 6);
        GKVT_OK(gkv_writeback_start(b, "emb", 100000));   /* flush when asked */
        if (o == 1)
            rounds(b, "emb", opts[o], GKV_F32, 99, 2);    /* state to replace */
        checkpoint_restore(a, b, "emb", 1);
        same_as_ref(b, NULL, a, "emb", "write-back: RAM after the restore");
        /* the store has not seen it yet: the restored state is in RAM */
        st = fam_stored(b, "emb");
        fa = fam_get(a, NULL, "emb");
        assert_non_null(st.b[o == 0 ? 2 : 1]);     /* created by the load */
        assert_memory_not_equal(st.b[o == 0 ? 2 : 1], fa.b[o == 0 ? 2 : 1],
                                fa.len[o == 0 ? 2 : 1]);
        fam_free(&st);
        fam_free(&fa);
        GKVT_OK(gkv_writeback_flush(b));
        same_as_ref_stored(b, a, "emb", "write-back: store after a flush");
        rounds(a, "emb", opts[o], GKV_F32, 2, 4);
        rounds(b, "emb", opts[o], GKV_F32, 2, 4);
        same_as_ref(b, NULL, a, "emb", "write-back: RAM after pushes");
        GKVT_OK(gkv_writeback_flush(b));
        same_as_ref_stored(b, a, "emb", "write-back: store after pushes");
        rounds(a, "emb", opts[o], GKV_F32, 3, 4);
        rounds(b, "emb", opts[o], GKV_F32, 3, 4);
        gkv_store_close(b);                         /* flushes */
        snprintf(sub, sizeof sub, "b%d", o);
        b = open_store(dir, sub);
        same_as_ref(b, NULL, a, "emb", "write-back: after close and reopen");
        GKVT_OK(gkv_store_verify(b, NULL, NULL));
        gkv_store_close(a);
        gkv_store_close(b);
    }
    gkvt_rmtree(dir);
}

/* A restore during a flush (from the flush hook: after the flush listed
 * its chunks, before it writes them): that flush writes the state as it
 * was (a push boundary), the next one the restored rows; RAM has them at
 * once. */
static gkv_store *hook_store;
static const float *hook_rows;
static int hook_calls;

static void
hook_restore(gkv_store *s)
{
    uint64_t ids[3] = {LO + 7, LO + 900, LO + 7};

    if (s != hook_store || hook_calls++ != 0)
        return;
    GKVT_OK(gkv_tensor_push(s, "emb#adagrad_s", ids, 3, hook_rows,
                            3 * W * sizeof(float), NULL));
}

static void
test_restore_during_flush(void **state)
{
    char *dir = gkvt_mkdtemp("optfl");
    gkv_tensor_spec sp = spec(GKV_F32);
    float rows[3 * W], got[W];
    uint64_t id7 = LO + 7, id900 = LO + 900;
    gkv_store *s;
    struct fam before, st;
    gkv_txn *tx;

    (void)state;
    for (int i = 0; i < 3 * W; i++)
        rows[i] = 100.0f + (float)i;
    s = open_store(dir, "s");
    GKVT_OK(gkv_tensor_create(s, "emb", &sp));
    GKVT_OK(gkv_writeback_start(s, "emb", 100000));
    rounds(s, "emb", "adagrad", GKV_F32, 1, 3);       /* dirty state */
    before = fam_get(s, NULL, "emb");                  /* RAM: what the flush writes */
    hook_store = s;
    hook_rows = rows;
    hook_calls = 0;
    kv__wb_flush_hook = hook_restore;
    GKVT_OK(gkv_writeback_flush(s));
    kv__wb_flush_hook = NULL;
    assert_int_equal(hook_calls, 1);
    st = fam_stored(s, "emb");
    fam_same(&st, &before, "the flush the restore came during");
    fam_free(&st);
    /* RAM: the last row for ID 7 wins */
    GKVT_OK(gkv_tensor_pull(s, NULL, "emb#adagrad_s", &id7, 1, got, sizeof got));
    assert_memory_equal(got, rows + 2 * W, sizeof got);
    GKVT_OK(gkv_tensor_pull(s, NULL, "emb#adagrad_s", &id900, 1, got, sizeof got));
    assert_memory_equal(got, rows + W, sizeof got);
    GKVT_OK(gkv_writeback_flush(s));
    GKVT_OK(gkv_txn_begin(s, &tx));
    GKVT_OK(gkv_tensor_pull(s, tx, "emb#adagrad_s", &id7, 1, got, sizeof got));
    assert_memory_equal(got, rows + 2 * W, sizeof got);
    GKVT_OK(gkv_tensor_pull(s, tx, "emb#adagrad_s", &id900, 1, got, sizeof got));
    assert_memory_equal(got, rows + W, sizeof got);
    gkv_txn_end(tx);
    fam_free(&before);
    GKVT_OK(gkv_writeback_stop(s, "emb"));
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* ---- reset ----------------------------------------------------------- */

/* After gkv_opt_reset, one adam push to distinct IDs gives exactly the
 * first adam step, computed here (m = (1-b1) g, v = (1-b2) g^2 rounded to
 * f32, t = 1), and the whole family equals a fresh store's given the same
 * weights and push. Plain and write-back (the old state is not written
 * back by later flushes, nor after close and reopen). */
static void
test_reset_then_fresh_adam(void **state)
{
    char *dir = gkvt_mkdtemp("optrs");
    const double lr = 0.03, eps = 1e-6, b1 = 0.8, b2 = 0.99;
    gkv_push_args pa = {"adam", lr, eps, b1, b2, 0};

    (void)state;
    for (int wb = 0; wb < 2; wb++) {
        gkv_tensor_spec sp = spec(GKV_F32);
        uint64_t ids[5] = {LO + 3, LO + 600, LO + 1499, LO, LO + 77};
        float g[5 * W], w0[5 * W], want[5 * W], got[5 * W];
        int64_t t[5];
        gkv_tensor_desc d;
        gkv_store *s, *f;
        struct fam st, fs;
        char sub[32];
        size_t len;
        unsigned char *emb;

        snprintf(sub, sizeof sub, "s%d", wb);
        s = open_store(dir, sub);
        snprintf(sub, sizeof sub, "f%d", wb);
        f = open_store(dir, sub);
        GKVT_OK(gkv_tensor_create(s, "emb", &sp));
        GKVT_OK(gkv_tensor_create(f, "emb", &sp));
        if (wb)
            GKVT_OK(gkv_writeback_start(s, "emb", 100000));
        rounds(s, "emb", "adam", GKV_F32, 1, 5);
        rounds(s, "emb", "adagrad", GKV_F32, 2, 2);
        if (wb)
            GKVT_OK(gkv_writeback_flush(s));   /* old state in the store */
        rounds(s, "emb", "adam", GKV_F32, 3, 2);   /* and newer in RAM */
        GKVT_OK(gkv_opt_reset(s, "emb", NULL));
        for (int i = 1; i < 5; i++) {
            char n[64];
            snprintf(n, sizeof n, "emb%s", fam_suf[i]);
            assert_int_equal(gkv_tensor_info(s, NULL, n, &d), GKV_ENOTFOUND);
        }
        /* the reset wrote the pending weights with it: the store is RAM */
        st = fam_stored(s, "emb");
        fs = fam_get(s, NULL, "emb");
        fam_same(&st, &fs, "store and RAM right after the reset");
        for (int i = 1; i < 5; i++)
            assert_null(st.b[i]);
        fam_free(&st);
        fam_free(&fs);
        /* the fresh store: the same weights, no state */
        emb = dump(s, NULL, "emb", &len);
        GKVT_OK(gkv_tensor_write(f, "emb", LO, LO + N, emb, len));
        free(emb);
        for (int i = 0; i < 5 * W; i++)
            g[i] = (float)((i * 37) % 23 - 11) / 9.0f;
        GKVT_OK(gkv_tensor_pull(s, NULL, "emb", ids, 5, w0, sizeof w0));
        GKVT_OK(gkv_tensor_push(s, "emb", ids, 5, g, sizeof g, &pa));
        GKVT_OK(gkv_tensor_push(f, "emb", ids, 5, g, sizeof g, &pa));
        for (int i = 0; i < 5 * W; i++) {
            float m = (float)(b1 * 0.0 + (1 - b1) * (double)g[i]);
            float v = (float)(b2 * 0.0 + (1 - b2) * (double)g[i] * (double)g[i]);
            double bc1 = 1 - pow(b1, 1.0), bc2 = 1 - pow(b2, 1.0);
            want[i] = (float)((double)w0[i] - lr * ((double)m / bc1) /
                              (sqrt((double)v / bc2) + eps));
        }
        GKVT_OK(gkv_tensor_pull(s, NULL, "emb", ids, 5, got, sizeof got));
        assert_memory_equal(got, want, sizeof got);
        GKVT_OK(gkv_tensor_pull(s, NULL, "emb#adam_t", ids, 5, t, sizeof t));
        for (int i = 0; i < 5; i++)
            assert_int_equal(t[i], 1);
        same_as_ref(s, NULL, f, "emb", "reset, then a push, vs a fresh store");
        if (wb) {
            GKVT_OK(gkv_writeback_flush(s));
            same_as_ref_stored(s, f, "emb", "reset: store after a flush");
            rounds(s, "emb", "adam", GKV_F32, 4, 2);
            rounds(f, "emb", "adam", GKV_F32, 4, 2);
            gkv_store_close(s);
            snprintf(sub, sizeof sub, "s%d", wb);
            s = open_store(dir, sub);
            same_as_ref(s, NULL, f, "emb", "reset: after close and reopen");
        }
        GKVT_OK(gkv_store_verify(s, NULL, NULL));
        gkv_store_close(s);
        gkv_store_close(f);
    }
    gkvt_rmtree(dir);
}

/* Reset of one optimizer leaves the other's state byte for byte; a reset
 * with no state left is GKV_OK and changes nothing. In write-back mode,
 * reads without a snapshot see it at once. */
static void
test_reset_one_optimizer(void **state)
{
    char *dir = gkvt_mkdtemp("optr1");

    (void)state;
    for (int wb = 0; wb < 2; wb++) {
        gkv_tensor_spec sp = spec(GKV_F32);
        gkv_store *s;
        struct fam f0, f1;
        char sub[32];

        snprintf(sub, sizeof sub, "s%d", wb);
        s = open_store(dir, sub);
        GKVT_OK(gkv_tensor_create(s, "emb", &sp));
        GKVT_OK(gkv_tensor_create(s, "other", &sp));
        if (wb) {
            GKVT_OK(gkv_writeback_start(s, "emb", 100000));
            GKVT_OK(gkv_writeback_start(s, "other", 100000));
        }
        rounds(s, "emb", "adam", GKV_F32, 1, 3);
        rounds(s, "emb", "adagrad", GKV_F32, 2, 3);
        rounds(s, "other", "adam", GKV_F32, 3, 3);
        f0 = fam_get(s, NULL, "emb");
        for (int i = 0; i < 5; i++)
            assert_non_null(f0.b[i]);
        GKVT_OK(gkv_opt_reset(s, "emb", "adagrad"));
        f1 = fam_get(s, NULL, "emb");
        assert_null(f1.b[1]);
        for (int i = 0; i < 5; i++)
            if (i != 1)
                assert_memory_equal(f0.b[i], f1.b[i], f0.len[i]);
        fam_free(&f1);
        f1 = fam_stored(s, "emb");
        assert_null(f1.b[1]);
        for (int i = 0; i < 5; i++)
            if (i != 1)
                assert_memory_equal(f0.b[i], f1.b[i], f0.len[i]);
        fam_free(&f1);
        GKVT_OK(gkv_opt_reset(s, "emb", "adam"));
        f1 = fam_get(s, NULL, "emb");
        assert_memory_equal(f0.b[0], f1.b[0], f0.len[0]);
        for (int i = 1; i < 5; i++)
            assert_null(f1.b[i]);
        fam_free(&f1);
        GKVT_OK(gkv_opt_reset(s, "emb", NULL));        /* nothing left */
        GKVT_OK(gkv_opt_reset(s, "emb", "adam"));
        f1 = fam_stored(s, "emb");
        assert_memory_equal(f0.b[0], f1.b[0], f0.len[0]);
        for (int i = 1; i < 5; i++)
            assert_null(f1.b[i]);
        fam_free(&f1);
        /* the other tensor kept its state (and, in write-back, its pushes
         * went to the store with the reset) */
        f1 = fam_stored(s, "other");
        fam_free(&f0);
        f0 = fam_get(s, NULL, "other");
        fam_same(&f1, &f0, "the other tensor");
        assert_non_null(f1.b[2]);
        fam_free(&f0);
        fam_free(&f1);
        if (wb) {
            GKVT_OK(gkv_writeback_stop(s, "emb"));
            GKVT_OK(gkv_writeback_stop(s, "other"));
        }
        GKVT_OK(gkv_store_verify(s, NULL, NULL));
        gkv_store_close(s);
    }
    gkvt_rmtree(dir);
}

/* ---- duplicate IDs ---------------------------------------------------- */

/* Stores gradient v as element k of a row buffer of dtype dt. */
static void
grad_store(gkv_dtype dt, unsigned char *b, size_t k, double v)
{
    if (dt == GKV_F64) {
        memcpy(b + k * 8, &v, 8);
    } else {
        uint16_t h = dt == GKV_F16 ? gkv_f32_to_f16((float)v)
                                   : gkv_f32_to_bf16((float)v);
        memcpy(b + k * 2, &h, 2);
    }
}

/* An optimizer push with an ID given several times steps that row once,
 * with the mean of its gradients (as DGL's sparse optimizers), or their sum
 * with GKV_PUSH_DUPS_SUM: the same bytes (tensor and state) as one push of
 * each ID with the gradients averaged (summed) beforehand. f64, f16 and
 * bf16 take the general (not f32) summing loop; the gradients are
 * multiples of 1/4 and the copies 1, 2 or 4, so every sum and mean is
 * exact in each dtype and the order of summing does not matter. Plain and
 * write-back mode, two pushes (adam's second step). */
static void
test_duplicate_ids_sum_gradients(void **state)
{
    enum { ND = 13, NU = 5 };
    /* unique IDs and how many copies each has in the push; the last is
     * given once (control) */
    static const uint64_t uid[NU] = {LO + 3, LO + 7, LO + 700, LO + 9, LO + 1400};
    static const int copies[NU] = {4, 2, 2, 4, 1};
    static const gkv_dtype dts[3] = {GKV_F64, GKV_F16, GKV_BF16};
    static const char *const opts[3] = {"sgd", "adagrad", "adam"};
    char *dir = gkvt_mkdtemp("optdup");

    (void)state;
    for (int wb = 0; wb < 2; wb++) {
        char sub[32];
        gkv_store *s;

        snprintf(sub, sizeof sub, "s%d", wb);
        s = open_store(dir, sub);
        for (int t = 0; t < 3; t++) {
            gkv_dtype dt = dts[t];
            size_t es = dt == GKV_F64 ? 8 : 2, rb = W * es;
            gkv_tensor_spec sp = spec(dt);
            unsigned char gd[ND * W * 8], gp[2][NU * W * 8];
            uint64_t ids[ND];
            double sum[NU][W];
            int n = 0;

            /* the push with copies, in an order that interleaves them,
             * and the sums (computed in double: exact) */
            memset(sum, 0, sizeof sum);
            for (int c = 0; c < 4; c++)
                for (int u = 0; u < NU; u++) {
                    if (c >= copies[u])
                        continue;
                    ids[n] = uid[u];
                    for (int j = 0; j < W; j++) {
                        double v = (double)((n * 5 + j * 3) % 9 - 4) * 0.25;
                        grad_store(dt, gd + (size_t)n * rb, (size_t)j, v);
                        sum[u][j] += v;
                    }
                    n++;
                }
            assert_int_equal(n, ND);
            for (int u = 0; u < NU; u++)
                for (int j = 0; j < W; j++) {
                    grad_store(dt, gp[0] + (size_t)u * rb, (size_t)j,
                               sum[u][j] / copies[u]);
                    grad_store(dt, gp[1] + (size_t)u * rb, (size_t)j, sum[u][j]);
                }
            for (int om = 0; om < 6; om++) {
                int o = om % 3, mode = om / 3;
                gkv_push_args pa = {opts[o], 0.05, 0, 0, 0,
                                    mode ? GKV_PUSH_DUPS_SUM : 0};
                char dn[64], pn[64];
                struct fam fd, fp, f0;
                int which;

                snprintf(dn, sizeof dn, "dup%d_%s_%s", mode, gkv_dtype_name(dt),
                         opts[o]);
                snprintf(pn, sizeof pn, "one%d_%s_%s", mode, gkv_dtype_name(dt),
                         opts[o]);
                GKVT_OK(gkv_tensor_create(s, dn, &sp));
                GKVT_OK(gkv_tensor_create(s, pn, &sp));
                if (wb) {
                    GKVT_OK(gkv_writeback_start(s, dn, 100000));
                    GKVT_OK(gkv_writeback_start(s, pn, 100000));
                }
                f0 = fam_get(s, NULL, dn);
                fp = fam_get(s, NULL, pn);
                fam_same(&f0, &fp, "before the pushes");   /* same init */
                fam_free(&fp);
                for (int k = 0; k < 2; k++) {
                    GKVT_OK(gkv_tensor_push(s, dn, ids, ND, gd, ND * rb, &pa));
                    GKVT_OK(gkv_tensor_push(s, pn, uid, NU, gp[mode], NU * rb,
                                            &pa));
                }
                fd = fam_get(s, NULL, dn);
                fp = fam_get(s, NULL, pn);
                if (!fam_eq(&fd, &fp, &which))
                    fail_msg("%s %s%s: duplicate IDs differ from %s "
                             "gradients", gkv_dtype_name(dt), opts[o],
                             fam_suf[which], mode ? "summed" : "averaged");
                /* the pushes moved the rows (so equal bytes mean something) */
                assert_memory_not_equal(fd.b[0] + (uid[0] - LO) * rb,
                                        f0.b[0] + (uid[0] - LO) * rb, rb);
                fam_free(&f0);
                fam_free(&fd);
                fam_free(&fp);
                if (wb) {
                    GKVT_OK(gkv_writeback_stop(s, dn));
                    GKVT_OK(gkv_writeback_stop(s, pn));
                }
            }
        }
        gkv_store_close(s);
    }
    gkvt_rmtree(dir);
}

/* ---- bad input ------------------------------------------------------- */

static gkv_err
h_mul(void *ctx, const gkv_tensor_desc *d, uint64_t id, void *row,
      const void *in)
{
    (void)ctx;
    (void)d;
    (void)id;
    (void)in;
    memset(row, 0, 4);
    return GKV_OK;
}

static size_t
ntensors(gkv_store *s)
{
    gkv_tensor_desc *v;
    size_t n;

    GKVT_OK(gkv_tensor_list(s, NULL, 1, &v, &n));
    gkv_free(v);
    return n;
}

/* Every bad restore or reset fails with the error it should, naming what
 * was wrong, and leaves the store (and, in write-back, the RAM copies)
 * unchanged byte for byte, with no companion created. */
static void
test_bad_input_changes_nothing(void **state)
{
    char *dir = gkvt_mkdtemp("optbad");

    (void)state;
    for (int wb = 0; wb < 2; wb++) {
        gkv_tensor_spec sp = spec(GKV_F32), spi = spec(GKV_I32);
        uint64_t ids[8] = {LO, LO + 1, LO + 2, LO + 3, LO + 4, LO + 5,
                           LO + 6, LO + 7};
        float rows[8 * W];
        double drows[8 * W];
        int64_t steps[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        gkv_store *s;
        struct fam r0, s0, r1, s1;
        size_t nt;
        char sub[32];
        gkv_tensor_desc d;

        memset(rows, 0, sizeof rows);
        memset(drows, 0, sizeof drows);
        snprintf(sub, sizeof sub, "s%d", wb);
        s = open_store(dir, sub);
        GKVT_OK(gkv_handler_register(s, "mul", h_mul, NULL));
        GKVT_OK(gkv_tensor_create(s, "emb", &sp));
        GKVT_OK(gkv_tensor_create(s, "fresh", &sp));
        GKVT_OK(gkv_tensor_create(s, "ti", &spi));
        rounds(s, "emb", "adam", GKV_F32, 1, 2);
        if (wb) {
            GKVT_OK(gkv_writeback_start(s, "emb", 100000));
            GKVT_OK(gkv_writeback_start(s, "fresh", 100000));
            rounds(s, "emb", "adam", GKV_F32, 2, 2);   /* RAM != store */
        }
        nt = ntensors(s);
        r0 = fam_get(s, NULL, "emb");
        s0 = fam_stored(s, "emb");

#define BAD(call, err, needle) do {                                         \
        assert_int_equal((call), (err));                                    \
        if (strstr(gkv_store_errmsg(s), (needle)) == NULL)                   \
            fail_msg("%s: message '%s' does not name '%s'", #call,          \
                     gkv_store_errmsg(s), (needle));                        \
    } while (0)

        /* unknown push flags, on a restore too */
        BAD(gkv_tensor_push(s, "emb#adam_m", ids, 8, rows, sizeof rows,
                            &(gkv_push_args){NULL, 0, 0, 0, 0, 0x80}),
            GKV_EINVAL, "unknown push flags 0x80");
        /* wrong row bytes, wrong dtype (f64 rows for f32 state) */
        BAD(gkv_tensor_push(s, "emb#adam_m", ids, 8, rows, sizeof rows - 4,
                            NULL), GKV_ESHAPE, "emb#adam_m");
        BAD(gkv_tensor_push(s, "emb#adam_v", ids, 8, drows, sizeof drows,
                            NULL), GKV_ESHAPE, "emb#adam_v");
        BAD(gkv_tensor_write(s, "emb#adam_m", LO, LO + 8, drows, sizeof drows),
            GKV_ESHAPE, "emb#adam_m");
        BAD(gkv_tensor_write(s, "emb#adam_t", LO, LO + 8, rows, sizeof rows),
            GKV_ESHAPE, "emb#adam_t");
        /* IDs outside the range: the good rows before a bad one are not
         * written either */
        ids[5] = LO + N;
        BAD(gkv_tensor_push(s, "emb#adam_m", ids, 8, rows, sizeof rows, NULL),
            GKV_ERANGE, "emb#adam_m");
        ids[5] = LO - 1;
        BAD(gkv_tensor_push(s, "emb#adam_t", ids, 8, steps, sizeof steps, NULL),
            GKV_ERANGE, "emb#adam_t");
        ids[5] = LO + 5;
        BAD(gkv_tensor_write(s, "emb#adam_m", LO - 1, LO + 7, rows, sizeof rows),
            GKV_ERANGE, "emb#adam_m");
        BAD(gkv_tensor_write(s, "emb#adam_m", LO + N - 7, LO + N + 1, rows,
                             sizeof rows), GKV_ERANGE, "emb#adam_m");
        /* a negative step count */
        steps[6] = -1;
        {   /* the message names the row's ID, not its index in the call */
            char want[64];
            snprintf(want, sizeof want, "row of ID %llu holds step count -1",
                     (unsigned long long)ids[6]);
            BAD(gkv_tensor_push(s, "emb#adam_t", ids, 8, steps, sizeof steps,
                                NULL), GKV_EINVAL, want);
            snprintf(want, sizeof want, "row of ID %llu holds step count -1",
                     (unsigned long long)(LO + 6));
            BAD(gkv_tensor_write(s, "emb#adam_t", LO, LO + 8, steps,
                                 sizeof steps), GKV_EINVAL, want);
        }
        steps[6] = 7;
        /* a negative sum of squares or second moment (the next step's
         * square root would be NaN), a NaN first moment: refused, naming
         * the row's ID; -0 is 0 */
        {
            char want[96];

            rows[3 * W + 1] = -0.25f;
            snprintf(want, sizeof want, "the row of ID %llu holds -0.25 "
                     "(element 1); it must be finite and 0 or more",
                     (unsigned long long)ids[3]);
            BAD(gkv_tensor_push(s, "emb#adagrad_s", ids, 8, rows, sizeof rows,
                                NULL), GKV_EINVAL, want);
            BAD(gkv_tensor_push(s, "emb#adam_v", ids, 8, rows, sizeof rows,
                                NULL), GKV_EINVAL, want);
            snprintf(want, sizeof want, "the row of ID %llu holds -0.25",
                     (unsigned long long)(LO + 3));
            BAD(gkv_tensor_write(s, "emb#adam_v", LO, LO + 8, rows,
                                 sizeof rows), GKV_EINVAL, want);
            rows[3 * W + 1] = NAN;
            BAD(gkv_tensor_push(s, "emb#adam_m", ids, 8, rows, sizeof rows,
                                NULL), GKV_EINVAL, "it must be finite");
            rows[3 * W + 1] = 0;
        }
        /* state of a tensor that does not exist, of an integer tensor */
        BAD(gkv_tensor_push(s, "nope#adam_m", ids, 8, rows, sizeof rows, NULL),
            GKV_ENOTFOUND, "'nope'");
        BAD(gkv_tensor_write(s, "nope#adagrad_s", LO, LO + 8, rows,
                             sizeof rows), GKV_ENOTFOUND, "'nope'");
        BAD(gkv_tensor_push(s, "ti#adam_m", ids, 8, rows, sizeof rows, NULL),
            GKV_EINVAL, "floating dtype");
        BAD(gkv_tensor_write(s, "ti#adagrad_s", LO, LO + 8, rows, sizeof rows),
            GKV_EINVAL, "floating dtype");
        /* a bad write to a tensor with no state yet creates none */
        BAD(gkv_tensor_push(s, "fresh#adam_m", ids, 8, rows, sizeof rows - 4,
                            NULL), GKV_ESHAPE, "fresh#adam_m");
        ids[0] = LO + N + 5;
        BAD(gkv_tensor_push(s, "fresh#adam_v", ids, 8, rows, sizeof rows,
                            NULL), GKV_ERANGE, "fresh#adam_v");
        ids[0] = LO;
        BAD(gkv_tensor_write(s, "fresh#adagrad_s", LO, LO + 9, rows,
                             sizeof rows), GKV_ESHAPE, "fresh#adagrad_s");
        /* not optimizer state; not an optimizer with state */
        BAD(gkv_tensor_push(s, "emb#adam_x", ids, 8, rows, sizeof rows, NULL),
            GKV_EINVAL, "not optimizer state");
        BAD(gkv_tensor_push(s, "emb#", ids, 8, rows, sizeof rows, NULL),
            GKV_EINVAL, "not optimizer state");
        BAD(gkv_tensor_write(s, "#adam_m", LO, LO + 8, rows, sizeof rows),
            GKV_EINVAL, "not optimizer state");
        BAD(gkv_tensor_write(s, "emb#adam_m#adam_m", LO, LO + 8, rows,
                             sizeof rows), GKV_EINVAL, "not optimizer state");
        BAD(gkv_tensor_push(s, "emb#adam_m", ids, 8, NULL, sizeof rows, NULL),
            GKV_EINVAL, "NULL");
        /* only assign writes state; nothing else changes a '#' name */
        {
            static const char *const hs[] = {"add", "sgd", "adagrad", "adam",
                                             "mul", "nosuch"};
            for (size_t h = 0; h < sizeof hs / sizeof *hs; h++) {
                gkv_push_args pa = {hs[h], 0.05, 0, 0, 0, 0};
                BAD(gkv_tensor_push(s, "emb#adam_m", ids, 8, rows, sizeof rows,
                                    &pa), GKV_EINVAL, "optimizer state");
            }
        }
        BAD(gkv_tensor_delete(s, "emb#adam_m"), GKV_EINVAL, "'#'");
        BAD(gkv_tensor_rename(s, "emb#adam_m", "x"), GKV_EINVAL, "'#'");
        BAD(gkv_tensor_rename(s, "fresh", "fresh2#adam_m"), GKV_EINVAL, "'#'");
        BAD(gkv_tensor_create(s, "fresh#adam_m", &sp), GKV_EINVAL, "'#'");
        BAD(gkv_tensor_create(s, "emb#adam_m", &sp), GKV_EINVAL, "'#'");
        BAD(gkv_writeback_start(s, "emb#adam_m", 0), GKV_EINVAL, "'#'");
        /* resets */
        BAD(gkv_opt_reset(s, "emb", "sgd"), GKV_EINVAL, "sgd");
        BAD(gkv_opt_reset(s, "emb", "adamw"), GKV_EINVAL, "adamw");
        BAD(gkv_opt_reset(s, "nope", NULL), GKV_ENOTFOUND, "'nope'");
        BAD(gkv_opt_reset(s, "emb#adam_m", NULL), GKV_EINVAL, "'#'");
#undef BAD
        /* nothing changed, in RAM or in the store, and nothing was made */
        assert_int_equal(ntensors(s), nt);
        assert_int_equal(gkv_tensor_info(s, NULL, "fresh#adam_m", &d),
                         GKV_ENOTFOUND);
        assert_int_equal(gkv_tensor_info(s, NULL, "nope", &d), GKV_ENOTFOUND);
        r1 = fam_get(s, NULL, "emb");
        s1 = fam_stored(s, "emb");
        fam_same(&r1, &r0, "the view after the bad calls");
        fam_same(&s1, &s0, "the store after the bad calls");
        fam_free(&r1);
        fam_free(&s1);
        if (wb) {
            GKVT_OK(gkv_writeback_flush(s));
            r1 = fam_stored(s, "emb");
            fam_same(&r1, &r0, "the store after a flush");
            fam_free(&r1);
        }
        /* and the good write of the same rows works */
        GKVT_OK(gkv_tensor_push(s, "emb#adam_t", ids, 8, steps, sizeof steps,
                                NULL));
        GKVT_OK(gkv_tensor_push(s, "fresh#adam_t", ids, 0, NULL, 0, NULL));
        assert_int_equal(gkv_tensor_info(s, NULL, "fresh#adam_t", &d),
                         GKV_ENOTFOUND);    /* no rows: nothing created */
        {
            int64_t got[8];
            GKVT_OK(gkv_tensor_pull(s, NULL, "emb#adam_t", ids, 8, got,
                                    sizeof got));
            assert_memory_equal(got, steps, sizeof got);
        }
        fam_free(&r0);
        fam_free(&s0);
        GKVT_OK(gkv_store_verify(s, NULL, NULL));
        gkv_store_close(s);
    }
    gkvt_rmtree(dir);
}

/* A store opened read-only refuses restores and resets. */
static void
test_rdonly_refuses(void **state)
{
    char *dir = gkvt_mkdtemp("optro");
    gkv_tensor_spec sp = spec(GKV_F32);
    uint64_t id = LO;
    float row[W] = {0};
    char p[512];
    gkv_store *s;

    (void)state;
    s = open_store(dir, "s");
    GKVT_OK(gkv_tensor_create(s, "emb", &sp));
    rounds(s, "emb", "adam", GKV_F32, 1, 1);
    gkv_store_close(s);
    snprintf(p, sizeof p, "%s/s", dir);
    GKVT_OK(gkv_store_open(&s, p, GKV_RDONLY, NULL));
    assert_int_equal(gkv_tensor_push(s, "emb#adam_m", &id, 1, row, sizeof row,
                                     NULL), GKV_ERDONLY);
    assert_int_equal(gkv_opt_reset(s, "emb", NULL), GKV_ERDONLY);
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* gkv_opt_state_info: a companion not created yet is described as the
 * first push will create it (and then is, field for field); bad names,
 * a missing tensor and an integer one are refused, named. */
static void
test_state_info(void **state)
{
    static const struct { const char *suf; gkv_dtype dt; unsigned ndim; } want[4] = {
        {"#adagrad_s", GKV_F64, 1}, {"#adam_m", GKV_F64, 1},
        {"#adam_v", GKV_F64, 1}, {"#adam_t", GKV_I64, 0},
    };
    char *dir = gkvt_mkdtemp("optinfo");
    gkv_tensor_spec sp = spec(GKV_F64), ip = spec(GKV_I32);
    gkv_tensor_desc d, e, before[4];
    char name[4][64];
    gkv_store *s;
    int exists;

    (void)state;
    s = open_store(dir, "s");
    GKVT_OK(gkv_tensor_create(s, "emb", &sp));
    GKVT_OK(gkv_tensor_create(s, "cnt", &ip));
    for (int i = 0; i < 4; i++) {
        snprintf(name[i], sizeof name[i], "emb%s", want[i].suf);
        exists = -1;
        GKVT_OK(gkv_opt_state_info(s, NULL, name[i], &before[i], &exists));
        assert_int_equal(exists, 0);
        assert_string_equal(before[i].name, name[i]);
        assert_int_equal(before[i].dtype, want[i].dt);
        assert_int_equal(before[i].ndim, want[i].ndim);
        assert_int_equal(before[i].row_bytes, want[i].ndim ? 8 * W : 8);
        assert_int_equal(before[i].lo, LO);
        assert_int_equal(before[i].hi, LO + N);
        assert_int_equal(before[i].id, 0);
        assert_true(before[i].is_state);
    }
    /* pushes create them; then the stored description equals the one
     * given before, but its id */
    rounds(s, "emb", "adagrad", GKV_F64, 1, 1);
    rounds(s, "emb", "adam", GKV_F64, 2, 1);
    for (int i = 0; i < 4; i++) {
        GKVT_OK(gkv_opt_state_info(s, NULL, name[i], &d, &exists));
        assert_int_equal(exists, 1);
        GKVT_OK(gkv_tensor_info(s, NULL, name[i], &e));
        assert_memory_equal(&d, &e, sizeof d);
        assert_int_not_equal(d.id, 0);
        before[i].id = d.id;
        assert_memory_equal(&before[i], &d, sizeof d);
    }
    assert_int_equal(gkv_opt_state_info(s, NULL, "emb#adam_x", &d, &exists),
                     GKV_EINVAL);
    assert_non_null(strstr(gkv_store_errmsg(s), "not optimizer state"));
    assert_int_equal(gkv_opt_state_info(s, NULL, "emb", &d, &exists),
                     GKV_EINVAL);
    assert_int_equal(gkv_opt_state_info(s, NULL, "nope#adam_m", &d, &exists),
                     GKV_ENOTFOUND);
    assert_non_null(strstr(gkv_store_errmsg(s), "no tensor 'nope'"));
    assert_int_equal(gkv_opt_state_info(s, NULL, "cnt#adam_m", &d, &exists),
                     GKV_EINVAL);
    assert_non_null(strstr(gkv_store_errmsg(s), "floating"));
    gkv_store_close(s);
    gkvt_rmtree(dir);
}


/* ---- step counts at the top of int64 -----------------------------------
 * A restore accepted a step count of INT64_MAX (only t >= 0 was checked);
 * the next adam push did t++ on it: signed overflow, and the stored count
 * became INT64_MIN, which a restore of that checkpoint then refused.
 * Fixed: a restore refuses INT64_MAX, and an adam push refuses a row whose
 * count is INT64_MAX - 1 (its step would store INT64_MAX), changing
 * nothing; so every count in the store can be restored and stepped. */
static void
test_step_count_max(void **state)
{
    char *dir = gkvt_mkdtemp("optmax");

    (void)state;
    for (int wb = 0; wb < 2; wb++) {
        gkv_tensor_spec sp = spec(GKV_F32);
        uint64_t ids[2] = {LO + 7, LO + 8}, id9 = LO + 9;
        int64_t big[2] = {INT64_MAX - 2, INT64_MAX}, back[2];
        float g[2 * W];
        gkv_push_args adam = {"adam", 0, 0, 0, 0, 0};
        gkv_tensor_desc d;
        struct fam r0, r1, s0, s1;
        gkv_store *s;
        char sub[32];
        gkv_err rc;

        for (int i = 0; i < 2 * W; i++)
            g[i] = 0.5f;
        snprintf(sub, sizeof sub, "s%d", wb);
        s = open_store(dir, sub);
        GKVT_OK(gkv_tensor_create(s, "emb", &sp));
        if (wb)
            GKVT_OK(gkv_writeback_start(s, "emb", 100000));
        /* INT64_MAX: refused, by push and by range write, naming it */
        rc = gkv_tensor_push(s, "emb#adam_t", ids, 2, big, sizeof big, NULL);
        assert_int_equal(rc, GKV_EINVAL);
        assert_non_null(strstr(gkv_store_errmsg(s), "9223372036854775807"));
        {   /* the row of ids[1] */
            char want[48];
            snprintf(want, sizeof want, "row of ID %llu holds",
                     (unsigned long long)ids[1]);
            assert_non_null(strstr(gkv_store_errmsg(s), want));
        }
        assert_int_equal(gkv_tensor_write(s, "emb#adam_t", LO + 7, LO + 9, big,
                                          sizeof big), GKV_EINVAL);
        assert_non_null(strstr(gkv_store_errmsg(s), "emb#adam_t"));
        assert_int_equal(gkv_tensor_info(s, NULL, "emb#adam_t", &d),
                         GKV_ENOTFOUND);
        /* INT64_MAX - 2 steps once to INT64_MAX - 1 ... */
        big[1] = INT64_MAX - 1;
        GKVT_OK(gkv_tensor_push(s, "emb#adam_t", ids, 2, big, sizeof big, NULL));
        GKVT_OK(gkv_tensor_push(s, "emb", ids, 1, g, W * 4, &adam));
        GKVT_OK(gkv_tensor_pull(s, NULL, "emb#adam_t", ids, 2, back,
                                sizeof back));
        assert_int_equal(back[0], INT64_MAX - 1);
        assert_int_equal(back[1], INT64_MAX - 1);
        /* ... which restores (the checkpoint of it is good) */
        GKVT_OK(gkv_tensor_push(s, "emb#adam_t", ids, 2, back, sizeof back,
                                NULL));
        /* and does not step again: refused, nothing changed (the other
         * row of the push, stepped first, is not stepped either) */
        r0 = fam_get(s, NULL, "emb");
        s0 = fam_stored(s, "emb");
        {
            uint64_t two[2] = {LO + 8, LO + 6};   /* LO + 6 steps first */
            rc = gkv_tensor_push(s, "emb", two, 2, g, sizeof g, &adam);
        }
        assert_int_equal(rc, GKV_EINVAL);
        assert_non_null(strstr(gkv_store_errmsg(s), "step count"));
        r1 = fam_get(s, NULL, "emb");
        s1 = fam_stored(s, "emb");
        fam_same(&r1, &r0, "after a refused adam push");
        fam_same(&s1, &s0, "the store after a refused adam push");
        fam_free(&r0);
        fam_free(&r1);
        fam_free(&s0);
        fam_free(&s1);
        /* other rows step as usual */
        GKVT_OK(gkv_tensor_push(s, "emb", &id9, 1, g, W * 4, &adam));
        GKVT_OK(gkv_tensor_pull(s, NULL, "emb#adam_t", &id9, 1, back, 8));
        assert_int_equal(back[0], 1);
        if (wb)
            GKVT_OK(gkv_writeback_stop(s, "emb"));
        GKVT_OK(gkv_store_verify(s, NULL, NULL));
        gkv_store_close(s);
    }
    gkvt_rmtree(dir);
}

/* ---- companions that do not belong to their tensor ----------------------
 * A catalog record "emb#adam_m" with other rows than emb's state has (here
 * moved there from another tensor with raw LMDB: what a leftover companion
 * under a recreated tensor looks like). A direct adam push used it as it
 * was, and wrote past its state buffer (rows of W floats into rows of 1);
 * gkv_writeback_start loaded it beside emb. Fixed: both refuse it with
 * GKV_ECORRUPT naming it, and gkv_opt_reset drops it. */

/* Raw LMDB on a closed store: the catalog record 'from' moves to 'to'. */
static void
cat_move(const char *dir, const char *from, const char *to)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val k = {strlen(from), (void *)from}, k2 = {strlen(to), (void *)to}, d;
    unsigned char rec[512];

    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 4), 0);
    assert_int_equal(mdb_env_open(env, dir, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "catalog", 0, &dbi), 0);
    assert_int_equal(mdb_get(txn, dbi, &k, &d), 0);
    assert_true(d.mv_size <= sizeof rec);
    memcpy(rec, d.mv_data, d.mv_size);
    d.mv_data = rec;
    assert_int_equal(mdb_put(txn, dbi, &k2, &d, MDB_NOOVERWRITE), 0);
    assert_int_equal(mdb_del(txn, dbi, &k, NULL), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

static void
test_foreign_companion_refused(void **state)
{
    char *dir = gkvt_mkdtemp("optforeign");
    char path[512];
    gkv_tensor_spec sp = spec(GKV_F32), one = spec(GKV_F32);
    uint64_t ids[3] = {LO, LO + 1, LO + N - 1};
    float g[3 * W];
    gkv_push_args adam = {"adam", 0, 0, 0, 0, 0};
    struct fam f0, f1;
    gkv_store *s;
    gkv_err rc;

    (void)state;
    for (int i = 0; i < 3 * W; i++)
        g[i] = 1;
    one.shape[0] = 1;
    snprintf(path, sizeof path, "%s/s", dir);
    s = open_store(dir, "s");
    GKVT_OK(gkv_tensor_create(s, "emb", &sp));
    GKVT_OK(gkv_tensor_create(s, "x", &one));
    GKVT_OK(gkv_tensor_push(s, "x", ids, 3, g, 3 * 4, &adam));
    gkv_store_close(s);
    cat_move(path, "x#adam_m", "emb#adam_m");
    s = open_store(dir, "s");
    f0 = fam_stored(s, "emb");
    /* a direct adam push: refused, nothing changed */
    rc = gkv_tensor_push(s, "emb", ids, 3, g, sizeof g, &adam);
    if (rc != GKV_ECORRUPT)
        fail_msg("adam push with a foreign 'emb#adam_m': %s (%s)",
                 gkv_err_name(rc), gkv_store_errmsg(s));
    assert_non_null(strstr(gkv_store_errmsg(s), "emb#adam_m"));
    f1 = fam_stored(s, "emb");
    fam_same(&f1, &f0, "after the refused push");
    fam_free(&f1);
    /* write-back start: refused, not in write-back mode */
    rc = gkv_writeback_start(s, "emb", 100000);
    if (rc != GKV_ECORRUPT)
        fail_msg("write-back start with a foreign 'emb#adam_m': %s (%s)",
                 gkv_err_name(rc), gkv_store_errmsg(s));
    assert_non_null(strstr(gkv_store_errmsg(s), "emb#adam_m"));
    assert_int_equal(gkv_writeback_stop(s, "emb"), GKV_ENOTFOUND);
    /* a restore into it: refused too */
    assert_int_equal(gkv_tensor_push(s, "emb#adam_m", ids, 1, g, W * 4, NULL),
                     GKV_ECORRUPT);
    /* the reset drops it; then all works */
    GKVT_OK(gkv_opt_reset(s, "emb", "adam"));
    GKVT_OK(gkv_tensor_push(s, "emb", ids, 3, g, sizeof g, &adam));
    GKVT_OK(gkv_writeback_start(s, "emb", 100000));
    GKVT_OK(gkv_tensor_push(s, "emb", ids, 3, g, sizeof g, &adam));
    GKVT_OK(gkv_writeback_stop(s, "emb"));
    fam_free(&f0);
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* ---- delete and rename meet a damaged catalog page ----------------------
 * family() (kv/tensor.c) collects a tensor and its companions with a
 * cursor; it ended the walk on any cursor error as if the names had run
 * out, and returned GKV_OK with part of the family. LMDB marks its
 * transaction failed then, so the delete still failed, but as GKV_EIO
 * from the next call ("transaction must abort") instead of the damage.
 * Fixed: the cursor's error is returned, GKV_ECORRUPT, naming the catalog.
 * The damage: with raw LMDB, the leaf page holding t's companions (and
 * not t) gets page flags that are neither leaf nor branch. */

#define FILL 120   /* tensors "t!NNN", between "t" and "t#..." in key order */

/* The number of the page a key returned by LMDB lies in: pages are
 * page-aligned in the map and begin with their number (MDB_page.mp_pgno). */
static size_t
page_no(const MDB_val *k, size_t psize)
{
    uint64_t pg;

    memcpy(&pg, (const void *)((uintptr_t)k->mv_data & ~(uintptr_t)(psize - 1)),
           8);
    return (size_t)pg;
}

/* Page number of catalog key 'name', and of the key before it. */
static void
key_pages(MDB_env *env, MDB_txn *txn, MDB_dbi dbi, const char *name,
          size_t *pg, size_t *prev_pg)
{
    MDB_stat st;
    MDB_cursor *cur;
    MDB_val k = {strlen(name), (void *)name}, d;

    assert_int_equal(mdb_env_stat(env, &st), 0);
    assert_int_equal(mdb_cursor_open(txn, dbi, &cur), 0);
    assert_int_equal(mdb_cursor_get(cur, &k, &d, MDB_SET_KEY), 0);
    *pg = page_no(&k, st.ms_psize);
    if (prev_pg != NULL) {
        assert_int_equal(mdb_cursor_get(cur, &k, &d, MDB_PREV), 0);
        *prev_pg = page_no(&k, st.ms_psize);
    }
    mdb_cursor_close(cur);
}

/* Sets the flags of page 'pg' of the store in 'dir' to 'flags'; returns
 * the old flags. */
static unsigned
page_flags_set(const char *dir, size_t pg, size_t psize, unsigned flags)
{
    char file[600];
    uint16_t old, nf = (uint16_t)flags;
    int fd;

    snprintf(file, sizeof file, "%s/data.mdb", dir);
    assert_true((fd = open(file, O_RDWR)) >= 0);
    /* MDB_page: pgno (8 bytes), pad (2), flags (2) */
    assert_int_equal(pread(fd, &old, 2, (off_t)(pg * psize + 10)), 2);
    assert_int_equal(pwrite(fd, &nf, 2, (off_t)(pg * psize + 10)), 2);
    close(fd);
    return old;
}

/* The catalog page holding t's first companion (which must not hold t),
 * and the page size. */
static void
companion_page(const char *dir, size_t *pg, size_t *psize)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_stat st;
    size_t pt, pc, prev;

    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 4), 0);
    assert_int_equal(mdb_env_open(env, dir, MDB_RDONLY, 0644), 0);
    assert_int_equal(mdb_env_stat(env, &st), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "catalog", 0, &dbi), 0);
    key_pages(env, txn, dbi, "t", &pt, NULL);
    key_pages(env, txn, dbi, "t#adagrad_s", &pc, &prev);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    /* the walk for "t#" lands on that page (a key before it is there
     * too), and t itself is elsewhere */
    if (pt == pc || prev != pc)
        fail_msg("catalog layout: t on page %zu, t#adagrad_s on %zu, the "
                 "key before it on %zu; change FILL", pt, pc, prev);
    *pg = pc;
    *psize = st.ms_psize;
}

/* Store DIR/s (its path in 'path') with tensor "t", its adagrad state
 * (and adam's with 'adam'), and FILL one-row tensors after them, closed;
 * *pg: the catalog page holding t's companions (companion_page). */
static void
family_store(const char *dir, char path[512], int adam, size_t *pg,
             size_t *psize)
{
    gkv_tensor_spec sp = spec(GKV_F32), tiny = spec(GKV_F32);
    uint64_t id = LO;
    float g[W] = {1, 1, 1, 1, 1, 1};
    gkv_store *s;

    tiny.init = GKV_INIT_ZEROS;
    tiny.hi = LO + 1;
    snprintf(path, 512, "%s/s", dir);
    s = open_store(dir, "s");
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    if (adam)
        GKVT_OK(gkv_tensor_push(s, "t", &id, 1, g, sizeof g,
                                &(gkv_push_args){"adam", 0, 0, 0, 0, 0}));
    GKVT_OK(gkv_tensor_push(s, "t", &id, 1, g, sizeof g,
                            &(gkv_push_args){"adagrad", 0, 0, 0, 0, 0}));
    for (int i = 0; i < FILL; i++) {
        char n[32];
        snprintf(n, sizeof n, "t!%03d", i);
        GKVT_OK(gkv_tensor_create(s, n, &tiny));
    }
    gkv_store_close(s);
    companion_page(path, pg, psize);
}

static void
test_family_cursor_error(void **state)
{
    char *dir = gkvt_mkdtemp("optfam");
    char path[512];
    gkv_tensor_desc d;
    gkv_store *s;
    size_t pg, psize;
    unsigned old;
    gkv_err rc;

    (void)state;
    family_store(dir, path, 1, &pg, &psize);
    old = page_flags_set(path, pg, psize, 0);
    assert_int_equal(old, 0x02);   /* P_LEAF */
    GKVT_OK(gkv_store_open(&s, path, GKV_NOSYNC | GKV_NOCHECK, NULL));
    GKVT_OK(gkv_tensor_info(s, NULL, "t", &d));
    rc = gkv_tensor_delete(s, "t");
    if (rc != GKV_ECORRUPT)
        fail_msg("delete of t over a damaged catalog page: %s (%s)",
                 gkv_err_name(rc), gkv_store_errmsg(s));
    assert_non_null(strstr(gkv_store_errmsg(s), "catalog"));
    rc = gkv_tensor_rename(s, "t", "u");
    if (rc != GKV_ECORRUPT)
        fail_msg("rename of t over a damaged catalog page: %s (%s)",
                 gkv_err_name(rc), gkv_store_errmsg(s));
    gkv_store_close(s);
    /* repaired: nothing was deleted or renamed */
    assert_int_equal(page_flags_set(path, pg, psize, old), 0);
    s = open_store(dir, "s");
    for (int i = 0; i < 5; i++) {
        char n[64];
        snprintf(n, sizeof n, "t%s", fam_suf[i]);
        GKVT_OK(gkv_tensor_info(s, NULL, n, &d));
    }
    assert_int_equal(gkv_tensor_info(s, NULL, "u", &d), GKV_ENOTFOUND);
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    GKVT_OK(gkv_tensor_delete(s, "t"));
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    gkvt_rmtree(dir);
}


/* Points every branch node of the store's file that
 * leads to page 'pg' at a page past the file's end; returns how many. */
static int
branch_refs_break(const char *dir, size_t pg, size_t psize)
{
    char file[600];
    unsigned char *b = malloc(psize);
    off_t end;
    int fd, n = 0;

    snprintf(file, sizeof file, "%s/data.mdb", dir);
    assert_true((fd = open(file, O_RDWR)) >= 0);
    end = lseek(fd, 0, SEEK_END);
    for (off_t off = 2 * (off_t)psize; off + (off_t)psize <= end; off += (off_t)psize) {
        uint16_t flags, lower;
        assert_int_equal(pread(fd, b, psize, off), (ssize_t)psize);
        memcpy(&flags, b + 10, 2);
        memcpy(&lower, b + 12, 2);
        if (flags != 0x01 || lower < 16 || lower > psize)
            continue;
        for (unsigned i = 0; i < (lower - 16u) / 2; i++) {
            uint16_t ptr, lo, hi, fl;
            memcpy(&ptr, b + 16 + 2 * i, 2);
            if (ptr + 8u > psize)
                continue;
            memcpy(&lo, b + ptr, 2);
            memcpy(&hi, b + ptr + 2, 2);
            memcpy(&fl, b + ptr + 4, 2);
            if (((uint64_t)lo | (uint64_t)hi << 16 | (uint64_t)fl << 32) == pg) {
                memset(b + ptr, 0xff, 6);
                assert_int_equal(pwrite(fd, b, psize, off), (ssize_t)psize);
                n++;
            }
        }
    }
    close(fd);
    free(b);
    return n;
}

/* gkv_store_stat_get over a damaged catalog page reports the cursor error
 * (GKV_ECORRUPT naming the catalog), not short counts as OK; the repaired
 * file counts every tensor again. */
static void
test_stat_catalog_cursor_error(void **state)
{
    char *dir = gkvt_mkdtemp("optstat");
    char path[512];
    gkv_store_stat st;
    gkv_store *s;
    size_t pg, psize;
    gkv_err rc;

    (void)state;
    family_store(dir, path, 0, &pg, &psize);
    {   /* keep a copy to repair from */
        char cmd[1400];
        snprintf(cmd, sizeof cmd, "cp %s/data.mdb %s/data.bak", path, path);
        assert_int_equal(system(cmd), 0);
    }
    assert_true(branch_refs_break(path, pg, psize) > 0);
    GKVT_OK(gkv_store_open(&s, path, GKV_NOSYNC | GKV_NOCHECK, NULL));
    rc = gkv_store_stat_get(s, &st);
    if (rc != GKV_ECORRUPT)
        fail_msg("stat over a damaged catalog page: %s (%s), %llu tensors",
                 gkv_err_name(rc), gkv_store_errmsg(s),
                 (unsigned long long)st.ntensors);
    assert_non_null(strstr(gkv_store_errmsg(s), "catalog"));
    gkv_store_close(s);
    {
        char cmd[1400];
        snprintf(cmd, sizeof cmd, "cp %s/data.bak %s/data.mdb", path, path);
        assert_int_equal(system(cmd), 0);
    }
    s = open_store(dir, "s");
    GKVT_OK(gkv_store_stat_get(s, &st));
    assert_int_equal(st.ntensors, FILL + 1);
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* The f32 state of an f16 tensor has twice its bytes: with chunks over
 * half the chunk limit, or rows over half the row limit, no companion can
 * exist. The push and gkv_opt_state_info say so, naming the tensor (the
 * error named a companion the caller never made, and state_info promised
 * one); nothing changes. An f32 tensor of the same chunks pushes. */
static void
test_state_over_limits(void **state)
{
    char *dir = gkvt_mkdtemp("optlim");
    gkv_tensor_spec sp = {0};
    gkv_push_args adam = {"adam", 0, 0, 0, 0, 0};
    uint16_t g[512], before[512], after[512];
    uint64_t id = 3;
    gkv_tensor_desc d;
    gkv_store *s;
    int ex;

    (void)state;
    s = open_store(dir, "s");
    sp.dtype = GKV_F16;
    sp.ndim = 1;
    sp.shape[0] = 512;                       /* 1 KiB rows */
    sp.lo = 0;
    sp.hi = 10;
    sp.chunk_rows = 200000;                  /* 195 MiB of f16, 390 of f32 */
    GKVT_OK(gkv_tensor_create(s, "h", &sp));
    for (int i = 0; i < 512; i++)
        g[i] = gkv_f32_to_f16(0.5f);
    GKVT_OK(gkv_tensor_pull(s, NULL, "h", &id, 1, before, sizeof before));
    assert_int_equal(gkv_tensor_push(s, "h", &id, 1, g, sizeof g, &adam),
                     GKV_EINVAL);
    if (strstr(gkv_store_errmsg(s), "tensor 'h' cannot have optimizer state "
               "'h#adam_m'") == NULL ||
        strstr(gkv_store_errmsg(s), "fewer rows per chunk") == NULL)
        fail_msg("message: %s", gkv_store_errmsg(s));
    assert_int_equal(gkv_opt_state_info(s, NULL, "h#adagrad_s", &d, &ex),
                     GKV_EINVAL);
    assert_int_equal(ex, 0);
    assert_non_null(strstr(gkv_store_errmsg(s), "cannot have optimizer state"));
    GKVT_OK(gkv_tensor_pull(s, NULL, "h", &id, 1, after, sizeof after));
    assert_memory_equal(before, after, sizeof after);
    assert_int_equal(gkv_tensor_info(s, NULL, "h#adam_m", &d), GKV_ENOTFOUND);
    /* f32 rows of the same chunking: the state fits */
    sp.dtype = GKV_F32;
    sp.chunk_rows = 100000;
    GKVT_OK(gkv_tensor_create(s, "f", &sp));
    {
        float gf[512];
        for (int i = 0; i < 512; i++)
            gf[i] = 0.5f;
        GKVT_OK(gkv_tensor_push(s, "f", &id, 1, gf, sizeof gf, &adam));
    }
    GKVT_OK(gkv_opt_state_info(s, NULL, "f#adam_t", &d, &ex));
    assert_int_equal(ex, 1);
    {   /* a restore of a first moment below 0, a second moment of -0 */
        float m[512], v[512], back[512];
        for (int i = 0; i < 512; i++) {
            m[i] = -0.5f;
            v[i] = -0.0f;
        }
        GKVT_OK(gkv_tensor_push(s, "f#adam_m", &id, 1, m, sizeof m, NULL));
        GKVT_OK(gkv_tensor_push(s, "f#adam_v", &id, 1, v, sizeof v, NULL));
        GKVT_OK(gkv_tensor_pull(s, NULL, "f#adam_m", &id, 1, back, sizeof back));
        assert_memory_equal(back, m, sizeof m);
    }
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_over_limits),
        cmocka_unit_test(test_restore_plain),
        cmocka_unit_test(test_restore_writeback),
        cmocka_unit_test(test_restore_during_flush),
        cmocka_unit_test(test_reset_then_fresh_adam),
        cmocka_unit_test(test_reset_one_optimizer),
        cmocka_unit_test(test_duplicate_ids_sum_gradients),
        cmocka_unit_test(test_bad_input_changes_nothing),
        cmocka_unit_test(test_rdonly_refuses),
        cmocka_unit_test(test_state_info),
        cmocka_unit_test(test_step_count_max),
        cmocka_unit_test(test_foreign_companion_refused),
        cmocka_unit_test(test_family_cursor_error),
        cmocka_unit_test(test_stat_catalog_cursor_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
