/* kv_wb_rows_test.c - a push during a flush saves the rows it changes, not
 * their chunks (kv/wb.c, kv__mirror_touch): the flush still writes every
 * chunk as it was when the flush began, the next flush writes what the
 * pushes made, and a chunk whose rows were saved is saved whole once its
 * saved rows would take more than the chunk (or a range write changes it).
 *
 * The reference is the tensor's own RAM copy: read (no snapshot) at the
 * push boundary the flush begins at, and again after the pushes; the store
 * must hold the first after the flush, the second after the next one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkvt.h"
#include "gkvt_wb.h"
#include "kv/kv_test.h"     /* kv__wb_flush_hook */

#define LO  100u
#define N   4000u          /* rows */
#define W   16u            /* f32 per row: 64-byte rows */
#define CR  50u            /* rows per chunk: 80 chunks */

static const char *const names[] = {"t", "t#adagrad_s"};

static struct {
    gkv_store *s;
    void (*ops)(gkv_store *s);
    int calls;
} hk;

static void
hook(gkv_store *s)
{
    if (s != hk.s)
        return;
    hk.calls++;
    hk.ops(s);
}

static void
push(gkv_store *s, const char *h, const uint64_t *ids, size_t n, float v)
{
    gkv_push_args pa = {h, 0.05, 0, 0, 0, 0};
    float *rows = malloc(n * W * sizeof *rows);

    assert_non_null(rows);
    for (size_t i = 0; i < n * W; i++)
        rows[i] = v + (float)(i % 29) * 0.125f;
    GKVT_OK(gkv_tensor_push(s, "t", ids, n, rows, n * W * sizeof *rows, &pa));
    free(rows);
}

/* Inside the flush: a few rows of some chunks, pushed more than once (the
 * first save must be kept), with duplicates, in no order. */
static void
ops_few(gkv_store *s)
{
    static const uint64_t a[] = {LO + 7, LO + 3 * CR + 1, LO + 7, LO + N - 1,
                                 LO + 2 * CR + 49, LO + 2 * CR};
    static const uint64_t b[] = {LO + 2 * CR + 49, LO + 8, LO + 7};

    push(s, "adagrad", a, sizeof a / sizeof *a, 0.5f);
    push(s, "assign", b, sizeof b / sizeof *b, -2.0f);
    push(s, "adagrad", a, sizeof a / sizeof *a, 1.5f);
}

/* Inside the flush: every row of chunk 5 over several pushes (their saved
 * rows outgrow the chunk: saved whole), then a range write over rows of
 * chunk 9 some of which a push saved first. */
static void
ops_many(gkv_store *s)
{
    uint64_t ids[CR];
    float rows[12 * W];

    for (size_t part = 0; part < 5; part++) {
        for (size_t i = 0; i < CR / 5; i++)
            ids[i] = LO + 5 * CR + part + 5 * i;
        push(s, "adagrad", ids, CR / 5, (float)part);
    }
    for (size_t i = 0; i < 4; i++)
        ids[i] = LO + 9 * CR + 3 * i;
    push(s, "adagrad", ids, 4, 3.0f);
    for (size_t i = 0; i < 12 * W; i++)
        rows[i] = (float)i;
    GKVT_OK(gkv_tensor_write(s, "t", LO + 9 * CR + 4, LO + 9 * CR + 16, rows,
                             sizeof rows));
    push(s, "adagrad", ids, 4, -1.0f);
}

/* Tensor and state: the store (a snapshot) against copies want[]. */
static void
store_equal(gkv_store *s, unsigned char *const want[2], const size_t len[2],
            const char *what)
{
    gkv_txn *tx;

    GKVT_OK(gkv_txn_begin(s, &tx));
    for (int i = 0; i < 2; i++) {
        size_t lg = 0;
        unsigned char *g = gkvt_tensor_dump(s, tx, names[i], &lg);

        assert_non_null(g);
        assert_int_equal(lg, len[i]);
        if (memcmp(g, want[i], lg) != 0) {
            size_t k = 0;
            while (g[k] == want[i][k])
                k++;
            fail_msg("%s: '%s' in the store differs at byte %zu (row %zu)",
                     what, names[i], k, k / (W * 4));
        }
        free(g);
    }
    gkv_txn_end(tx);
}

static void
mirrors(gkv_store *s, unsigned char *out[2], size_t len[2])
{
    for (int i = 0; i < 2; i++) {
        out[i] = gkvt_tensor_dump(s, NULL, names[i], &len[i]);
        assert_non_null(out[i]);
    }
}

static void
run_case(void (*ops)(gkv_store *s), const char *what)
{
    char *dir = gkvt_mkdtemp("wbrows");
    gkv_store *s;
    gkv_tensor_spec sp = gkvt_wb_spec(N, W, 0);
    unsigned char *before[2], *after[2];
    size_t lb[2], la[2];
    uint64_t all[N / 2];

    sp.chunk_rows = CR;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_writeback_start(s, "t", 100000));   /* flushes when asked */
    /* every chunk of the tensor and of its state dirty */
    for (size_t i = 0; i < N / 2; i++)
        all[i] = LO + 2 * i + (i % 3 == 0);
    push(s, "adagrad", all, N / 2, 0.25f);
    mirrors(s, before, lb);

    hk.s = s;
    hk.ops = ops;
    hk.calls = 0;
    kv__wb_flush_hook = hook;
    GKVT_OK(gkv_writeback_flush(s));
    kv__wb_flush_hook = NULL;
    assert_int_equal(hk.calls, 1);
    store_equal(s, before, lb, what);          /* at the boundary */
    GKVT_OK(gkv_store_verify(s, NULL, NULL));

    mirrors(s, after, la);
    assert_memory_not_equal(before[0], after[0], lb[0]);
    GKVT_OK(gkv_writeback_flush(s));            /* the saved chunks again */
    store_equal(s, after, la, what);
    GKVT_OK(gkv_writeback_stop(s, "t"));
    store_equal(s, after, la, what);
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    for (int i = 0; i < 2; i++) {
        free(before[i]);
        free(after[i]);
    }
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

static void
test_wb_rows_few(void **state)
{
    (void)state;
    run_case(ops_few, "a few rows pushed twice inside a flush");
}

static void
test_wb_rows_whole(void **state)
{
    (void)state;
    run_case(ops_many, "a chunk's every row, and a range write, inside a flush");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wb_rows_few),
        cmocka_unit_test(test_wb_rows_whole),
    };
    return cmocka_run_group_tests_name("kv_wb_rows", tests, NULL, NULL);
}
