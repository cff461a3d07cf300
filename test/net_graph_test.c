/* net_graph_test.c - graph servers on loopback with a heterogeneous graph
 * (two node types, three edge types): blocks with per-type fanouts, an
 * edge batch across types and the loader's split of one type's rows,
 * against the in-process references. With CUDA built in, the GPU loader
 * (gpu/loader.c) too: its host half (blocks packed for the device, input
 * nodes split between a cache range and the servers, the pulled rows) on
 * any machine, the whole loader against the same references where a CUDA
 * device is visible. The Makefile also builds this file against the
 * emulated GPU (build/test/net_graph_emu_test), so the GPU loader's tests
 * live here; the other graph-server programs (net_graph_sample_test,
 * net_graph_bad_test, net_graph_batch_test) share the fixture
 * (gkvt_ngraph.h): a weighted R-MAT graph with a node feature,
 * partitioned, one or two gkv-server processes per partition, started and
 * killed by PID (teardown reaps all of them, also after a failed
 * assertion). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include "gkvt_graph.h"
#include "gkvt_net.h"
#include "gkvt_ngraph.h"
#include "gkv.h"
#include "net/wire.h"
#ifdef GKV_HAVE_CUDA
#include "gpu/gkv_gpu.h"
#include "gpu/loader_int.h"
#include "loader/gkv_loader.h"
#endif

static void hblocks_equal(const gkv_block *a, const gkv_block *b, int nl,
                          int dev);

#ifdef GKV_HAVE_CUDA
/* ---- the GPU loader ---------------------------------------------------------- */

#define GPU_OK(expr) do { gkv_err rc_ = (expr); \
    if (rc_ != GKV_OK) fail_msg("%s: %s: %s", #expr, gkv_err_name(rc_), gkv_gpu_errmsg()); \
} while (0)

/* Input row i (node ids[i]) == the original feature row of its old ID. */
static void
row_check(const struct gkvt_ng *f, const int64_t *inv, const void *row, int64_t id)
{
    assert_memory_equal(row, f->feat + inv[id] * GKVT_NG_FEAT_W, GKVT_NG_FEAT_W * 4);
}

/* The loader tests' set-up: an R-MAT graph of 'scale' in two partitions
 * served by one server each, a client, the inverse node map, every node
 * in a shuffled order (seeds), and partition 0's node range (rg). */
static gkv_client *
loader_fixture(struct gkvt_ng *f, int scale, int64_t **inv, int64_t **seeds,
               int64_t *rg)
{
    gkv_client *c;

    gkvt_ng_graph_make(f, scale, 2);
    gkvt_ng_serve(f, 1);
    c = gkvt_ng_client(f, "gpu");
    *inv = gkvt_ng_inverse_map(f);
    *seeds = malloc((size_t)f->n * 8);
    assert_non_null(*seeds);
    for (int64_t i = 0; i < f->n; i++)
        (*seeds)[i] = (i * 2749 + 3) % f->n;
    GKVT_OK(gkv_pbook_node_range(gkv_client_pbook(c), 0, 0, &rg[0], &rg[1]));
    assert_true(rg[0] < rg[1]);
    return c;
}

/* The host half of a host-mode loader against references: the packed
 * blocks equal the in-process blocks; each input node is marked cached
 * exactly when it lies in [lo, hi); the pulled rows, in input order, are
 * the nodes' feature rows. */
static void
ldr_check_host(struct gkvt_ng *f, gkv_gpu_loader *l, const int64_t *inv,
               const int64_t *seeds, size_t n, const int *fan, int nl,
               const gkv_sample_opts *o, int64_t lo, int64_t hi)
{
    struct gpu_ldr_type *T = &l->t[0];
    const int64_t *sv[1] = {seeds}, *ids, *mi;
    size_t sn[1] = {n}, k = 0;
    struct gkvt_ng_bcopy ref;

    gkvt_ng_ref_blocks(f, &ref, seeds, n, fan, nl, o);
    GPU_OK(gpu__ldr_stage(l, sv, sn, fan, 1, nl, o));
    gpu__ldr_point(l, l->pack);
    assert_true(gkvt_ng_blocks_equal(&ref, l->blocks, nl, 0) > 0);
    if (T->rb == 0) {              /* blocks only */
        assert_int_equal(T->n, 0);
        assert_int_equal(l->rows_cached + l->rows_pulled, 0);
        gkvt_ng_bcopy_free(&ref);
        return;
    }
    assert_int_equal(T->n, ref.nsrc[0]);
    ids = l->blocks[0].nodes[0].ids;
    mi = hi > lo ? (const int64_t *)(l->pack + T->miss_off) : NULL;
    for (size_t i = 0; i < T->n; i++) {
        int cached = ids[i] >= lo && ids[i] < hi;
        if (mi != NULL)
            assert_int_equal(mi[i], cached ? -1 : (int64_t)k);
        if (!cached)
            row_check(f, inv, l->stage + T->stage_off + k++ * GKVT_NG_FEAT_W * 4,
                      ids[i]);
    }
    assert_int_equal(T->nmiss, k);
    assert_int_equal(l->rows_pulled, k);
    assert_int_equal(l->rows_cached, T->n - k);
    gkvt_ng_bcopy_free(&ref);
}

/* The example trainer with --device 0 --gpu-cache-mb 1 against these
 * servers: three batches with some input rows from the GPU cache, or
 * without a device a clean failure saying so. */
static void
trainer_on_gpu(struct gkvt_ng *f)
{
    char prog[4096];
#ifdef GKVT_GPU_EMU
    snprintf(prog, sizeof prog, "%s", gkvt_prog("emu/gkv-example-train"));
#else
    snprintf(prog, sizeof prog, "%s", gkvt_prog("gkv-example-train"));
#endif
    char *argv[] = {prog, "--device", "0",
                    "--gpu-cache-mb", "1", "--batch", "256", "--max-batches",
                    "3", NULL};
    char *out = NULL, *err = NULL;
    int code;

    setenv("GKV_IP_CONFIG", f->j.cfg, 1);
    setenv("GKV_PART_CONFIG", f->j.json, 1);
    setenv("GKV_MACHINE", "0", 1);
    setenv("GKV_GROUP", "gputrain", 1);
    code = gkvt_run(argv, NULL, 0, &out, &err, 120);
    unsetenv("GKV_IP_CONFIG");
    unsetenv("GKV_PART_CONFIG");
    unsetenv("GKV_MACHINE");
    unsetenv("GKV_GROUP");
    if (gkv_gpu_available(NULL, NULL, 0) != GKV_OK) {
        gkvt_gpu_missing(gkv_gpu_errmsg());
        if (code != 1 || strstr(err, "--device 0: no CUDA device") == NULL)
            fail_msg("trainer without a GPU: exit %d\n%s%s", code, out, err);
    } else if (code != 0 || strstr(out, "input rows from the GPU cache") ==
               NULL || strstr(out, "in device memory") == NULL) {
        fail_msg("trainer on GPU 0: exit %d\n%s%s", code, out, err);
    }
    free(out);
    free(err);
}

static void
test_gpu_loader_host(void **state)
{
    struct gkvt_ng *f = *state;
    gkv_client *c;
    gkv_gpu_loader *l = NULL;
    gkv_gpu_loader_opts lo = {0};
    gkv_sample_opts o = {0};
    gkv_gpu_batch bt;
    int64_t rg[2], none[2] = {0, 0}, *inv, *seeds, bad = -1;
    const int64_t *bv[1] = {&bad};
    size_t bn[1] = {1};
    int fan2[2] = {5, 10}, fan3[3] = {3, 4, 6}, fan1[1] = {-1};
    gkv_err rc;

    c = loader_fixture(f, 11, &inv, &seeds, rg);

    /* the cache holds partition 0's rows: the rest are pulled */
    lo.feat = "feat";
    GPU_OK(gpu__ldr_new(&l, c, &lo, rg));
    assert_int_equal(l->t[0].rb, GKVT_NG_FEAT_W * 4);
    o.seed = 5;
    ldr_check_host(f, l, inv, seeds, 256, fan2, 2, &o, rg[0], rg[1]);
    assert_true(l->rows_cached > 0);
    assert_true(l->rows_pulled > 0);
    /* bigger, then smaller batches: the buffers grow and are reused */
    ldr_check_host(f, l, inv, seeds, 1500, fan3, 3, &o, rg[0], rg[1]);
    ldr_check_host(f, l, inv, seeds + 7, 16, fan1, 1, &o, rg[0], rg[1]);
    o.flags = GKV_SAMPLE_WEIGHTED | GKV_SAMPLE_REPLACE;
    ldr_check_host(f, l, inv, seeds, 300, fan2, 2, &o, rg[0], rg[1]);
    o.flags = 0;
    /* bad calls fail with the step named and leave the loader usable */
    assert_int_equal(gpu__ldr_stage(l, bv, bn, fan1, 1, 0, &o), GKV_EINVAL);
    assert_non_null(strstr(gkv_gpu_errmsg(), "0 layers"));
    assert_int_equal(gpu__ldr_stage(l, bv, bn, fan1, 1, 17, &o), GKV_EINVAL);
    bad = f->n;
    assert_int_equal(gpu__ldr_stage(l, bv, bn, fan1, 1, 1, &o), GKV_ERANGE);
    assert_non_null(strstr(gkv_gpu_errmsg(), "sampling blocks through the "
                           "servers"));
    bad = -3;
    assert_int_equal(gpu__ldr_stage(l, bv, bn, fan1, 1, 1, &o), GKV_ERANGE);
    ldr_check_host(f, l, inv, seeds + 3, 200, fan2, 2, &o, rg[0], rg[1]);
    /* a host-mode loader has no device half */
    assert_int_equal(gkv_gpu_loader_next(l, bv, bn, fan1, 1, 1, &o, &bt,
                                         NULL), GKV_EINVAL);
    gkv_gpu_loader_free(l);

    /* no cache: every input row is pulled */
    GPU_OK(gpu__ldr_new(&l, c, &lo, none));
    ldr_check_host(f, l, inv, seeds, 500, fan2, 2, &o, 0, 0);
    assert_int_equal(l->rows_cached, 0);
    gkv_gpu_loader_free(l);
    /* no feature: blocks only */
    lo.feat = NULL;
    GPU_OK(gpu__ldr_new(&l, c, &lo, none));
    ldr_check_host(f, l, inv, seeds, 100, fan3, 3, &o, 0, 0);
    gkv_gpu_loader_free(l);

    /* bad loaders */
    lo.feat = "nosuch";
    l = (gkv_gpu_loader *)&lo;
    assert_int_equal(gpu__ldr_new(&l, c, &lo, rg), GKV_ENOTFOUND);
    assert_null(l);
    assert_non_null(strstr(gkv_gpu_errmsg(), "node/<ntype>/nosuch"));
    lo.feat = "node/_N/feat";
    assert_int_equal(gpu__ldr_new(&l, c, &lo, rg), GKV_EINVAL);
    assert_non_null(strstr(gkv_gpu_errmsg(), "'node/_N/feat'"));
    lo.feat = "";
    assert_int_equal(gpu__ldr_new(&l, c, &lo, rg), GKV_EINVAL);
    lo.feat = "feat";
    lo.device = -1;
    assert_int_equal(gkv_gpu_loader_new(&l, c, &lo), GKV_EINVAL);
    lo.device = 0;
    assert_int_equal(gkv_gpu_loader_new(NULL, c, &lo), GKV_EINVAL);
    assert_int_equal(gkv_gpu_loader_new(&l, NULL, &lo), GKV_EINVAL);
    assert_null(l);
    assert_int_equal(gkv_gpu_loader_next(NULL, bv, bn, fan1, 1, 1, &o, &bt,
                                         NULL), GKV_EINVAL);
    rc = gkv_gpu_loader_new(&l, c, &lo);
    if (gkv_gpu_available(NULL, NULL, 0) != GKV_OK) {
        gkvt_gpu_missing(gkv_gpu_errmsg());
        assert_int_equal(rc, GKV_ENOTSUP);
        assert_null(l);
        assert_non_null(strstr(gkv_gpu_errmsg(), "no CUDA device"));
    } else {
        GPU_OK(rc);
        gkv_gpu_loader_free(l);
    }
    trainer_on_gpu(f);
    NET_OK(gkv_client_close(c));
    free(seeds);
    free(inv);
}

/* One batch through a device loader against the references: the blocks
 * array by array (copied back), every input row byte for byte. */
static void
ldr_check_dev(struct gkvt_ng *f, gkv_gpu_loader *l, const int64_t *inv,
              const int64_t *seeds, size_t n, const int *fan, int nl,
              const gkv_sample_opts *o, int cached)
{
    const int64_t *sv[1] = {seeds};
    size_t sn[1] = {n}, ni;
    struct gkvt_ng_bcopy ref;
    gkv_gpu_batch bt;
    char *rows;

    gkvt_ng_ref_blocks(f, &ref, seeds, n, fan, nl, o);
    GPU_OK(gkv_gpu_loader_next(l, sv, sn, fan, 1, nl, o, &bt, NULL));
    assert_int_equal(bt.nlayers, nl);
    assert_true(gkvt_ng_blocks_equal(&ref, bt.blocks, nl, 1) > 0);
    ni = ref.nsrc[0];
    assert_int_equal(bt.row_bytes[0], GKVT_NG_FEAT_W * 4);
    assert_non_null(bt.feat_dev[0]);
    assert_int_equal(bt.rows_cached + bt.rows_pulled, ni);
    if (cached)
        assert_true(bt.rows_cached > 0 && bt.rows_pulled > 0);
    else
        assert_int_equal(bt.rows_cached, 0);
    rows = malloc(ni * GKVT_NG_FEAT_W * 4);
    GPU_OK(gkv_gpu_copy(rows, bt.feat_dev[0], ni * GKVT_NG_FEAT_W * 4, NULL));
    GPU_OK(gkv_gpu_sync(NULL));
    for (size_t i = 0; i < ni; i++)
        row_check(f, inv, rows + i * GKVT_NG_FEAT_W * 4, ref.ids[0][i]);
    free(rows);
    gkvt_ng_bcopy_free(&ref);
}

/* The host loader's options of the GPU loader tests: every 3rd node a
 * seed (n/3 of them), batches of 200, fanouts 'fan', sampled 'where'. */
static gkv_loader_opts
batches_opts(int where, const int64_t *seeds, size_t n, const int *fan,
             int nl)
{
    gkv_loader_opts bo;

    memset(&bo, 0, sizeof bo);
    bo.where = where;
    bo.seeds = seeds;
    bo.nseeds = n;
    bo.batch_size = 200;
    bo.shuffle_seed = 3;
    bo.nlayers = nl;
    bo.nfan = 1;
    bo.fanouts = fan;
    bo.sample_seed = 11;
    bo.prefetch = 3;
    bo.workers = 2;
    return bo;
}

/* Host batch hb against the references: its seeds are those of its place
 * in the epoch's order, its blocks the in-process blocks of its seeds and
 * sample seed; returns the reference (the caller frees it). */
static void
batch_check_ref(struct gkvt_ng *f, const gkv_loader_opts *bo,
                const gkv_batch *hb, uint64_t epoch, uint64_t index,
                struct gkvt_ng_bcopy *ref)
{
    size_t *perm = malloc(bo->nseeds * sizeof *perm), at;
    gkv_sample_opts o = {0};

    assert_non_null(perm);
    assert_int_equal(hb->epoch, epoch);
    assert_int_equal(hb->index, index);
    gkv_loader_epoch_order(bo->shuffle_seed, epoch, bo->flags, bo->nseeds,
                           perm);
    at = (size_t)index * bo->batch_size;
    assert_int_equal(hb->nseeds, bo->nseeds - at < bo->batch_size ?
                     bo->nseeds - at : bo->batch_size);
    for (size_t i = 0; i < hb->nseeds; i++)
        assert_int_equal(hb->seeds[i], bo->seeds[perm[at + i]]);
    free(perm);
    o.seed = gkv_loader_batch_seed(bo->sample_seed, epoch, index);
    assert_int_equal(hb->sample_seed, o.seed);
    gkvt_ng_ref_blocks(f, ref, hb->seeds, hb->nseeds, bo->fanouts,
                       bo->nlayers, &o);
    assert_true(gkvt_ng_blocks_equal(ref, hb->blocks, bo->nlayers, 0) > 0);
}

/* A host-mode loader over a gkv_loader (opts.batches), client and server
 * side: every batch of two epochs is staged from the host batch (the
 * packed blocks equal its blocks, which equal the in-process ones; the
 * input rows outside the "cache" copied from its rows, which are the
 * nodes' feature rows; the cached ones marked -1), in order, then the
 * end of the epoch; bad options name what is wrong. */
static void
test_gpu_loader_batches_host(void **state)
{
    struct gkvt_ng *f = *state;
    gkv_client *c;
    gkv_gpu_loader *l = NULL;
    gkv_gpu_loader_opts lo = {0};
    gkv_loader_opts bo;
    gkv_gpu_batch bt;
    int64_t rg[2], *inv, *seeds;
    int fan2[2] = {5, 10}, bad[1] = {3};
    gkv_typed_tensor ft = {0, "node/_N/feat"};

    c = loader_fixture(f, 11, &inv, &seeds, rg);
    for (int w = GKV_LOADER_CLIENT; w <= GKV_LOADER_SERVER; w++) {
        size_t nb = 0;

        bo = batches_opts(w, seeds, (size_t)f->n / 3, fan2, 2);
        lo.feat = "feat";
        lo.batches = &bo;
        GPU_OK(gpu__ldr_new(&l, c, &lo, rg));
        nb = (bo.nseeds + bo.batch_size - 1) / bo.batch_size;
        for (uint64_t ep = 0; ep < 2; ep++) {
            if (ep > 0)
                GPU_OK(gkv_gpu_loader_epoch(l, ep));
            for (uint64_t i = 0;; i++) {
                struct gpu_ldr_type *T = &l->t[0];
                struct gkvt_ng_bcopy ref;
                const int64_t *ids, *mi;
                const char *hrows;
                size_t k = 0;

                GPU_OK(gpu__ldr_take(l));
                if (l->nlayers == 0) {
                    assert_int_equal(i, nb);
                    assert_null(l->held);
                    break;
                }
                assert_non_null(l->held);
                batch_check_ref(f, &bo, l->held, ep, i, &ref);
                gpu__ldr_point(l, l->pack);
                assert_true(gkvt_ng_blocks_equal(&ref, l->blocks, 2, 0) > 0);
                assert_int_equal(T->n, ref.nsrc[0]);
                assert_int_equal(l->held->nfeats, 1);
                assert_int_equal(l->held->feat_bytes[0],
                                 T->n * GKVT_NG_FEAT_W * 4);
                ids = l->blocks[0].nodes[0].ids;
                mi = (const int64_t *)(l->pack + T->miss_off);
                hrows = l->held->feat[0];
                for (size_t r = 0; r < T->n; r++) {
                    int cached = ids[r] >= rg[0] && ids[r] < rg[1];
                    row_check(f, inv, hrows + r * GKVT_NG_FEAT_W * 4, ids[r]);
                    assert_int_equal(mi[r], cached ? -1 : (int64_t)k);
                    if (!cached)
                        row_check(f, inv, l->stage + T->stage_off +
                                  k++ * GKVT_NG_FEAT_W * 4, ids[r]);
                }
                assert_int_equal(l->rows_pulled, k);
                assert_int_equal(l->rows_cached, T->n - k);
                gkvt_ng_bcopy_free(&ref);
            }
        }
        /* a host-mode loader has no device half, whichever call */
        assert_int_equal(gkv_gpu_loader_next_batch(l, &bt, NULL), GKV_EINVAL);
        gkv_gpu_loader_free(l);         /* mid-epoch 2: nothing left over */
        l = NULL;
    }

    /* bad options: named, nothing made */
    bo = batches_opts(GKV_LOADER_SERVER, seeds, 1000, fan2, 2);
    bo.feats = &ft;
    bo.nfeats = 1;
    l = (gkv_gpu_loader *)&lo;
    assert_int_equal(gpu__ldr_new(&l, c, &lo, rg), GKV_EINVAL);
    assert_null(l);
    assert_non_null(strstr(gkv_gpu_errmsg(), "opts.batches has feats of its "
                           "own"));
    bo = batches_opts(GKV_LOADER_CLIENT, seeds, 1000, fan2, 2);
    bo.edge_seeds = 1;                 /* no pairs on the device */
    assert_int_equal(gpu__ldr_new(&l, c, &lo, rg), GKV_ENOTSUP);
    assert_null(l);
    assert_non_null(strstr(gkv_gpu_errmsg(), "edge seeds"));
    bo = batches_opts(GKV_LOADER_SERVER, seeds, 1000, bad, 2);
    bo.nfan = 2;                       /* 2 layers x 2 fanouts, 1 given */
    bo.fanouts = fan2;
    bo.nlayers = 1;
    assert_int_equal(gpu__ldr_new(&l, c, &lo, rg), GKV_EINVAL);
    print_message("bad host loader: %s\n", gkv_gpu_errmsg());
    assert_non_null(strstr(gkv_gpu_errmsg(), "the host loader (opts.batches)"));
    assert_int_equal(gkv_gpu_loader_epoch(NULL, 1), GKV_EINVAL);
    lo.batches = NULL;
    GPU_OK(gpu__ldr_new(&l, c, &lo, rg));
    assert_int_equal(gkv_gpu_loader_epoch(l, 1), GKV_EINVAL);
    assert_non_null(strstr(gkv_gpu_errmsg(), "without opts.batches"));
    gkv_gpu_loader_free(l);
    NET_OK(gkv_client_close(c));
    free(seeds);
    free(inv);
}

/* A whole epoch through a device loader over a gkv_loader (server side,
 * with the cache): each batch on the device equals its host batch, block
 * by block, and every input row the node's feature row; then the end of
 * the epoch. The two calls refuse the other kind of loader. */
static void
ldr_check_dev_batches(struct gkvt_ng *f, gkv_client *c, const int64_t *inv,
                      const int64_t *seeds, gkv_gpu_feat *const *caches)
{
    gkv_gpu_loader *l = NULL;
    gkv_gpu_loader_opts lo = {0};
    gkv_loader_opts bo;
    gkv_gpu_batch bt;
    int fan2[2] = {10, 15};
    size_t nb, i, cached = 0;
    const int64_t *sv[1] = {seeds};
    size_t sn[1] = {10};
    gkv_sample_opts o = {0};

    bo = batches_opts(GKV_LOADER_SERVER, seeds, (size_t)f->n / 3, fan2, 2);
    lo.feat = "feat";
    lo.cache = caches;
    lo.batches = &bo;
    GPU_OK(gkv_gpu_loader_new(&l, c, &lo));
    nb = (bo.nseeds + bo.batch_size - 1) / bo.batch_size;
    for (i = 0;; i++) {
        struct gkvt_ng_bcopy ref;
        size_t ni;
        char *rows;

        GPU_OK(gkv_gpu_loader_next_batch(l, &bt, NULL));
        if (bt.nlayers == 0)
            break;
        assert_non_null(bt.host);
        batch_check_ref(f, &bo, bt.host, 0, i, &ref);
        hblocks_equal(bt.host->blocks, bt.blocks, 2, 1);
        ni = ref.nsrc[0];
        assert_int_equal(bt.rows_cached + bt.rows_pulled, ni);
        cached += bt.rows_cached;
        rows = malloc(ni * GKVT_NG_FEAT_W * 4 + 1);
        GPU_OK(gkv_gpu_copy(rows, bt.feat_dev[0], ni * GKVT_NG_FEAT_W * 4,
                            NULL));
        for (size_t r = 0; r < ni; r++)
            row_check(f, inv, rows + r * GKVT_NG_FEAT_W * 4, ref.ids[0][r]);
        free(rows);
        gkvt_ng_bcopy_free(&ref);
    }
    assert_int_equal(i, nb);
    if (caches != NULL)
        assert_true(cached > 0);
    else
        assert_int_equal(cached, 0);
    assert_int_equal(gkv_gpu_loader_next(l, sv, sn, fan2, 1, 2, &o, &bt,
                                         NULL), GKV_EINVAL);
    assert_non_null(strstr(gkv_gpu_errmsg(), "call "
                           "gkv_gpu_loader_next_batch()"));
    GPU_OK(gkv_gpu_loader_epoch(l, 1));
    GPU_OK(gkv_gpu_loader_next_batch(l, &bt, NULL));   /* then freed mid-epoch */
    assert_int_equal(bt.host->epoch, 1);
    gkv_gpu_loader_free(l);
    lo.batches = NULL;
    GPU_OK(gkv_gpu_loader_new(&l, c, &lo));
    assert_int_equal(gkv_gpu_loader_next_batch(l, &bt, NULL), GKV_EINVAL);
    assert_non_null(strstr(gkv_gpu_errmsg(), "made without opts.batches"));
    gkv_gpu_loader_free(l);
}

static void
test_gpu_loader_device(void **state)
{
    struct gkvt_ng *f = *state;
    gkv_client *c;
    gkv_gpu_loader *l = NULL;
    gkv_gpu_loader_opts lo = {0};
    gkv_gpu_feat_opts fo = {0};
    gkv_gpu_feat *fc = NULL;
    gkv_gpu_feat *caches[1];
    gkv_sample_opts o = {0};
    int64_t *inv, *seeds, rg[2];
    int fan2[2] = {10, 15}, fan3[3] = {5, 10, 15};

    if (gkv_gpu_available(NULL, NULL, 0) != GKV_OK)
        gkvt_gpu_skip(gkv_gpu_errmsg());
    c = loader_fixture(f, 12, &inv, &seeds, rg);
    /* partition 0's rows, half of them in device memory */
    fo.budget_bytes = (size_t)(rg[1] - rg[0]) / 2 * GKVT_NG_FEAT_W * 4;
    GPU_OK(gkv_gpu_feat_open(&fc, gkv_part_store(f->part[0]), "node/_N/feat",
                             &fo));
    caches[0] = fc;
    lo.feat = "feat";
    lo.cache = caches;
    GPU_OK(gkv_gpu_loader_new(&l, c, &lo));
    o.seed = 9;
    ldr_check_dev(f, l, inv, seeds, 512, fan2, 2, &o, 1);
    ldr_check_dev(f, l, inv, seeds + 100, 2000, fan3, 3, &o, 1);
    ldr_check_dev(f, l, inv, seeds + 5, 64, fan2, 2, &o, 1);
    o.flags = GKV_SAMPLE_WEIGHTED;
    ldr_check_dev(f, l, inv, seeds, 700, fan2, 2, &o, 1);
#ifdef GKVT_GPU_EMU
    {
        /* a new loader's first batch finds the device out of memory
         * (GKV_GPU_EMU_MEM caps the emulated one): the call fails naming
         * its step, and the loader works once there is room */
        const int64_t *sv[1] = {seeds};
        size_t sn[1] = {300};
        gkv_gpu_batch bt;
        gkv_gpu_loader *l2;
        GPU_OK(gkv_gpu_loader_new(&l2, c, &lo));
        setenv("GKV_GPU_EMU_MEM", "1", 1);
        assert_int_equal(gkv_gpu_loader_next(l2, sv, sn, fan2, 1, 2, &o, &bt,
                                             NULL), GKV_ENOMEM);
        print_message("out of device memory: %s\n", gkv_gpu_errmsg());
        assert_non_null(strstr(gkv_gpu_errmsg(), "device"));
        unsetenv("GKV_GPU_EMU_MEM");
        ldr_check_dev(f, l2, inv, seeds, 300, fan2, 2, &o, 1);
        gkv_gpu_loader_free(l2);
    }
#endif
    gkv_gpu_loader_free(l);
    ldr_check_dev_batches(f, c, inv, seeds, caches);
    /* without a cache */
    lo.cache = NULL;
    GPU_OK(gkv_gpu_loader_new(&l, c, &lo));
    ldr_check_dev(f, l, inv, seeds, 900, fan2, 2, &o, 0);
    gkv_gpu_loader_free(l);
    ldr_check_dev_batches(f, c, inv, seeds, NULL);
    gkv_gpu_feat_close(fc);
    NET_OK(gkv_client_close(c));
    free(seeds);
    free(inv);
}
#endif /* GKV_HAVE_CUDA */

/* ---- a heterogeneous graph ----------------------------------------------------- */

#define HN_USER GKVT_UI_USERS  /* users (type 0, with the feature) */
#define HN_ITEM GKVT_UI_ITEMS  /* items (type 1, no feature) */

/* users follow users, users click items, items are clicked by users (the
 * reverses of the clicks, edge i of each); user features as f->feat with
 * f->n users. Partitioned in two (random, with the CSR), served, and the
 * whole graph rebuilt in the new IDs for the references. */
static void
hetero_make(struct gkvt_ng *f)
{
    gkv_graph *g = gkvt_ui_graph(31, 0);
    gkv_part_feat ft = {0};
    int64_t *nmap[2];

    f->n = HN_USER;
    f->j.nmach = 2;
    f->feat = malloc((size_t)HN_USER * GKVT_NG_FEAT_W * 4);
    assert_non_null(f->feat);
    for (int64_t v = 0; v < HN_USER; v++)
        for (int j = 0; j < GKVT_NG_FEAT_W; j++)
            f->feat[v * GKVT_NG_FEAT_W + j] = (float)v - 0.25f * (float)j;
    ft.type = "user";
    ft.name = "feat";
    ft.data = f->feat;
    ft.dtype = GKV_F32;
    ft.ndim = 1;
    ft.shape[0] = GKVT_NG_FEAT_W;
    ft.nrows = HN_USER;
    gkvt_partition(g, f->j.dir, "hparts", "h", 2, 3, &ft, 1, f->j.json,
                   sizeof f->j.json);
    for (int q = 0; q < 2; q++)
        GKVT_OK(gkv_part_open(&f->part[q], f->j.json, q, 0));
    /* the whole graph in the new IDs, for the references */
    f->ref.whole = gkvt_graph_renumber(g, gkv_part_book(f->part[0]), NULL,
                                       nmap);
    f->ref.rev = gkvt_ui_reverse(gkv_part_book(f->part[0]));
    f->nmap = nmap[0];
    gkvt_ref_sampler(&f->ref);
    gkv_graph_free(g);
    free(nmap[1]);
}

/* Blocks a and b (host memory) hold the same arrays, type by type. */
static void
hblocks_equal(const gkv_block *a, const gkv_block *b, int nl, int dev)
{
    size_t cap = 1;
    int64_t *tmp;

    for (int i = 0; i < nl; i++) {
        for (int t = 0; t < a[i].num_ntypes; t++)
            if (a[i].nodes[t].num_src > cap)
                cap = a[i].nodes[t].num_src;
        for (int e = 0; e < a[i].num_etypes; e++)
            if (a[i].edges[e].n > cap)
                cap = a[i].edges[e].n;
    }
    tmp = malloc(cap * 8);
    assert_non_null(tmp);
    for (int i = 0; i < nl; i++) {
        assert_int_equal(a[i].num_ntypes, b[i].num_ntypes);
        assert_int_equal(a[i].num_etypes, b[i].num_etypes);
        for (int t = 0; t < a[i].num_ntypes; t++) {
            const gkv_block_nodes *x = &a[i].nodes[t], *y = &b[i].nodes[t];
            assert_int_equal(x->num_src, y->num_src);
            assert_int_equal(x->num_dst, y->num_dst);
            if (x->num_src > 0)
                assert_memory_equal(x->ids, gkvt_ng_host_view(y->ids, x->num_src,
                                                      dev, tmp),
                                    x->num_src * 8);
        }
        for (int e = 0; e < a[i].num_etypes; e++) {
            const gkv_sample_edges *x = &a[i].edges[e], *y = &b[i].edges[e];
            assert_int_equal(x->n, y->n);
            if (x->n > 0) {
                assert_memory_equal(x->src, gkvt_ng_host_view(y->src, x->n, dev, tmp),
                                    x->n * 8);
                assert_memory_equal(x->dst, gkvt_ng_host_view(y->dst, x->n, dev, tmp),
                                    x->n * 8);
                assert_memory_equal(x->eid, gkvt_ng_host_view(y->eid, x->n, dev, tmp),
                                    x->n * 8);
            }
        }
    }
    free(tmp);
}

static void
test_hetero(void **state)
{
    struct gkvt_ng *f = *state;
    gkv_client *c;
    gkv_sample_opts o = {0};
    gkv_block wb[3], cb[3];
    gkv_edge_batch web, ceb;
    gkv_edge_batch_spec sp = {0};
    int64_t us[200], is[60], eids[150];
    const int64_t *seeds[2] = {us, is};
    size_t ns[2] = {200, 60}, edges = 0;
    int fan[3 * 3] = {2, 3, 1, 4, 2, 3, 5, 5, 5};
    uint64_t r = 17;

    hetero_make(f);
    gkvt_ng_serve(f, 1);
    c = gkvt_ng_client(f, "hetero");
    assert_int_equal(gkv_pbook_num_ntypes(gkv_client_pbook(c)), 2);
    assert_int_equal(gkv_pbook_num_etypes(gkv_client_pbook(c)), 3);
    {   /* a plain name whose row count two types share (clicks and
         * clicked_by): no book to follow, an even split */
        gkv_tensor_spec as = {.dtype = GKV_F32, .ndim = 1, .shape = {2},
                              .lo = 0, .hi = GKVT_UI_CLICKS};
        gkv_tensor_desc d;

        NET_OK(gkv_client_create(c, "amb", &as, -1));
        for (int q = 0; q < 2; q++) {
            GKVT_OK(gkv_tensor_info(gkv_part_store(f->part[q]), NULL, "amb",
                                    &d));
            assert_int_equal(d.lo, (uint64_t)q * GKVT_UI_CLICKS / 2);
            assert_int_equal(d.hi, (uint64_t)(q + 1) * GKVT_UI_CLICKS / 2);
        }
        NET_OK(gkv_client_delete(c, "amb"));
    }
    for (int i = 0; i < 200; i++)
        us[i] = (i * 389 + 5) % HN_USER;
    for (int i = 0; i < 60; i++)
        is[i] = (i * 97 + 1) % HN_ITEM;
    for (int i = 0; i < 150; i++)
        eids[i] = (int64_t)(tools__splitmix64(&r) % (uint64_t)(4 * HN_USER));

    /* blocks, per-etype fanouts, in and out */
    o.seed = 8;
    NET_OK(gkv_client_sample_blocks(c, seeds, ns, fan, 3, 3, &o, cb));
    GKVT_OK(gkv_sample_blocks(f->ref.ws, seeds, ns, fan, 3, 3, &o, wb));
    hblocks_equal(wb, cb, 3, 0);
    for (int e = 0; e < 3; e++)
        edges += cb[0].edges[e].n;
    assert_true(edges > 0);
    o.dir = GKV_DIR_OUT;
    NET_OK(gkv_client_sample_blocks(c, seeds, ns, fan, 3, 2, &o, cb));
    GKVT_OK(gkv_sample_blocks(f->ref.ws, seeds, ns, fan, 3, 2, &o, wb));
    hblocks_equal(wb, cb, 2, 0);
    o.dir = GKV_DIR_IN;

    /* an edge batch across types (user -> item), reverses excluded */
    sp.etype = 1;
    sp.eids = eids;
    sp.n = 150;
    sp.num_neg = 2;
    sp.exclude = GKV_EXCLUDE_SELF | GKV_EXCLUDE_REVERSE;
    sp.reverse_etype = 2;
    /* the servers read each click's reverse from the partitions' stored
     * reverse_eid (partitioning renumbered clicks and clicked_by apart:
     * click k's reverse is no longer clicked_by k); the reference on the
     * whole graph is given them */
    NET_OK(gkv_client_sample_edge_batch(c, &sp, fan, 3, 2, &o, &ceb, cb));
    sp.reverse_eids = f->ref.rev;
    sp.reverse_n = GKVT_UI_CLICKS;
    GKVT_OK(gkv_sample_edge_batch(f->ref.ws, &sp, fan, 3, 2, &o, &web, wb));
    hblocks_equal(wb, cb, 2, 0);
    /* no block holds a positive click's reverse */
    for (int l = 0; l < 2; l++)
        for (size_t k = 0; k < cb[l].edges[2].n; k++)
            for (int i = 0; i < 150; i++)
                assert_true(cb[l].edges[2].eid[k] != f->ref.rev[eids[i]]);
    /* the stored reverses are clicked_by's: another reverse type is
     * refused, not excluded by the wrong IDs */
    sp.reverse_eids = NULL;
    sp.reverse_etype = 0;
    assert_int_equal(gkv_client_sample_edge_batch(c, &sp, fan, 3, 2, &o, &ceb,
                                                  cb), GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "was partitioned with "
                           "'item:clicked_by:user' as its reverse type"));
    sp.reverse_etype = 2;
    NET_OK(gkv_client_sample_edge_batch(c, &sp, fan, 3, 2, &o, &ceb, cb));
    hblocks_equal(wb, cb, 2, 0);
    assert_int_equal(ceb.num_pos, 150);
    assert_int_equal(ceb.num_neg, 300);
    assert_memory_equal(ceb.pos_src, web.pos_src, 150 * 8);
    assert_memory_equal(ceb.pos_dst, web.pos_dst, 150 * 8);
    assert_memory_equal(ceb.neg_src, web.neg_src, 300 * 8);
    assert_memory_equal(ceb.neg_dst, web.neg_dst, 300 * 8);
    /* the seeds: users then items, first appearance */
    assert_int_equal(cb[1].nodes[0].num_dst, wb[1].nodes[0].num_dst);
    assert_true(cb[1].nodes[1].num_dst > 0);
#ifdef GKV_HAVE_CUDA
    {
        /* the loader's host half: user rows (the only type with the
         * feature), the cache holding partition 0's users */
        gkv_gpu_loader *l;
        gkv_gpu_loader_opts lo = {0};
        int64_t rg[4] = {0, 0, 0, 0}, *inv = gkvt_ng_inverse_map(f);
        const int64_t *ids, *mi;
        size_t k = 0;

        GKVT_OK(gkv_pbook_node_range(gkv_client_pbook(c), 0, 0, &rg[0],
                                     &rg[1]));
        lo.feat = "feat";
        GPU_OK(gpu__ldr_new(&l, c, &lo, rg));
        assert_int_equal(l->t[0].rb, GKVT_NG_FEAT_W * 4);
        assert_int_equal(l->t[1].rb, 0);
        GPU_OK(gpu__ldr_stage(l, seeds, ns, fan, 3, 2, &o));
        gpu__ldr_point(l, l->pack);
        GKVT_OK(gkv_sample_blocks(f->ref.ws, seeds, ns, fan, 3, 2, &o, wb));
        hblocks_equal(wb, l->blocks, 2, 0);
        assert_int_equal(l->t[0].n, wb[0].nodes[0].num_src);
        assert_int_equal(l->t[1].n, 0);
        ids = l->blocks[0].nodes[0].ids;
        mi = (const int64_t *)(l->pack + l->t[0].miss_off);
        for (size_t i = 0; i < l->t[0].n; i++) {
            if (ids[i] >= rg[0] && ids[i] < rg[1]) {
                assert_int_equal(mi[i], -1);
            } else {
                assert_int_equal(mi[i], (int64_t)k);
                row_check(f, inv, l->stage + l->t[0].stage_off +
                          k++ * GKVT_NG_FEAT_W * 4, ids[i]);
            }
        }
        assert_true(k > 0 && k < l->t[0].n);
        gkv_gpu_loader_free(l);
        /* the device half, where there is a device: the same blocks in
         * device memory, every user row pulled, no rows for items */
        if (gkv_gpu_available(NULL, NULL, 0) == GKV_OK) {
            gkv_gpu_batch bt;
            size_t nu = wb[0].nodes[0].num_src;
            char *rows = malloc(nu * GKVT_NG_FEAT_W * 4 + 1);
            GPU_OK(gkv_gpu_loader_new(&l, c, &lo));
            GPU_OK(gkv_gpu_loader_next(l, seeds, ns, fan, 3, 2, &o, &bt,
                                       NULL));
            hblocks_equal(wb, bt.blocks, 2, 1);
            assert_int_equal(bt.rows_pulled, nu);
            assert_int_equal(bt.rows_cached, 0);
            assert_int_equal(bt.row_bytes[0], GKVT_NG_FEAT_W * 4);
            assert_null(bt.feat_dev[1]);
            GPU_OK(gkv_gpu_copy(rows, bt.feat_dev[0], nu * GKVT_NG_FEAT_W * 4, NULL));
            GPU_OK(gkv_gpu_sync(NULL));
            for (size_t i = 0; i < nu; i++)
                row_check(f, inv, rows + i * GKVT_NG_FEAT_W * 4,
                          wb[0].nodes[0].ids[i]);
            free(rows);
            gkv_gpu_loader_free(l);
        }
        free(inv);
    }
#endif
    NET_OK(gkv_client_close(c));
}

#define T(name) cmocka_unit_test_setup_teardown(name, gkvt_ng_setup, \
                                                gkvt_ng_teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        /* in the emulated-GPU build too: its end checks the GPU loader on
         * two node types */
        T(test_hetero),
#ifdef GKV_HAVE_CUDA
        T(test_gpu_loader_host),
        T(test_gpu_loader_batches_host),
        T(test_gpu_loader_device),
#endif
    };

    int rc;

    signal(SIGPIPE, SIG_IGN);
    rc = cmocka_run_group_tests_name("net_graph", tests, NULL, NULL);
#ifdef GKVT_GPU_EMU
    rc = gkvt_emu_exit("net_graph_emu_test", rc);  /* nothing left allocated */
#endif
    return rc;
}
