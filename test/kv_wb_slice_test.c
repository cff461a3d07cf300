/* kv_wb_slice_test.c - writes in slices (kv__slice_begin): a write-back
 * flush and a direct push run as nested LMDB transactions of a few chunks
 * each inside their one transaction. The bytes they leave are the same for
 * every slice size (none, 1, 3, 7 chunks, the default); a slice that finds
 * LMDB's dirty list full runs its chunks again in the parent, and a chunk
 * that finds it full in the parent runs the whole write again unsliced;
 * writes of more pages than the list holds run in slices to the end; and
 * a flush writes about the pages of the chunks its dirty rows are in, not
 * the tensor (the system calls that write data.mdb counted). Crash safety with
 * slices: kv_wb_test.c (test_wb_crash_sliced) and kv_crash_test.c
 * (test_kill_during_writes_sliced). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include "gkvt.h"
#include "gkvt_wb.h"
#include "kv/kv_test.h"     /* kv__wb_slice, kv__push_slice, kv__slice_full_at */

#define N  3000     /* rows, IDs [100, 100 + N) */
#define W  64       /* f32: 256-byte rows, 15 to a HOT chunk: 200 chunks */
#define B  400      /* IDs per push */

/* ---- the same bytes for every slice size ------------------------------------ */

/* The store's rows and Adagrad state of "t" (through a snapshot: what the
 * file holds), malloc'd, 2 x N x W floats. */
static float *
store_bytes(gkv_store *s)
{
    float *out = malloc(2 * N * W * sizeof *out), *st;
    gkv_txn *tx;

    assert_non_null(out);
    GKVT_OK(gkv_txn_begin(s, &tx));
    st = gkvt_wb_rows(s, tx, "t", N, W);
    memcpy(out, st, N * W * sizeof *out);
    free(st);
    GKVT_OK(gkv_tensor_read(s, tx, "t#adagrad_s", 100, 100 + N, out + N * W,
                            N * W * sizeof *out));
    gkv_txn_end(tx);
    return out;
}

/* Direct pushes (assign, adagrad, add), then write-back pushes and
 * flushes, with slices of 'slice' chunks for both; the last push is a
 * direct assign whose rows are checked against what was pushed. Returns
 * store_bytes() of the end. */
static float *
run_sequence(size_t slice, uint64_t seed)
{
    static uint64_t ids[B];
    static float rows[B * W], got[B * W];
    const char *hs[3] = {"assign", "adagrad", "add"};
    char *dir = gkvt_mkdtemp("slice");
    gkv_tensor_spec sp = gkvt_wb_spec(N, W, GKV_TENSOR_HOT);
    uint64_t rs = seed;
    size_t old_wb = kv__wb_slice, old_push = kv__push_slice;
    float *out;
    gkv_store *s;

    kv__wb_slice = kv__push_slice = slice;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    for (int i = 0; i < 6; i++) {
        gkv_push_args pa = {hs[i % 3], 0.05, 0, 0, 0, 0};
        gkvt_rand_rows(&rs, ids, rows, B, 100, N, W);
        GKVT_OK(gkv_tensor_push(s, "t", ids, B, rows, sizeof rows, &pa));
    }
    GKVT_OK(gkv_writeback_start(s, "t", 1000000));   /* flushes when asked */
    for (int i = 0; i < 6; i++) {
        gkv_push_args pa = {hs[i % 3], 0.05, 0, 0, 0, 0};
        gkvt_rand_rows(&rs, ids, rows, B, 100, N, W);
        GKVT_OK(gkv_tensor_push(s, "t", ids, B, rows, sizeof rows, &pa));
        if (i % 2 == 1)
            GKVT_OK(gkv_writeback_flush(s));
    }
    GKVT_OK(gkv_writeback_stop(s, "t"));
    gkvt_rand_rows(&rs, ids, rows, B, 100, N, W);
    for (size_t i = 0; i < B; i++)   /* distinct IDs: the pushed row wins */
        ids[i] = 100 + (i * 7 + rs % 7) % N;
    GKVT_OK(gkv_tensor_push(s, "t", ids, B, rows, sizeof rows, NULL));
    GKVT_OK(gkv_tensor_pull(s, NULL, "t", ids, B, got, sizeof got));
    assert_memory_equal(got, rows, sizeof rows);
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    out = store_bytes(s);
    gkv_store_close(s);
    gkvt_rmtree(dir);
    kv__wb_slice = old_wb;
    kv__push_slice = old_push;
    return out;
}

static void
test_slices_same_bytes(void **state)
{
    const size_t slices[] = {1, 3, 7, 16384};
    uint64_t seed = gkvt_seed();
    float *ref = run_sequence(0, seed);

    (void)state;
    for (size_t i = 0; i < sizeof slices / sizeof *slices; i++) {
        float *got = run_sequence(slices[i], seed);
        if (memcmp(got, ref, 2 * N * W * sizeof *ref) != 0)
            fail_msg("slices of %zu chunks left other bytes than none",
                     slices[i]);
        free(got);
    }
    free(ref);
}

/* ---- a slice that finds the dirty list full ------------------------------- */

/* A step finds the dirty list full (as LMDB would with too many dirty
 * pages): the first of its slice (the 5th chunk, slices of 2) or the
 * second (the 6th), in a direct push or in a flush: the slice's chunks
 * are written again in the parent, and the write goes on in slices. When
 * a step in the parent finds it full too, the push or flush runs again,
 * unsliced. Every way the bytes are the pushed rows. */
static void
test_slice_full(void **state)
{
    static uint64_t ids[B];
    static float rows[B * W], got[B * W];
    char *dir = gkvt_mkdtemp("slicefull");
    gkv_tensor_spec sp = gkvt_wb_spec(N, W, GKV_TENSOR_HOT);
    size_t old_wb = kv__wb_slice, old_push = kv__push_slice;
    gkv_store *s;

    (void)state;
    kv__wb_slice = kv__push_slice = 2;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    for (int round = 0; round < 6; round++) {
        int wb = round % 2, at = round / 2 == 1 ? 6 : 5, again = round / 2 == 2;
        unsigned long retries = kv__slice_retries, reruns = kv__slice_reruns;

        for (size_t i = 0; i < B; i++)     /* distinct, over most chunks */
            ids[i] = 100 + (i * 7 + (uint64_t)round) % N;
        for (size_t i = 0; i < B * W; i++)
            rows[i] = (float)(i % 977) * 0.5f + (float)round;
        if (wb) {
            GKVT_OK(gkv_writeback_start(s, "t", 1000000));
            GKVT_OK(gkv_tensor_push(s, "t", ids, B, rows, sizeof rows, NULL));
        } else {
            /* a direct push adds: a chunk applied twice, or one of an
             * earlier slice run again, would show */
            GKVT_OK(gkv_tensor_pull(s, NULL, "t", ids, B, got, sizeof got));
            for (size_t i = 0; i < B * W; i++) {
                float r = rows[i];
                rows[i] = got[i] + r;       /* what the push must leave */
                got[i] = r;                 /* what it adds */
            }
        }
        kv__slice_full_at = at;
        kv__slice_full_again = again;       /* the first step in the parent */
        if (wb) {
            GKVT_OK(gkv_writeback_flush(s));
        } else {
            gkv_push_args add = {"add", 0, 0, 0, 0, 0};
            GKVT_OK(gkv_tensor_push(s, "t", ids, B, got, sizeof got, &add));
        }
        assert_int_equal(kv__slice_full_at, 0);   /* it fired */
        assert_int_equal(kv__slice_full_again, 0);
        assert_int_equal(kv__slice_retries - retries, 1);
        assert_int_equal(kv__slice_reruns - reruns, again);
        if (wb)
            GKVT_OK(gkv_writeback_stop(s, "t"));
        {   /* what the file holds */
            gkv_txn *tx;
            GKVT_OK(gkv_txn_begin(s, &tx));
            GKVT_OK(gkv_tensor_pull(s, tx, "t", ids, B, got, sizeof got));
            gkv_txn_end(tx);
        }
        assert_memory_equal(got, rows, sizeof rows);
        GKVT_OK(gkv_store_verify(s, NULL, NULL));
    }
    gkv_store_close(s);
    gkvt_rmtree(dir);
    kv__wb_slice = old_wb;
    kv__push_slice = old_push;
}

/* ---- writes past LMDB's dirty list ------------------------------------------
 * LMDB holds at most 131,072 dirty pages a transaction and spills more to
 * disk, a slice only its own. A flush and a direct push of 150,000
 * one-page chunks (more than the list holds), in slices of 1,024 chunks,
 * run to the end in slices (the parent made to spill between slices past
 * 32,768 chunks, a slice that cannot spill enough run again in the
 * parent), and nothing runs again unsliced. Before, each such write ran
 * twice, the second time as slow as without slices. */

/* The parent's room is made (slice_poke) by the chunk values the slices
 * wrote, not by their steps: an Adam push writes 4 values a chunk (the
 * row chunk and 3 state chunks), so it pokes about 4 times as often as
 * an assign of as many chunks, and its slices hold a quarter of the
 * chunks. Thresholds lowered (kv__slice_poke_start 64 values, _every
 * 32, slices of 16): each push touches all 200 chunks (800 values for
 * Adam: pokes at totals 64, 96, ... 800, i.e. 24; 200 for assign: pokes
 * at 64, 96, ... 192, i.e. 5). The rows and the Adam state are checked
 * against a push of the same rows without slices. */
static void
test_poke_counts_values(void **state)
{
    static uint64_t ids[N];
    static float rows[N * W];
    const char *hs[2] = {"assign", "adam"};
    const unsigned long want[2] = {5, 24};
    size_t old_push = kv__push_slice, old_start = kv__slice_poke_start,
           old_every = kv__slice_poke_every;
    uint64_t rs = gkvt_seed() ^ 41;
    float *ref[2] = {NULL, NULL};

    (void)state;
    for (size_t i = 0; i < N; i++) {
        ids[i] = 100 + i;
        for (size_t k = 0; k < W; k++) {
            rs = rs * 6364136223846793005ull + 1442695040888963407ull;
            rows[i * W + k] = (float)(rs >> 40) * 0x1p-24f - 0.5f;
        }
    }
    kv__slice_poke_start = 64;
    kv__slice_poke_every = 32;
    for (int sliced = 0; sliced < 2; sliced++) {
        char *dir = gkvt_mkdtemp("slicepoke");
        gkv_tensor_spec sp = gkvt_wb_spec(N, W, GKV_TENSOR_HOT);
        gkv_store *s;

        kv__push_slice = sliced ? 16 : 0;
        GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
        for (int h = 0; h < 2; h++) {
            char name[8];
            unsigned long pokes = kv__slice_pokes;
            gkv_push_args pa = {hs[h], 0.05, 0, 0, 0, 0};
            float *got = malloc(2 * (size_t)N * W * sizeof *got);
            gkv_txn *tx;

            snprintf(name, sizeof name, "t%d", h);
            GKVT_OK(gkv_tensor_create(s, name, &sp));
            GKVT_OK(gkv_tensor_push(s, name, ids, N, rows, sizeof rows,
                                    &pa));
            if (sliced && kv__slice_pokes - pokes != want[h])
                fail_msg("%s push of 200 chunks in slices of 16 values: %lu "
                         "pokes, want %lu", hs[h], kv__slice_pokes - pokes,
                         want[h]);
            if (!sliced)
                assert_int_equal(kv__slice_pokes, pokes);
            /* the rows, and for Adam its first moment */
            GKVT_OK(gkv_txn_begin(s, &tx));
            GKVT_OK(gkv_tensor_read(s, tx, name, 100, 100 + N, got,
                                    (size_t)N * W * sizeof *got));
            if (h == 1) {
                char m[32];

                snprintf(m, sizeof m, "%s#adam_m", name);
                GKVT_OK(gkv_tensor_read(s, tx, m, 100, 100 + N,
                                        got + (size_t)N * W,
                                        (size_t)N * W * sizeof *got));
            }
            gkv_txn_end(tx);
            if (h == 0)
                assert_memory_equal(got, rows, sizeof rows);
            if (h == 1 && !sliced)
                ref[1] = got;
            else if (h == 1)
                assert_memory_equal(got, ref[1], 2 * sizeof rows);
            if (got != ref[1])
                free(got);
        }
        GKVT_OK(gkv_store_verify(s, NULL, NULL));
        gkv_store_close(s);
        gkvt_rmtree(dir);
    }
    free(ref[1]);
    kv__push_slice = old_push;
    kv__slice_poke_start = old_start;
    kv__slice_poke_every = old_every;
}

static void
test_past_dirty_list(void **state)
{
    enum { BC = 150000, BW = 128 };   /* chunks; 512-byte rows, 7 a chunk */
    char *dir = gkvt_mkdtemp("slicebig");
    uint64_t *ids = malloc(BC * sizeof *ids), rs = gkvt_seed() ^ 23;
    float *rows = malloc((size_t)BC * BW * 4), *got = malloc((size_t)BC * BW * 4);
    size_t old_wb = kv__wb_slice, old_push = kv__push_slice;
    gkv_open_opts o = {.map_size = 4ull << 30};   /* no map growth */
    char p[4200];
    struct stat sb;
    gkv_store *s;

    (void)state;
    assert_non_null(ids);
    assert_non_null(rows);
    assert_non_null(got);
    kv__wb_slice = kv__push_slice = 1024;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, &o));
    for (int direct = 0; direct < 2; direct++) {
        const char *name = direct ? "d" : "e";
        gkv_tensor_spec sp = gkvt_spec_init(GKV_F32, BW, 0, (uint64_t)BC * 7,
                                            GKV_INIT_ZEROS);
        unsigned long retries = kv__slice_retries, reruns = kv__slice_reruns;
        gkv_tensor_desc d;
        gkv_txn *tx;

        sp.flags = GKV_TENSOR_HOT;
        GKVT_OK(gkv_tensor_create(s, name, &sp));
        GKVT_OK(gkv_tensor_info(s, NULL, name, &d));
        assert_int_equal(d.chunk_rows, 7);
        for (size_t c = 0; c < BC; c++) {      /* a row in every chunk */
            ids[c] = c * 7 + (c + (size_t)direct) % 7;
            for (size_t k = 0; k < BW; k++) {
                rs = rs * 6364136223846793005ull + 1442695040888963407ull;
                rows[c * BW + k] = (float)(rs >> 40) * 0x1p-24f;
            }
        }
        if (direct) {
            GKVT_OK(gkv_tensor_push(s, name, ids, BC, rows, (size_t)BC * BW * 4,
                                    NULL));
        } else {
            GKVT_OK(gkv_writeback_start(s, name, 1000000));   /* ours */
            GKVT_OK(gkv_tensor_push(s, name, ids, BC, rows, (size_t)BC * BW * 4,
                                    NULL));
            GKVT_OK(gkv_writeback_flush(s));
        }
        print_message("  %s: slices run again in the parent: %lu\n",
                      direct ? "direct push" : "flush", kv__slice_retries - retries);
        assert_int_equal(kv__slice_reruns, reruns);
        /* what the file holds */
        GKVT_OK(gkv_txn_begin(s, &tx));
        GKVT_OK(gkv_tensor_pull(s, tx, name, ids, BC, got, (size_t)BC * BW * 4));
        gkv_txn_end(tx);
        assert_memory_equal(got, rows, (size_t)BC * BW * 4);
        if (!direct)
            GKVT_OK(gkv_writeback_stop(s, name));
    }
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    /* two tensors of 150,000 one-page chunks: 1.23 GB; what LMDB and the
     * spilling add (B-tree, free list, pages freed and written) stays small */
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    assert_int_equal(stat(p, &sb), 0);
    print_message("  data.mdb: %.2f GB\n", sb.st_size / 1e9);
    assert_true((uint64_t)sb.st_size < 2ull * BC * 4096 * 5 / 4);
    gkvt_rmtree(dir);
    kv__wb_slice = old_wb;
    kv__push_slice = old_push;
    free(ids);
    free(rows);
    free(got);
}

/* A sliced write (every push) first grows a map with less than 32 MiB to
 * spare past its last page, so that its pokes (slice_poke) have room: a
 * push of one row, which needs no room, leaves the 8 MiB map larger. */
static void
test_tight_map_grown(void **state)
{
    char *dir = gkvt_mkdtemp("slicemap");
    gkv_tensor_spec sp = gkvt_wb_spec(N, W, GKV_TENSOR_HOT);
    gkv_open_opts o = {.map_size = 8u << 20};
    gkv_store_stat st0, st1;
    uint64_t id = 100;
    float row[W] = {1.5f}, got[W];
    gkv_store *s;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, &o));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_store_stat_get(s, &st0));
    assert_true(st0.map_size < st0.used_bytes + (32u << 20));
    GKVT_OK(gkv_tensor_push(s, "t", &id, 1, row, sizeof row, NULL));
    GKVT_OK(gkv_store_stat_get(s, &st1));
    assert_true(st1.map_size >= st1.used_bytes + (32u << 20));
    GKVT_OK(gkv_tensor_pull(s, NULL, "t", &id, 1, got, sizeof got));
    assert_memory_equal(got, row, sizeof row);
    gkv_store_close(s);
    /* the look at the map before a write reads the file first: data.mdb
     * cut to nothing under an open handle fails the push (GKV_ECORRUPT),
     * it does not fault */
    o.map_size = 0;
    GKVT_OK(gkv_store_open(&s, dir, GKV_NOSYNC, &o));
    {
        char p[4200];
        snprintf(p, sizeof p, "%s/data.mdb", dir);
        assert_int_equal(truncate(p, 0), 0);
    }
    assert_int_equal(gkv_tensor_push(s, "t", &id, 1, row, sizeof row, NULL),
                     GKV_ECORRUPT);
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* ---- a flush writes the pages of its dirty chunks ---------------------------
 * LMDB writes a commit's pages with pwrite and writev (and the meta page
 * with pwrite); this program's versions count the bytes while 'counting'
 * is set. (Exported by hand: the build hides symbols.) */

static int counting;
static size_t written;

__attribute__((visibility("default"))) ssize_t
pwrite(int fd, const void *buf, size_t n, off_t off)
{
    ssize_t r = syscall(SYS_pwrite64, fd, buf, n, off);

    if (counting && r > 0)
        written += (size_t)r;
    return r;
}

__attribute__((visibility("default"))) ssize_t
writev(int fd, const struct iovec *iov, int cnt)
{
    ssize_t r = syscall(SYS_writev, fd, iov, cnt);

    if (counting && r > 0)
        written += (size_t)r;
    return r;
}

__attribute__((visibility("default"))) ssize_t
pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    ssize_t r = syscall(SYS_pwritev, fd, iov, cnt, (long)off, (long)(off >> 32));

    if (counting && r > 0)
        written += (size_t)r;
    return r;
}

static void
test_flush_writes_dirty_pages(void **state)
{
    enum { BN = 20000, BW = 128 };   /* 512-byte rows, 7 to a HOT chunk */
    const size_t ks[] = {10, 100, 1000};
    char *dir = gkvt_mkdtemp("slicepages");
    gkv_tensor_spec sp = gkvt_spec_init(GKV_F32, BW, 0, BN, GKV_INIT_UNIFORM);
    size_t tensor_bytes = (size_t)BN * BW * 4;
    static uint64_t ids[1000];
    static float rows[1000 * BW];
    uint64_t rs = gkvt_seed() ^ 11;
    gkv_tensor_desc d;
    gkv_store *s;

    (void)state;
    sp.flags = GKV_TENSOR_HOT;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "e", &sp));
    GKVT_OK(gkv_tensor_info(s, NULL, "e", &d));
    GKVT_OK(gkv_writeback_start(s, "e", 1000000));   /* flushes when asked */
    for (size_t j = 0; j < sizeof ks / sizeof *ks; j++) {
        size_t k = ks[j], nchunks = 0;
        unsigned char *seen = calloc(BN / d.chunk_rows + 1, 1);

        assert_non_null(seen);
        gkvt_rand_rows(&rs, ids, rows, k, 0, BN, BW);
        for (size_t i = 0; i < k; i++)
            nchunks += !seen[ids[i] / d.chunk_rows]++;
        free(seen);
        GKVT_OK(gkv_tensor_push(s, "e", ids, k, rows, k * BW * 4, NULL));
        written = 0;
        counting = 1;
        GKVT_OK(gkv_writeback_flush(s));
        counting = 0;
        print_message("  %zu dirty rows in %zu chunks: the flush wrote %zu "
                      "bytes (%.1f pages a chunk); the tensor has %zu\n", k,
                      nchunks, written, (double)written / 4096 / nchunks,
                      tensor_bytes);
        /* every dirty chunk is a page of its own, written whole; besides
         * them, the leaf and branch pages above them, the free list and
         * the meta page: at most one more page a chunk, and a few */
        assert_true(written >= nchunks * 4096);
        assert_true(written <= nchunks * 2 * 4096 + 16 * 4096);
    }
    GKVT_OK(gkv_writeback_stop(s, "e"));
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slices_same_bytes),
        cmocka_unit_test(test_slice_full),
        cmocka_unit_test(test_poke_counts_values),
        cmocka_unit_test(test_past_dirty_list),
        cmocka_unit_test(test_tight_map_grown),
        cmocka_unit_test(test_flush_writes_dirty_pages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
