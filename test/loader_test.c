/* loader_test.c - the mini-batch loader (loader/gkv_loader.h).
 *
 * A graph (homogeneous R-MAT, or the heterogeneous user/item graph) with
 * node features, labels, a training mask and an edge feature is
 * partitioned in two and served by gkv-server processes on loopback, one
 * or two a machine. The reference is computed here, in the partitions' ID
 * space: the whole graph renumbered as the partitions number it (its
 * sgraph, with one sampler), and a store holding every partition's rows at
 * their global IDs. For every batch a loader hands out, the test samples
 * the same seeds with gkv_sample_blocks() and the batch's generator seed,
 * reads the rows with gkv_tensor_pull(), and compares byte for byte: so
 * LOCAL (on that sgraph and store), CLIENT and SERVER give the same
 * batches, for 1, 2 and 3 workers and prefetch 1, 2 and 4.
 * Edge seeds (link prediction): LOCAL and CLIENT batches against
 * gkv_sample_edge_batch() on the same reference (negatives, the batch's
 * edges and on the user/item graph the clicks' reverses excluded), the
 * split of an edge mask, and the edge options gkv_loader_new refuses.
 * Sampling by an edge feature (edge_w_feat, CLIENT): batches against
 * gkv_client_sample_blocks() with the same names, a 0/1 mask's zero
 * edges never sampled, the modes and features gkv_loader_new refuses.
 * Then: epoch orders, drop_last, num_batches, an epoch dropped mid-way,
 * the loader freed with batches in flight and held, a server killed
 * mid-epoch and restarted, the split of a mask, and every bad input
 * gkv_loader_new refuses. Every process a test starts is killed and
 * reaped by PID (gkvt_net.h). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkvt.h"
#include "gkvt_graph.h"
#include "gkvt_net.h"
#include "loader/loader_int.h"  /* the queue's state, read under its lock */

#define LT_PROCS  12
#define LT_FEAT_W 4        /* floats a node feature row (user, _N) */
#define LT_ITEM_W 3        /* floats an item feature row */
#define LT_EF_W   2        /* floats an edge feature row */
#define LT_SEEDS  300      /* seeds a loader samples */
#define LT_BS     64       /* seeds a batch */

static const char *const g_opts[] = {"--nosync", NULL};

/* One test's graph, servers and references. */
struct lfx {
    struct gkvt_job j;       /* first: gkvt_job_setup */
    int hetero;
    gkv_part *part[2];
    struct gkvt_ref ref;     /* the whole graph in the partitions' IDs */
    gkv_store *whole;        /* every partition's rows at their IDs */
    char wdir[4300];
    gkv_client *c;           /* a member: keeps the servers up */
    int64_t seeds[LT_SEEDS];
    int64_t eseeds[LT_SEEDS]; /* edge seeds of type setype (neseeds) */
    size_t neseeds;
    int setype;
    int64_t nsedges;         /* edges of type setype */
    /* what the loaders collect */
    gkv_typed_tensor feats[2], efeats[1];
    int nfeats;
    const char *label;
    int fan[6], nfan, nl;
};

/* ---- the graph, its partitions and the references ---------------------- */

/* Copies every node/ and edge/ tensor of the partitions into f->whole, at
 * the same global IDs. */
static void
whole_store(struct lfx *f)
{
    gkv_store *ps[2];
    gkv_tensor_desc *d;
    size_t n;

    snprintf(f->wdir, sizeof f->wdir, "%s/whole", f->j.dir);
    GKVT_OK(gkv_store_open(&f->whole, f->wdir, GKV_CREATE | GKV_NOSYNC,
                           NULL));
    for (int q = 0; q < 2; q++)
        ps[q] = gkv_part_store(f->part[q]);
    GKVT_OK(gkv_tensor_list(ps[0], NULL, 0, &d, &n));
    for (size_t i = 0; i < n; i++) {
        gkv_tensor_spec sp = {0};
        uint64_t lo = UINT64_MAX, hi = 0;

        if (strncmp(d[i].name, "node/", 5) != 0 &&
            strncmp(d[i].name, "edge/", 5) != 0)
            continue;
        for (int q = 0; q < 2; q++) {
            gkv_tensor_desc e;
            if (gkv_tensor_info(ps[q], NULL, d[i].name, &e) != GKV_OK)
                continue;
            lo = e.lo < lo ? e.lo : lo;
            hi = e.hi > hi ? e.hi : hi;
        }
        sp.dtype = d[i].dtype;
        sp.ndim = d[i].ndim;
        memcpy(sp.shape, d[i].shape, sizeof sp.shape);
        sp.lo = lo;
        sp.hi = hi;
        GKVT_OK(gkv_tensor_create(f->whole, d[i].name, &sp));
        for (int q = 0; q < 2; q++) {
            gkv_tensor_desc e;
            unsigned char *rows;
            size_t len;

            if (gkv_tensor_info(ps[q], NULL, d[i].name, &e) != GKV_OK)
                continue;
            len = (size_t)(e.hi - e.lo) * e.row_bytes;
            rows = malloc(len + 1);
            assert_non_null(rows);
            GKVT_OK(gkv_tensor_read(ps[q], NULL, d[i].name, e.lo, e.hi, rows,
                                    len));
            GKVT_OK(gkv_tensor_write(f->whole, d[i].name, e.lo, e.hi, rows,
                                     len));
            free(rows);
        }
    }
    gkv_free(d);
}

/* Rows of n nodes (or edges) of width w: element j of row v is a value of
 * (v, j, salt) as exact float. */
static float *
rows_make(int64_t n, int w, float salt)
{
    float *r = malloc((size_t)n * (size_t)w * 4 + 4);

    assert_non_null(r);
    for (int64_t v = 0; v < n; v++)
        for (int j = 0; j < w; j++)
            r[v * w + j] = (float)v * 0.5f + (float)j * 0.125f + salt;
    return r;
}

static gkv_part_feat
pfeat(int is_edge, const char *type, const char *name, const void *data,
      gkv_dtype dt, unsigned ndim, uint64_t w, uint64_t nrows)
{
    gkv_part_feat p = {0};

    p.is_edge = is_edge;
    p.type = type;
    p.name = name;
    p.data = data;
    p.dtype = dt;
    p.ndim = ndim;
    p.shape[0] = w;
    p.nrows = nrows;
    return p;
}

/* The graph (hetero: the user/item graph; else R-MAT scale 9), its
 * features, two partitions, the references; servers not yet. */
static void
graph_make(struct lfx *f, int hetero)
{
    gkv_graph *g;
    gkv_part_feat pf[8];
    int npf = 0;
    int64_t n0, n1 = 0, m0;
    float *feat, *feat1 = NULL, *ef;
    int64_t *label;
    uint8_t *mask, *emask;
    uint64_t st = 77;
    int64_t *perm;

    f->hetero = hetero;
    f->j.nmach = 2;
    if (hetero) {
        g = gkvt_ui_graph(31, 0);
    } else {
        gkv_rmat_spec sp = gkvt_rmat_spec(9, 2026, 0);
        int64_t m = 512 * 8, *s = malloc(m * 8), *d = malloc(m * 8);

        assert_true(s != NULL && d != NULL);
        GKVT_OK(gkv_rmat_edges(&sp, 0, m, s, d));
        GKVT_OK(gkv_graph_new_homo(&g, 512));
        GKVT_OK(gkv_graph_add_edges(g, 0, s, d, NULL, (size_t)m));
        free(s);
        free(d);
    }
    n0 = gkv_graph_num_nodes(g, 0);
    m0 = gkv_graph_num_edges(g, 0);
    feat = rows_make(n0, LT_FEAT_W, 0.0f);
    ef = rows_make(m0, LT_EF_W, 0.25f);
    label = malloc((size_t)n0 * 8);
    mask = malloc((size_t)n0);
    assert_true(label != NULL && mask != NULL);
    for (int64_t v = 0; v < n0; v++) {
        label[v] = v * 7 + 3;
        mask[v] = v % 3 == 0;
    }
    pf[npf++] = pfeat(0, hetero ? "user" : "_N", "feat", feat, GKV_F32, 1,
                      LT_FEAT_W, (uint64_t)n0);
    pf[npf++] = pfeat(0, hetero ? "user" : "_N", "label", label, GKV_I64, 0,
                      0, (uint64_t)n0);
    pf[npf++] = pfeat(0, hetero ? "user" : "_N", "train_mask", mask, GKV_U8,
                      0, 0, (uint64_t)n0);
    pf[npf++] = pfeat(1, hetero ? gkvt_ui_canon[0] : "_N:_E:_N", "ew", ef,
                      GKV_F32, 1, LT_EF_W, (uint64_t)m0);
    /* edge seeds: user clicks item (hetero), else the one type */
    f->setype = hetero ? 1 : 0;
    f->nsedges = gkv_graph_num_edges(g, f->setype);
    emask = malloc((size_t)f->nsedges + 1);
    assert_non_null(emask);
    for (int64_t e = 0; e < f->nsedges; e++)
        emask[e] = e % 4 == 1;
    pf[npf++] = pfeat(1, hetero ? gkvt_ui_canon[1] : "_N:_E:_N",
                      "train_mask", emask, GKV_U8, 0, 0,
                      (uint64_t)f->nsedges);
    if (hetero) {
        n1 = gkv_graph_num_nodes(g, 1);
        feat1 = rows_make(n1, LT_ITEM_W, 1000.0f);
        pf[npf++] = pfeat(0, "item", "feat", feat1, GKV_F32, 1, LT_ITEM_W,
                          (uint64_t)n1);
    }
    gkvt_partition(g, f->j.dir, "parts", "p", 2, 5, pf, (size_t)npf,
                   f->j.json, sizeof f->j.json);
    for (int q = 0; q < 2; q++)
        GKVT_OK(gkv_part_open(&f->part[q], f->j.json, q, 0));
    f->ref.whole = gkvt_graph_renumber(g, gkv_part_book(f->part[0]), NULL,
                                       NULL);
    gkvt_ref_sampler(&f->ref);
    whole_store(f);
    /* what the loaders collect */
    if (hetero) {
        f->feats[0].type = 0;
        f->feats[0].name = "node/user/feat";
        f->feats[1].type = 1;
        f->feats[1].name = "node/item/feat";
        f->nfeats = 2;
        f->label = "node/user/label";
        f->efeats[0].type = 0;
        f->efeats[0].name = "edge/user:follows:user/ew";
        f->nfan = 3;
        f->nl = 2;
        memcpy(f->fan, (int[]){3, 2, 2, 4, 3, 2}, 6 * sizeof (int));
    } else {
        f->feats[0].type = 0;
        f->feats[0].name = "node/_N/feat";
        f->nfeats = 1;
        f->label = "node/_N/label";
        f->efeats[0].type = 0;
        f->efeats[0].name = "edge/_N:_E:_N/ew";
        f->nfan = 1;
        f->nl = 2;
        f->fan[0] = 4;
        f->fan[1] = 5;
    }
    perm = gkvt_distinct_seeds(n0, &st);
    memcpy(f->seeds, perm, sizeof f->seeds);
    free(perm);
    perm = gkvt_distinct_seeds(f->nsedges, &st);
    f->neseeds = f->nsedges < LT_SEEDS ? (size_t)f->nsedges : LT_SEEDS;
    memcpy(f->eseeds, perm, f->neseeds * sizeof *f->eseeds);
    free(perm);
    free(emask);
    gkv_graph_free(g);
    free(feat);
    free(feat1);
    free(ef);
    free(label);
    free(mask);
}

static int
setup(void **state)
{
    return gkvt_job_setup(state, sizeof (struct lfx), "loader", LT_PROCS,
                          g_opts, 1);
}

static int
teardown(void **state)
{
    struct lfx *f = *state;

    if (f->c != NULL)
        (void)gkv_client_close(f->c);
    gkvt_ref_free(&f->ref);
    gkv_store_close(f->whole);
    for (int q = 0; q < 2; q++)
        gkv_part_close(f->part[q]);
    return gkvt_job_teardown(state);
}

/* nserv servers a machine and a member client (20 s timeout, or
 * timeout_ms). */
static void
serve(struct lfx *f, int nserv, int timeout_ms, struct gkvt_proc **srv)
{
    gkv_client_opts o = {0};

    gkvt_serve(&f->j, 2, nserv, NULL, srv);
    o.timeout_ms = timeout_ms;
    f->c = gkvt_connect(f->j.cfg, "trainer", 0, &o);
}

/* ---- the reference ------------------------------------------------------- */

/* The options of a loader of f's seeds and tensors. */
static gkv_loader_opts
lopts(struct lfx *f, int where, int workers, int prefetch)
{
    gkv_loader_opts o = {0};

    o.where = where;
    if (where == GKV_LOADER_LOCAL) {
        o.sg = f->ref.wsg;
        o.store = f->whole;
    } else {
        o.client = f->c;
    }
    o.seed_ntype = 0;
    o.seeds = f->seeds;
    o.nseeds = LT_SEEDS;
    o.batch_size = LT_BS;
    o.shuffle_seed = 11;
    o.nlayers = f->nl;
    o.nfan = f->nfan;
    o.fanouts = f->fan;
    o.dir = GKV_DIR_IN;
    o.sample_seed = 5;
    o.feats = f->feats;
    o.nfeats = f->nfeats;
    o.label = f->label;
    o.efeats = f->efeats;
    o.nefeats = 1;
    o.prefetch = prefetch;
    o.workers = workers;
    return o;
}

/* Rows ids[0 .. n) of 'name' from the whole store == got (bytes). */
static void
expect_rows(struct lfx *f, const char *name, const int64_t *ids, size_t n,
            const void *got, size_t got_bytes)
{
    gkv_tensor_desc d;
    unsigned char *want;

    GKVT_OK(gkv_tensor_info(f->whole, NULL, name, &d));
    assert_int_equal(got_bytes, n * d.row_bytes);
    if (n == 0)
        return;
    want = malloc(n * d.row_bytes);
    assert_non_null(want);
    GKVT_OK(gkv_tensor_pull(f->whole, NULL, name, (const uint64_t *)ids, n,
                            want, n * d.row_bytes));
    assert_memory_equal(got, want, n * d.row_bytes);
    free(want);
}

/* The rows of a batch's input nodes and sampled edges (o's tensors) ==
 * those of the reference's blocks wb. */
static void
expect_batch_rows(struct lfx *f, const gkv_loader_opts *o,
                  const gkv_batch *b, const gkv_block *wb)
{
    int nl = o->nlayers;

    assert_int_equal(b->nfeats, o->nfeats);
    for (int k = 0; k < o->nfeats; k++) {
        const gkv_block_nodes *in = &wb[0].nodes[o->feats[k].type];

        expect_rows(f, o->feats[k].name, in->ids, in->num_src, b->feat[k],
                    b->feat_bytes[k]);
    }
    assert_int_equal(b->nefeats, o->nefeats);
    for (int k = 0; k < o->nefeats; k++)
        for (int i = 0; i < nl; i++) {
            const gkv_sample_edges *e = &wb[i].edges[o->efeats[k].type];
            size_t at = (size_t)k * nl + i;

            expect_rows(f, o->efeats[k].name, e->eid, e->n, b->efeat[at],
                        b->efeat_bytes[at]);
        }
}

/* Batch b's head is that of batch 'index' of 'epoch' of a loader made
 * with o: returns its seeds (*n of them, malloc'd), checked against b's,
 * and the sampling options it was made with. */
static int64_t *
expect_head(const gkv_loader_opts *o, const gkv_batch *b, uint64_t epoch,
            size_t index, size_t *n, gkv_sample_opts *so)
{
    size_t ns = o->nseeds, bs = o->batch_size, lo = index * bs;
    size_t *perm = malloc(ns * sizeof *perm + 8);
    int64_t *seeds = malloc(bs * 8);

    assert_true(perm != NULL && seeds != NULL);
    assert_non_null(b);
    *n = ns - lo < bs ? ns - lo : bs;
    assert_int_equal(b->epoch, epoch);
    assert_int_equal(b->index, index);
    assert_int_equal(b->sample_seed,
                     gkv_loader_batch_seed(o->sample_seed, epoch, index));
    gkv_loader_epoch_order(o->shuffle_seed, epoch, o->flags, ns, perm);
    for (size_t i = 0; i < *n; i++)
        seeds[i] = o->seeds[perm[lo + i]];
    assert_int_equal(b->nseeds, *n);
    assert_int_equal(b->seed_ntype, o->edge_seeds ? -1 : o->seed_ntype);
    assert_memory_equal(b->seeds, seeds, *n * 8);
    assert_int_equal(b->nlayers, o->nlayers);
    memset(so, 0, sizeof *so);
    so->seed = b->sample_seed;
    so->dir = o->dir;
    so->flags = o->sample_flags;
    free(perm);
    return seeds;
}

/* Edge seeds: batch b == gkv_sample_edge_batch() of its edges on the
 * reference, byte for byte (the pairs, the blocks, the rows). */
static void
expect_ebatch(struct lfx *f, const gkv_loader_opts *o, const gkv_batch *b,
              uint64_t epoch, size_t index)
{
    size_t n;
    gkv_sample_opts so;
    int64_t *seeds = expect_head(o, b, epoch, index, &n, &so);
    gkv_edge_batch_spec es = {0};
    gkv_edge_batch eb;
    gkv_block wb[8];
    int64_t *rev = NULL;

    es.etype = o->seed_etype;
    es.eids = seeds;
    es.n = n;
    es.num_neg = o->num_neg;
    es.exclude = o->exclude;
    es.reverse_etype = o->reverse_etype;
    if (o->exclude & GKV_EXCLUDE_REVERSE) {
        /* the reference's IDs are the partitions': reverses by the map */
        es.reverse_eids = rev = gkvt_ui_reverse(gkv_part_book(f->part[0]));
        es.reverse_n = GKVT_UI_CLICKS;
    }
    GKVT_OK(gkv_sample_edge_batch(f->ref.ws, &es, o->fanouts, o->nfan,
                                  o->nlayers, &so, &eb, wb));
    assert_int_equal(b->num_pos, n);
    assert_int_equal(eb.num_pos, n);
    assert_int_equal(b->num_neg, n * (size_t)o->num_neg);
    assert_int_equal(eb.num_neg, b->num_neg);
    assert_memory_equal(b->pos_src, eb.pos_src, n * 8);
    assert_memory_equal(b->pos_dst, eb.pos_dst, n * 8);
    if (b->num_neg > 0) {
        assert_memory_equal(b->neg_src, eb.neg_src, b->num_neg * 8);
        assert_memory_equal(b->neg_dst, eb.neg_dst, b->num_neg * 8);
    }
    assert_true(gkvt_blocks_same(b->blocks, wb, o->nlayers));
    assert_null(b->label);
    expect_batch_rows(f, o, b, wb);
    free(rev);
    free(seeds);
}

/* Batch b is batch 'index' of 'epoch' of a loader made with o, byte for
 * byte: its seeds, blocks and rows as computed here. */
static void
expect_batch(struct lfx *f, const gkv_loader_opts *o, const gkv_batch *b,
             uint64_t epoch, size_t index)
{
    size_t n;
    gkv_sample_opts so;
    int64_t *seeds = expect_head(o, b, epoch, index, &n, &so);
    gkv_block wb[8];
    const int64_t *sv[2] = {NULL, NULL};
    size_t sn[2] = {0, 0};
    int nl = o->nlayers, nt, ne;

    sv[o->seed_ntype] = seeds;
    sn[o->seed_ntype] = n;
    GKVT_OK(gkv_sample_blocks(f->ref.ws, sv, sn, o->fanouts, o->nfan, nl,
                              &so, wb));
    nt = wb[0].num_ntypes;
    ne = wb[0].num_etypes;
    assert_int_equal(b->nlayers, nl);
    assert_int_equal(b->num_ntypes, nt);
    assert_int_equal(b->num_etypes, ne);
    assert_true(gkvt_blocks_same(b->blocks, wb, nl));
    assert_null(b->pos_src);
    assert_int_equal(b->num_pos + b->num_neg, 0);
    /* the rows, by the reference's IDs */
    if (o->label != NULL)
        expect_rows(f, o->label, seeds, n, b->label, b->label_bytes);
    else
        assert_null(b->label);
    expect_batch_rows(f, o, b, wb);
    free(seeds);
}

/* The u8 rows of edge mask 'name' for edges e (whole store): how many are
 * 0, the rest being 1. */
static size_t
mask_zeros(struct lfx *f, const char *name, const gkv_sample_edges *e)
{
    uint8_t *m = malloc(e->n + 1);
    size_t z = 0;

    assert_non_null(m);
    if (e->n > 0)
        GKVT_OK(gkv_tensor_pull(f->whole, NULL, name,
                                (const uint64_t *)e->eid, e->n, m, e->n));
    for (size_t i = 0; i < e->n; i++) {
        assert_true(m[i] <= 1);
        z += m[i] == 0;
    }
    free(m);
    return z;
}

/* Node seeds sampled by the edge mask o->edge_w_feat[0] (the homogeneous
 * graph's "train_mask"): batch b == gkv_client_sample_blocks() of its
 * seeds with the same options, byte for byte (blocks and rows); none of
 * its edges has mask 0, while a uniform sample of the same seeds has
 * some (added to *uzero). */
static void
expect_wbatch(struct lfx *f, const gkv_loader_opts *o, const gkv_batch *b,
              uint64_t epoch, size_t index, size_t *uzero)
{
    static const char *const mask = "edge/_N:_E:_N/train_mask";
    size_t n, nedges = 0;
    gkv_sample_opts so;
    int64_t *seeds = expect_head(o, b, epoch, index, &n, &so);
    gkv_block wb[8];
    const int64_t *sv[1] = {seeds};
    size_t sn[1] = {n};
    int nl = o->nlayers;

    assert_string_equal(o->edge_w_feat[0], "train_mask");
    NET_OK(gkv_client_sample_blocks(f->c, sv, sn, o->fanouts, o->nfan, nl,
                                    &so, wb));      /* uniform */
    for (int i = 0; i < nl; i++)
        *uzero += mask_zeros(f, mask, &wb[i].edges[0]);
    so.edge_w_feat = o->edge_w_feat;
    NET_OK(gkv_client_sample_blocks(f->c, sv, sn, o->fanouts, o->nfan, nl,
                                    &so, wb));
    assert_true(gkvt_blocks_same(b->blocks, wb, nl));
    for (int i = 0; i < nl; i++) {
        assert_int_equal(mask_zeros(f, mask, &b->blocks[i].edges[0]), 0);
        nedges += b->blocks[i].edges[0].n;
    }
    assert_true(nedges > 0);
    expect_rows(f, o->label, seeds, n, b->label, b->label_bytes);
    expect_batch_rows(f, o, b, wb);
    free(seeds);
}

/* Every batch of epochs 'e0' and 'e0' + 1 of a loader of o == the
 * reference; returns the batches compared. */
static size_t
expect_loader(struct lfx *f, const gkv_loader_opts *o, uint64_t e0)
{
    gkv_loader *l;
    gkv_batch *b;
    size_t got = 0, uzero = 0;

    NET_OK(gkv_loader_new(&l, o));
    assert_int_equal(gkv_loader_num_batches(l),
                     (o->flags & GKV_LOADER_DROP_LAST) ? o->nseeds / LT_BS
                     : (o->nseeds + LT_BS - 1) / LT_BS);
    for (uint64_t e = e0; e < e0 + 2; e++) {
        size_t i = 0;

        if (e != 0)
            NET_OK(gkv_loader_epoch(l, e));
        for (;;) {
            NET_OK(gkv_loader_next(l, &b));
            if (b == NULL)
                break;
            if (o->edge_seeds)
                expect_ebatch(f, o, b, e, i++);
            else if (o->edge_w_feat != NULL)
                expect_wbatch(f, o, b, e, i++, &uzero);
            else
                expect_batch(f, o, b, e, i++);
            gkv_batch_release(b);
        }
        assert_int_equal(i, gkv_loader_num_batches(l));
        got += i;
        /* the epoch is over: NULL again */
        NET_OK(gkv_loader_next(l, &b));
        assert_null(b);
    }
    gkv_loader_free(l);
    if (o->edge_w_feat != NULL)     /* the mask did leave edges out */
        assert_true(uzero > 0);
    return got;
}

/* Loader l (made with o, seeds from a mask) has split's seeds want[0 ..
 * nwant), and its first batch is that of those seeds given; frees l. */
static void
expect_split(struct lfx *f, gkv_loader_opts o, gkv_loader *l,
             const int64_t *want, size_t nwant)
{
    const int64_t *got;
    size_t ngot;
    gkv_batch *b;

    got = gkv_loader_seeds(l, &ngot);
    assert_int_equal(ngot, nwant);
    assert_true(nwant > 0);
    assert_memory_equal(got, want, nwant * 8);
    o.seeds = want;
    o.nseeds = nwant;
    o.seed_mask = NULL;
    NET_OK(gkv_loader_next(l, &b));
    if (o.edge_seeds)
        expect_ebatch(f, &o, b, 0, 0);
    else
        expect_batch(f, &o, b, 0, 0);
    gkv_batch_release(b);
    gkv_loader_free(l);
}

/* ---- tests ------------------------------------------------------------------ */

static void
test_order(void **state)
{
    size_t a[100], b[100], c[100];
    int seen[100] = {0};

    (void)state;
    gkv_loader_epoch_order(3, 0, 0, 100, a);
    gkv_loader_epoch_order(3, 0, 0, 100, b);
    gkv_loader_epoch_order(3, 1, 0, 100, c);
    assert_memory_equal(a, b, sizeof a);           /* same seed, same order */
    assert_memory_not_equal(a, c, sizeof a);       /* a new one each epoch */
    for (int i = 0; i < 100; i++) {
        assert_true(a[i] < 100);
        seen[a[i]]++;
    }
    for (int i = 0; i < 100; i++)
        assert_int_equal(seen[i], 1);              /* a permutation */
    gkv_loader_epoch_order(4, 0, 0, 100, b);
    assert_memory_not_equal(a, b, sizeof a);       /* another seed */
    gkv_loader_epoch_order(3, 5, GKV_LOADER_NO_SHUFFLE, 100, b);
    for (size_t i = 0; i < 100; i++)
        assert_int_equal(b[i], i);
    gkv_loader_epoch_order(3, 0, 0, 1, b);
    assert_int_equal(b[0], 0);
    gkv_loader_epoch_order(3, 0, 0, 0, b);         /* nothing to order */
    assert_int_equal(gkv_loader_batch_seed(1, 2, 3),
                     gkv_loader_batch_seed(1, 2, 3));
    assert_true(gkv_loader_batch_seed(1, 2, 3) !=
                gkv_loader_batch_seed(1, 2, 4));
    assert_true(gkv_loader_batch_seed(1, 2, 3) !=
                gkv_loader_batch_seed(1, 3, 3));
    assert_true(gkv_loader_batch_seed(1, 2, 3) !=
                gkv_loader_batch_seed(2, 2, 3));
}

/* LOCAL, CLIENT and SERVER == the reference, every workers x prefetch. */
static void
same_batches(struct lfx *f, int nserv)
{
    static const int wk[3] = {1, 2, 3}, pf[3] = {1, 2, 4};
    size_t n = 0;

    serve(f, nserv, 20000, NULL);
    for (int a = 0; a < 3; a++)
        for (int p = 0; p < 3; p++) {
            gkv_loader_opts o;
            uint64_t e0 = (uint64_t)(a * 3 + p) * 2;

            /* LOCAL on every pair; the servers on the diagonal and on two
             * corners (each pair's batches are the same anyway) */
            o = lopts(f, GKV_LOADER_LOCAL, wk[a], pf[p]);
            n += expect_loader(f, &o, e0);
            if (nserv == 2 && a != p)
                continue;
            if (nserv == 1 && a != p && !(a == 0 && p == 2) &&
                !(a == 2 && p == 0))
                continue;
            o = lopts(f, GKV_LOADER_CLIENT, wk[a], pf[p]);
            n += expect_loader(f, &o, e0);
            o = lopts(f, GKV_LOADER_SERVER, wk[a], pf[p]);
            n += expect_loader(f, &o, e0);
        }
    /* out-edges, with replacement */
    for (int where = 0; where < 3; where++) {
        gkv_loader_opts o = lopts(f, where, 2, 2);

        o.dir = GKV_DIR_OUT;
        o.sample_flags = GKV_SAMPLE_REPLACE;
        n += expect_loader(f, &o, 40);
    }
    assert_true(n > 0);
}

static void
test_homo_1(void **state)
{
    struct lfx *f = *state;

    graph_make(f, 0);
    same_batches(f, 1);
}

static void
test_homo_2(void **state)
{
    struct lfx *f = *state;

    graph_make(f, 0);
    same_batches(f, 2);
}

static void
test_hetero_1(void **state)
{
    struct lfx *f = *state;

    graph_make(f, 1);
    same_batches(f, 1);
}

static void
test_hetero_2(void **state)
{
    struct lfx *f = *state;

    graph_make(f, 1);
    same_batches(f, 2);
}

/* The number of this process's threads. */
/* A loader of f's edge seeds (no label), num_neg negatives an edge, the
 * batch's own edges excluded. */
/* Sampling by an edge feature (edge_w_feat, DGL's mask= / prob=) through
 * the servers: CLIENT batches == gkv_client_sample_blocks()'s with the
 * same names, for 1 and 2 workers and prefetch 1 and 3, no masked-out
 * edge ever sampled; and what gkv_loader_new refuses. */
static void
test_wfeat(void **state)
{
    static const char *const wf[1] = {"train_mask"};
    static const int wk[2] = {1, 2}, pf[2] = {1, 3};
    struct lfx *f = *state;
    const char *bad[1];
    gkv_loader_opts o;
    gkv_loader *l = (gkv_loader *)1;
    size_t n = 0;

    graph_make(f, 0);
    serve(f, 1, 20000, NULL);
    for (int a = 0; a < 2; a++)
        for (int p = 0; p < 2; p++) {
            o = lopts(f, GKV_LOADER_CLIENT, wk[a], pf[p]);
            o.edge_w_feat = wf;
            n += expect_loader(f, &o, (uint64_t)(a * 2 + p) * 2);
        }
    assert_true(n > 0);
    /* out-edges (the client pulls the weights), with replacement */
    o = lopts(f, GKV_LOADER_CLIENT, 2, 2);
    o.edge_w_feat = wf;
    o.dir = GKV_DIR_OUT;
    o.sample_flags = GKV_SAMPLE_REPLACE;
    assert_true(expect_loader(f, &o, 9) > 0);
    /* what cannot: SERVER, LOCAL on an sgraph (no edge type names) */
    o = lopts(f, GKV_LOADER_LOCAL, 1, 1);
    o.edge_w_feat = wf;
    NET_FAILS(gkv_loader_new(&l, &o), GKV_EINVAL, "needs 'part'");
    assert_null(l);
    o = lopts(f, GKV_LOADER_SERVER, 1, 1);
    o.edge_w_feat = wf;
    NET_FAILS(gkv_loader_new(&l, &o), GKV_ENOTSUP, "SAMPLE_BATCH");
    assert_null(l);
    /* bad features, as gkv_client_sample_blocks finds them */
    o = lopts(f, GKV_LOADER_CLIENT, 1, 1);
    o.edge_w_feat = bad;
    bad[0] = "nosuch";
    NET_FAILS(gkv_loader_new(&l, &o), GKV_ENOTFOUND,
              "no tensor 'edge/_N:_E:_N/nosuch'");
    bad[0] = "ew";                      /* two floats a row */
    NET_FAILS(gkv_loader_new(&l, &o), GKV_EINVAL, "rows of 2 elements");
    bad[0] = "a b";
    NET_FAILS(gkv_loader_new(&l, &o), GKV_EINVAL, "edge_w_feat[0] ('a b'");
    bad[0] = "train_mask";
    o.sample_flags = GKV_SAMPLE_WEIGHTED;
    NET_FAILS(gkv_loader_new(&l, &o), GKV_EINVAL, "GKV_SAMPLE_WEIGHTED");
    assert_null(l);
}

/* LOCAL by an edge feature, on a one-partition config: a 64-node graph
 * (8 out-edges a node) with edge features w (f32, a third zeros), m (a u8
 * 0/1 mask) and neg (one negative). Every batch of an epoch (2 workers,
 * prefetch 3) == gkv_sample_blocks() on the partition's sgraph with the
 * feature's values, read here and converted, as edge_w; no zero-weight
 * edge sampled, though a uniform sample has some; and the refusals. */
static void
test_wfeat_local(void **state)
{
    enum { NV = 64, NE = NV * 8 };
    static const char *const feats[2] = {"w", "m"};
    struct lfx *f = *state;
    float w[NE], neg[NE], ref[NE];
    uint8_t m[NE];
    int64_t src[NE], dst[NE], seeds[NV];
    int fan[2] = {3, 2};
    gkv_part_feat pf[3];
    gkv_graph *g;
    gkv_part *p1;
    gkv_sgraph *sg;
    gkv_sampler *smp;
    gkv_loader_opts o = {0};
    gkv_loader *l;
    gkv_batch *b;
    const char *wf[1];
    char json1[4300];
    size_t uzero = 0;

    f->j.nmach = 1;
    GKVT_OK(gkv_graph_new_homo(&g, NV));
    for (int64_t e = 0; e < NE; e++) {
        src[e] = e % NV;
        dst[e] = (src[e] * (e / NV + 1) + 1 + e / NV) % NV;
        w[e] = e % 3 == 0 ? 0.0f : (float)(e % 7 + 1) * 0.5f;
        m[e] = e % 4 == 1;
        neg[e] = e == 17 ? -1.0f : 1.0f;
    }
    GKVT_OK(gkv_graph_add_edges(g, 0, src, dst, NULL, NE));
    pf[0] = pfeat(1, "_N:_E:_N", "w", w, GKV_F32, 0, 0, NE);
    pf[1] = pfeat(1, "_N:_E:_N", "m", m, GKV_U8, 0, 0, NE);
    pf[2] = pfeat(1, "_N:_E:_N", "neg", neg, GKV_F32, 0, 0, NE);
    gkvt_partition(g, f->j.dir, "onew", "onew", 1, 5, pf, 3, json1,
                   sizeof json1);
    gkv_graph_free(g);
    GKVT_OK(gkv_part_open(&p1, json1, 0, 0));
    GKVT_OK(gkv_part_sgraph(p1, &sg));
    GKVT_OK(gkv_sampler_new(&smp, sg, 1));
    for (int v = 0; v < NV; v++)
        seeds[v] = (v * 37) % NV;
    o.where = GKV_LOADER_LOCAL;
    o.part = p1;
    o.seeds = seeds;
    o.nseeds = NV;
    o.batch_size = 12;
    o.shuffle_seed = 3;
    o.nlayers = 2;
    o.nfan = 1;
    o.fanouts = fan;
    o.sample_seed = 8;
    o.workers = 2;
    o.prefetch = 3;
    o.edge_w_feat = wf;
    for (int k = 0; k < 2; k++) {
        size_t i = 0;
        char name[64];

        /* the reference's weights: the partition's rows, converted here */
        snprintf(name, sizeof name, "edge/_N:_E:_N/%s", feats[k]);
        if (k == 0) {
            GKVT_OK(gkv_tensor_read(gkv_part_store(p1), NULL, name, 0, NE,
                                    ref, sizeof ref));
        } else {
            GKVT_OK(gkv_tensor_read(gkv_part_store(p1), NULL, name, 0, NE,
                                    m, sizeof m));
            for (int e = 0; e < NE; e++)
                ref[e] = m[e];
        }
        wf[0] = feats[k];
        NET_OK(gkv_loader_new(&l, &o));
        for (;;) {
            size_t n;
            gkv_sample_opts so;
            int64_t *bs;
            const int64_t *sv[1];
            gkv_block wb[2];
            const float *ew[1] = {ref};
            int64_t ewlen[1] = {NE};

            NET_OK(gkv_loader_next(l, &b));
            if (b == NULL)
                break;
            bs = expect_head(&o, b, 0, i++, &n, &so);
            sv[0] = bs;
            GKVT_OK(gkv_sample_blocks(smp, sv, &n, fan, 1, 2, &so, wb));
            for (int j = 0; j < 2; j++)
                for (size_t x = 0; x < wb[j].edges[0].n; x++)
                    uzero += ref[wb[j].edges[0].eid[x]] == 0.0f;
            so.edge_w = ew;
            so.edge_w_len = ewlen;
            GKVT_OK(gkv_sample_blocks(smp, sv, &n, fan, 1, 2, &so, wb));
            assert_true(gkvt_blocks_same(b->blocks, wb, 2));
            for (int j = 0; j < 2; j++)
                for (size_t x = 0; x < b->blocks[j].edges[0].n; x++)
                    assert_true(ref[b->blocks[j].edges[0].eid[x]] > 0.0f);
            gkv_batch_release(b);
            free(bs);
        }
        assert_int_equal(i, gkv_loader_num_batches(l));
        gkv_loader_free(l);
    }
    assert_true(uzero > 0);
    /* refused when made: a name no sampling call takes (LOCAL checks
     * names as the client does), a negative value, a missing feature, two
     * sources of weights */
    wf[0] = "w#adagrad_s";
    NET_FAILS(gkv_loader_new(&l, &o), GKV_EINVAL, "'#'");
    wf[0] = "neg";
    NET_FAILS(gkv_loader_new(&l, &o), GKV_EINVAL,
              "'edge/_N:_E:_N/neg': edge ");
    assert_true(strstr(gkv_errmsg(), "has weight -1") != NULL);
    wf[0] = "nosuch";
    NET_FAILS(gkv_loader_new(&l, &o), GKV_ENOTFOUND,
              "no tensor 'edge/_N:_E:_N/nosuch'");
    wf[0] = "w";
    o.sample_flags = GKV_SAMPLE_WEIGHTED;
    NET_FAILS(gkv_loader_new(&l, &o), GKV_EINVAL, "one source of weights");
    assert_null(l);
    gkv_sampler_free(smp);
    gkv_sgraph_free(sg);
    gkv_part_close(p1);
}

/* Making a CLIENT loader that samples by an edge feature leaves the
 * caller's client alone: blocks it lent from an earlier sampling call
 * keep their bytes (the names were once checked by a sampling call on
 * that client, which reset its arena). */
static void
test_wfeat_leaves_client_results(void **state)
{
    static const char *const wf[1] = {"train_mask"};
    struct lfx *f = *state;
    gkv_block bl[2];
    const int64_t *sv[1];
    size_t sn[1] = {16};
    gkv_loader *l;

    graph_make(f, 0);
    serve(f, 1, 20000, NULL);
    for (int with = 0; with < 2; with++) {
        gkv_loader_opts o = lopts(f, GKV_LOADER_CLIENT, 1, 1);
        int64_t *save[2];
        size_t n[2];

        sv[0] = f->seeds;
        NET_OK(gkv_client_sample_blocks(f->c, sv, sn, f->fan, f->nfan, f->nl,
                                        NULL, bl));
        for (int j = 0; j < 2; j++) {
            n[j] = bl[j].nodes[0].num_src;
            save[j] = malloc(n[j] * 8 + 8);
            memcpy(save[j], bl[j].nodes[0].ids, n[j] * 8);
        }
        o.edge_w_feat = with ? wf : NULL;
        NET_OK(gkv_loader_new(&l, &o));
        gkv_loader_free(l);
        for (int j = 0; j < 2; j++) {
            assert_memory_equal(save[j], bl[j].nodes[0].ids, n[j] * 8);
            free(save[j]);
        }
    }
}

static gkv_loader_opts
elopts(struct lfx *f, int where, int workers, int prefetch, int num_neg)
{
    gkv_loader_opts o = lopts(f, where, workers, prefetch);

    o.edge_seeds = 1;
    o.seed_etype = f->setype;
    o.seeds = f->eseeds;
    o.nseeds = f->neseeds;
    o.label = NULL;
    o.num_neg = num_neg;
    o.exclude = GKV_EXCLUDE_SELF;
    return o;
}

/* Edge seeds: LOCAL and CLIENT == gkv_sample_edge_batch() on the
 * reference, workers 1 and 2 x prefetch 1 and 3 x num_neg 0 and 2 (the
 * servers on the diagonal); then the split of an edge mask. */
static void
same_edge_batches(struct lfx *f)
{
    static const int wk[2] = {1, 2}, pf[2] = {1, 3};
    const gkv_pbook *bk = gkv_part_book(f->part[0]);
    const char *mname = f->hetero ? "edge/user:clicks:item/train_mask"
                                  : "edge/_N:_E:_N/train_mask";
    gkv_loader_opts o;
    gkv_loader *l;
    uint8_t *mask;
    int64_t *want;
    size_t n = 0, nwant;

    serve(f, 1, 20000, NULL);
    assert_true(f->neseeds > LT_BS);
    for (int a = 0; a < 2; a++)
        for (int p = 0; p < 2; p++)
            for (int neg = 0; neg <= 2; neg += 2) {
                uint64_t e0 = (uint64_t)(a * 4 + p * 2 + neg / 2) * 2;

                o = elopts(f, GKV_LOADER_LOCAL, wk[a], pf[p], neg);
                n += expect_loader(f, &o, e0);
                if (a != p)
                    continue;
                o = elopts(f, GKV_LOADER_CLIENT, wk[a], pf[p], neg);
                n += expect_loader(f, &o, e0);
            }
    /* nothing excluded, out-edges */
    for (int where = 0; where < 2; where++) {
        o = elopts(f, where, 2, 2, 1);
        o.exclude = 0;
        o.dir = GKV_DIR_OUT;
        n += expect_loader(f, &o, 40);
    }
    assert_true(n > 0);
    /* the seeds from an edge mask: gkv_pbook_edge_split's */
    mask = malloc((size_t)f->nsedges + 1);
    assert_non_null(mask);
    GKVT_OK(gkv_tensor_read(f->whole, NULL, mname, 0,
                            (uint64_t)f->nsedges, mask,
                            (size_t)f->nsedges));
    o = elopts(f, GKV_LOADER_CLIENT, 2, 2, 2);
    o.seeds = NULL;
    o.nseeds = 0;
    o.seed_mask = mname;
    o.num_trainers = 2;
    o.rank = 1;
    NET_OK(gkv_loader_new(&l, &o));
    GKVT_OK(gkv_pbook_edge_split(bk, f->setype, mask, NULL,
                                 (size_t)f->nsedges, 2, 1, &want, &nwant));
    expect_split(f, o, l, want, nwant);
    gkv_free(want);
    free(mask);
}

static void
test_edge_homo(void **state)
{
    struct lfx *f = *state;

    graph_make(f, 0);
    same_edge_batches(f);
}

static void
test_edge_hetero(void **state)
{
    struct lfx *f = *state;

    gkv_loader_opts o;

    graph_make(f, 1);
    same_edge_batches(f);
    /* the clicks' reverses (clicked_by, by the servers' "reverse_eid"
     * feature) excluded too */
    o = elopts(f, GKV_LOADER_CLIENT, 2, 2, 2);
    o.exclude = GKV_EXCLUDE_SELF | GKV_EXCLUDE_REVERSE;
    o.reverse_etype = 2;
    assert_true(expect_loader(f, &o, 50) > 0);
}

/* Edge seeds gkv_loader_new refuses, each named. */
static void
test_edge_bad(void **state)
{
    struct lfx *f = *state;
    gkv_loader_opts o;
    gkv_loader *l = (gkv_loader *)1;
    int64_t s2[3];

    graph_make(f, 0);
    serve(f, 1, 20000, NULL);
    for (int where = 0; where < 2; where++) {
        o = elopts(f, where, 1, 1, 1);
        s2[0] = 3;
        s2[1] = f->nsedges;                 /* one past the last edge */
        o.seeds = s2;
        o.nseeds = 2;
        NET_FAILS(gkv_loader_new(&l, &o), GKV_ERANGE, "seeds[1]");
        assert_null(l);
        s2[1] = -1;
        NET_FAILS(gkv_loader_new(&l, &o), GKV_ERANGE, "seeds[1]");
        s2[1] = 7;
        s2[2] = 3;
        o.nseeds = 3;
        NET_FAILS(gkv_loader_new(&l, &o), GKV_EINVAL, "given twice");
        o = elopts(f, where, 1, 1, 1);
        o.label = f->label;
        NET_FAILS(gkv_loader_new(&l, &o), GKV_EINVAL, "with edge seeds");
        o = elopts(f, where, 1, 1, -1);
        NET_FAILS(gkv_loader_new(&l, &o), GKV_EINVAL, "num_neg is -1");
        o = elopts(f, where, 1, 1, 1);
        o.exclude = 0x10;
        NET_FAILS(gkv_loader_new(&l, &o), GKV_EINVAL, "exclude bits 0x10");
        o = elopts(f, where, 1, 1, 1);
        o.seed_etype = 1;
        NET_FAILS(gkv_loader_new(&l, &o), GKV_EINVAL, "seed_etype 1");
        o = elopts(f, where, 1, 1, 1);
        o.exclude |= GKV_EXCLUDE_REVERSE;   /* the same type: no reverse */
        NET_FAILS(gkv_loader_new(&l, &o), GKV_EINVAL, "reverse_etype 0");
        o = elopts(f, where, 1, 1, 1);
        o.edge_seeds = 2;
        NET_FAILS(gkv_loader_new(&l, &o), GKV_EINVAL, "edge_seeds is 2");
        o = elopts(f, where, 1, 1, 1);
        o.seeds = NULL;
        o.seed_mask = "node/_N/train_mask";   /* one per node, not edge */
        o.num_trainers = 1;
        NET_FAILS(gkv_loader_new(&l, &o),
                  where == 0 ? GKV_EINVAL : GKV_ESHAPE,
                  where == 0 ? "give the seeds" : "per edge of type 0");
    }
    o = elopts(f, GKV_LOADER_SERVER, 1, 1, 1);
    NET_FAILS(gkv_loader_new(&l, &o), GKV_ENOTSUP, "use GKV_LOADER_CLIENT");
    assert_null(l);
}

static int
threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Waits (up to 20 s) until 'want' of l's slots hold a batch; how many
 * do. */
static int
slots_full_wait(gkv_loader *l, int want)
{
    double t0 = tools__now_s();
    int n;

    do {
        n = 0;
        pthread_mutex_lock(&l->mu);
        for (int i = 0; i < l->prefetch; i++)
            n += l->slots[i].full;
        pthread_mutex_unlock(&l->mu);
        if (n < want)
            tools__sleep_ms(10);
    } while (n < want && tools__now_s() - t0 < 20.0);
    return n;
}

/* drop_last, an epoch left mid-way, the loader freed with batches in
 * flight and held (held ones stay valid after the free; no thread is
 * left), the seeds it reports. */
static void
test_epochs_and_free(void **state)
{
    struct lfx *f = *state;
    gkv_loader_opts o;
    gkv_loader *l;
    gkv_batch *b, *held[2];
    const int64_t *s;
    size_t n;
    int th0;

    graph_make(f, 0);
    serve(f, 1, 20000, NULL);
    th0 = threads_now();
    /* drop_last: 300 seeds, 64 a batch: 4 batches, not 5 */
    o = lopts(f, GKV_LOADER_LOCAL, 2, 2);
    o.flags = GKV_LOADER_DROP_LAST;
    assert_int_equal(expect_loader(f, &o, 3), 8);
    o.flags = GKV_LOADER_NO_SHUFFLE;
    assert_int_equal(expect_loader(f, &o, 0), 10);
    /* seeds as given; an epoch dropped after two batches */
    o = lopts(f, GKV_LOADER_CLIENT, 3, 4);
    NET_OK(gkv_loader_new(&l, &o));
    s = gkv_loader_seeds(l, &n);
    assert_int_equal(n, LT_SEEDS);
    assert_memory_equal(s, f->seeds, sizeof f->seeds);
    assert_int_equal(gkv_loader_num_batches(l), 5);
    for (size_t i = 0; i < 2; i++) {
        NET_OK(gkv_loader_next(l, &b));
        expect_batch(f, &o, b, 0, i);
        held[i] = b;
    }
    NET_OK(gkv_loader_epoch(l, 7));
    for (size_t i = 0; i < 5; i++) {
        NET_OK(gkv_loader_next(l, &b));
        expect_batch(f, &o, b, 7, i);
        gkv_batch_release(b);
    }
    NET_OK(gkv_loader_next(l, &b));
    assert_null(b);
    /* mid-epoch with the queue full and two batches held */
    NET_OK(gkv_loader_epoch(l, 8));
    NET_OK(gkv_loader_next(l, &b));
    assert_int_equal(slots_full_wait(l, 4), 4);   /* batches 1 .. 4 wait */
    gkv_loader_free(l);
    expect_batch(f, &o, b, 8, 0);
    expect_batch(f, &o, held[1], 0, 1);
    gkv_batch_release(b);
    gkv_batch_release(held[0]);
    gkv_batch_release(held[1]);
    gkv_batch_release(NULL);
    gkv_loader_free(NULL);
    /* freed at once, while its workers are making their first batches */
    for (int k = 0; k < 3; k++) {
        o = lopts(f, k, 3, 4);          /* LOCAL, CLIENT, SERVER */
        NET_OK(gkv_loader_new(&l, &o));
        gkv_loader_free(l);
    }
    assert_int_equal(threads_now(), th0);
}

/* The seeds of a mask: gkv_pbook_node_split's, read from the servers
 * (CLIENT) or from the store (LOCAL with a one-partition config); with
 * an sgraph there is no book to split by. */
static void
test_mask(void **state)
{
    struct lfx *f = *state;
    const gkv_pbook *bk;
    gkv_loader_opts o;
    gkv_loader *l;
    gkv_batch *b;
    gkv_graph *g;
    gkv_part *p1;
    gkv_part_feat pf;
    uint8_t mask[512], m1[512];
    int64_t *want;
    const int64_t *got;
    size_t nwant, ngot;
    char json1[4300];

    graph_make(f, 0);
    serve(f, 1, 20000, NULL);
    bk = gkv_part_book(f->part[0]);
    GKVT_OK(gkv_tensor_read(f->whole, NULL, "node/_N/train_mask", 0, 512,
                            mask, sizeof mask));
    for (int rank = 0; rank < 3; rank++) {
        o = lopts(f, GKV_LOADER_CLIENT, 2, 2);
        o.seeds = NULL;
        o.nseeds = 0;
        o.seed_mask = "node/_N/train_mask";
        o.num_trainers = 3;
        o.rank = rank;
        NET_OK(gkv_loader_new(&l, &o));
        GKVT_OK(gkv_pbook_node_split(bk, 0, mask, NULL, 512, 3, rank, &want,
                                     &nwant));
        /* its batches are those of the same seeds given */
        expect_split(f, o, l, want, nwant);
        gkv_free(want);
    }
    /* LOCAL with an sgraph: no book, so explicit seeds are needed */
    o = lopts(f, GKV_LOADER_LOCAL, 1, 1);
    o.seeds = NULL;
    o.seed_mask = "node/_N/train_mask";
    o.num_trainers = 1;
    NET_FAILS(gkv_loader_new(&l, &o), GKV_EINVAL, "give the seeds");
    assert_null(l);
    /* LOCAL on a one-partition config: the mask read from its store */
    GKVT_OK(gkv_graph_new_homo(&g, 64));
    for (int64_t v = 0; v < 64; v++) {
        int64_t s = v, d = (v * 5 + 1) % 64;
        GKVT_OK(gkv_graph_add_edges(g, 0, &s, &d, NULL, 1));
        m1[v] = v % 4 == 1;
    }
    pf = pfeat(0, "_N", "train_mask", m1, GKV_U8, 0, 0, 64);
    gkvt_partition(g, f->j.dir, "one", "one", 1, 5, &pf, 1, json1,
                   sizeof json1);
    GKVT_OK(gkv_part_open(&p1, json1, 0, 0));
    o = lopts(f, GKV_LOADER_LOCAL, 1, 1);
    o.sg = NULL;
    o.store = NULL;
    o.part = p1;
    o.seeds = NULL;
    o.seed_mask = "node/_N/train_mask";
    o.num_trainers = 2;
    o.rank = 1;
    o.nfeats = o.nefeats = 0;
    o.label = NULL;
    o.nfan = 1;
    NET_OK(gkv_loader_new(&l, &o));
    GKVT_OK(gkv_tensor_read(gkv_part_store(p1), NULL, "node/_N/train_mask",
                            0, 64, m1, 64));
    GKVT_OK(gkv_pbook_node_split(gkv_part_book(p1), 0, m1, NULL, 64, 2, 1,
                                 &want, &nwant));
    got = gkv_loader_seeds(l, &ngot);
    assert_int_equal(ngot, nwant);
    assert_memory_equal(got, want, nwant * 8);
    NET_OK(gkv_loader_next(l, &b));
    assert_non_null(b);
    assert_int_equal(b->nseeds, nwant < LT_BS ? nwant : LT_BS);
    assert_int_equal(b->blocks[1].nodes[0].num_dst, b->nseeds);
    gkv_batch_release(b);
    gkv_loader_free(l);
    gkv_free(want);
    gkv_part_close(p1);
    gkv_graph_free(g);
}

/* A server killed mid-epoch: the batch that needs it fails within the
 * client's timeout with GKV_ETIMEDOUT naming it, later calls return (no
 * hang), and once it is back a new loader goes on. */
static void
test_server_killed(void **state)
{
    struct lfx *f = *state;
    struct gkvt_proc *srv[2];
    gkv_server_info si;
    gkv_loader_opts o;
    gkv_loader *l;
    gkv_batch *b;
    gkv_err rc = GKV_OK;
    char name[320];
    double t0, t1;

    graph_make(f, 0);
    serve(f, 1, 3000, srv);
    NET_OK(gkv_client_server_info(f->c, 1, &si));
    snprintf(name, sizeof name, "%s", si.addr);
    for (int k = 0; k < 2; k++) {
        /* 6 workers: 6 clones whose leave waits on the dead server */
        o = lopts(f, k == 0 ? GKV_LOADER_CLIENT : GKV_LOADER_SERVER, 6, 2);
        NET_OK(gkv_loader_new(&l, &o));
        NET_OK(gkv_loader_next(l, &b));
        expect_batch(f, &o, b, 0, 0);
        gkv_batch_release(b);
        gkvt_proc_kill(srv[1]);
        /* batches made before the kill may still come; one then fails */
        t0 = tools__now_s();
        for (size_t i = 1; i < gkv_loader_num_batches(l); i++) {
            rc = gkv_loader_next(l, &b);
            gkv_batch_release(b);
            if (rc != GKV_OK)
                break;
        }
        t1 = tools__now_s();
        if (rc != GKV_ETIMEDOUT)
            fail_msg("after the kill: %s (%s)", gkv_err_name(rc),
                     gkv_errmsg());
        gkvt_expect_msg(gkv_errmsg(), name);
        fprintf(stderr, "loader_test: %s after the kill, %.1f s: %s\n",
                gkv_err_name(rc), t1 - t0, gkv_errmsg());
        assert_true(t1 - t0 < 3 * 3.0 + 2.0);
        /* the loader is still usable: the next calls return */
        t0 = tools__now_s();
        for (int i = 0; i < 10; i++) {
            b = NULL;
            rc = gkv_loader_next(l, &b);
            gkv_batch_release(b);
            if (rc == GKV_OK && b == NULL)
                break;
        }
        assert_true(tools__now_s() - t0 < 10 * 3.0 + 2.0);
        /* the epoch is over, so no worker is making a batch: the free
         * waits on the clones' leaves, together, not one after another */
        t0 = tools__now_s();
        gkv_loader_free(l);
        t1 = tools__now_s();
        fprintf(stderr, "loader_test: freed after the kill in %.1f s\n",
                t1 - t0);
        if (t1 - t0 > 3.0 + 2.0)
            fail_msg("gkv_loader_free took %.1f s after the kill (the "
                     "client timeout is 3 s)", t1 - t0);
        /* back again: a new loader goes on */
        srv[1] = gkvt_server_try(&f->j, 1, 0, NULL);
        assert_non_null(srv[1]);
        NET_OK(gkv_loader_new(&l, &o));
        for (size_t i = 0; i < 2; i++) {
            rc = gkv_loader_next(l, &b);
            NET_OK(rc);
            expect_batch(f, &o, b, 0, i);
            gkv_batch_release(b);
        }
        gkv_loader_free(l);
    }
}

/* Allocation failures anywhere in gkv_loader_new (LOCAL, CLIENT, SERVER)
 * and in the batches: GKV_ENOMEM or a working loader, nothing leaked. */
static void
test_alloc_faults(void **state)
{
    static const char *const wf[1] = {"train_mask"};
    struct lfx *f = *state;
    long live0;
    int ok;
    size_t uz = 0;

    graph_make(f, 0);
    serve(f, 1, 20000, NULL);
    /* a first loader of each mode (where 3: CLIENT, by an edge feature)
     * fills the caches of the store and the client, which stay */
    for (int where = 0; where < 4; where++) {
        gkv_loader_opts o = lopts(f, where % 3 + (where == 3), 2, 2);
        o.edge_w_feat = where == 3 ? wf : NULL;
        assert_int_equal(expect_loader(f, &o, 0), 10);
    }
    live0 = gkvt_alloc_live();
    for (int where = 0; where < 4; where++) {
        ok = 0;     /* two loaders that made a batch, in each mode */
        for (long n = 0; n < 400; n++) {
            gkv_loader_opts o = lopts(f, where % 3 + (where == 3), 2, 2);
            gkv_loader *l = NULL;
            gkv_batch *b = NULL;
            gkv_err rc;

            o.edge_w_feat = where == 3 ? wf : NULL;
            gkvt_alloc_fail_at(n);
            rc = gkv_loader_new(&l, &o);
            if (rc == GKV_OK) {
                rc = gkv_loader_next(l, &b);
                if (rc == GKV_OK && b != NULL) {
                    gkvt_alloc_fail_at(-1);
                    if (where == 3)
                        expect_wbatch(f, &o, b, 0, 0, &uz);
                    else
                        expect_batch(f, &o, b, 0, 0);
                }
                gkv_batch_release(b);
                gkv_loader_free(l);
            } else {
                assert_null(l);
            }
            gkvt_alloc_fail_at(-1);
            if (rc != GKV_OK && rc != GKV_ENOMEM)
                fail_msg("allocation %ld failed: %s (%s)", n,
                         gkv_err_name(rc), gkv_errmsg());
            if (gkvt_alloc_live() != live0)
                fail_msg("where %d, allocation %ld (%s): %ld blocks live, "
                         "%ld before", where, n, gkv_err_name(rc),
                         gkvt_alloc_live(), live0);
            if (rc == GKV_OK && b != NULL && ++ok >= 2)
                break;
        }
    }
}

/* A bad loader option: gkv_loader_new fails with 'want', its message
 * holding 'text', and *out NULL. */
#define BAD(o_, want, text) do { gkv_loader *l_ = (gkv_loader *)&l_; \
    NET_FAILS(gkv_loader_new(&l_, &(o_)), (want), (text)); \
    assert_null(l_); \
} while (0)

/* Bad tensors: kind 0 a feature (after a good one), 1 the label, 2 an
 * edge feature. */
static const struct bad_tensor {
    int kind, type;
    const char *name;
    gkv_err want;
    const char *text;
    int client_only;            /* edge counts: from the book */
} bad_tensors[] = {
    /* unknown tensors */
    {0, 1, "node/item/nope", GKV_ENOTFOUND, "node/item/nope", 0},
    {1, 0, "node/user/nolabel", GKV_ENOTFOUND, "node/user/nolabel", 0},
    {2, 0, "edge/user:follows:user/none", GKV_ENOTFOUND,
     "edge/user:follows:user/none", 0},
    /* types out of range */
    {0, 2, "node/user/feat", GKV_EINVAL, "node type 2", 0},
    {2, 3, "edge/user:follows:user/ew", GKV_EINVAL, "edge type 3", 0},
    /* rows that do not cover their type: item rows for users, clicks'
     * rows for follows */
    {0, 0, "node/item/feat", GKV_ERANGE, "do not cover", 0},
    {2, 0, "edge/user:clicks:item/reverse_eid", GKV_ERANGE, "do not cover",
     1},
    /* a label of the wrong row count (item rows for user seeds) */
    {1, 0, "node/item/feat", GKV_ESHAPE, "node/item/feat", 0},
};

static void
test_bad(void **state)
{
    struct lfx *f = *state;
    gkv_loader_opts o, good;
    gkv_typed_tensor t[2];
    int64_t s2[3];
    int fan[6];

    graph_make(f, 1);
    serve(f, 1, 20000, NULL);
    for (int where = 0; where < 2; where++) {
        good = lopts(f, where == 0 ? GKV_LOADER_LOCAL : GKV_LOADER_CLIENT,
                     1, 1);
        for (size_t k = 0; k < sizeof bad_tensors / sizeof bad_tensors[0];
             k++) {
            const struct bad_tensor *bt = &bad_tensors[k];

            if (bt->client_only && where == 0)
                continue;
            o = good;
            t[0] = f->feats[0];
            t[1].type = bt->type;
            t[1].name = bt->name;
            if (bt->kind == 0) {
                o.feats = t;
                o.nfeats = 2;           /* a good one, then this one */
            } else if (bt->kind == 1) {
                o.label = bt->name;
            } else {
                o.efeats = &t[1];
            }
            BAD(o, bt->want, bt->text);
        }
        /* fanouts */
        o = good;
        o.nfan = 2;
        BAD(o, GKV_EINVAL, "nfan is 2");
        o = good;
        memcpy(fan, f->fan, sizeof fan);
        fan[4] = -2;
        o.fanouts = fan;
        BAD(o, GKV_EINVAL, "below -1");
        o = good;
        o.fanouts = NULL;
        BAD(o, GKV_EINVAL, "no fanouts");
        o = good;
        o.nlayers = 0;
        BAD(o, GKV_EINVAL, "nlayers is 0");
        /* seeds */
        o = good;
        s2[0] = 5;
        s2[1] = GKVT_UI_USERS;
        o.seeds = s2;
        o.nseeds = 2;
        BAD(o, GKV_ERANGE, "seeds[1] = 1024");
        s2[1] = -1;
        BAD(o, GKV_ERANGE, "seeds[1] = -1");
        s2[1] = 9;
        s2[2] = 5;
        o.nseeds = 3;
        BAD(o, GKV_EINVAL, "seed 5 is given twice (seeds[0] and seeds[2])");
        o = good;
        o.seeds = NULL;
        BAD(o, GKV_EINVAL, "no seeds");
        o = good;
        o.seed_ntype = 2;
        BAD(o, GKV_EINVAL, "seed_ntype 2");
        /* masks */
        o = good;
        o.seeds = NULL;
        o.seed_mask = "node/user/feat";         /* f32 x 4 */
        o.num_trainers = 1;
        if (where == 0) {   /* LOCAL with an sgraph: no book */
            BAD(o, GKV_EINVAL, "give the seeds");
        } else {
            BAD(o, GKV_ESHAPE, "node/user/feat");
            o.seed_mask = "node/user/label";    /* i64 */
            BAD(o, GKV_ESHAPE, "u8, one element per node");
            o.seed_ntype = 1;                   /* a user mask for items */
            o.label = NULL;
            o.seed_mask = "node/user/train_mask";
            BAD(o, GKV_ESHAPE, "node/user/train_mask");
            o.seed_ntype = 0;
            o.seed_mask = "node/user/none";
            BAD(o, GKV_ENOTFOUND, "node/user/none");
            o.seed_mask = "node/user/train_mask";
            o.num_trainers = 2;
            o.rank = 2;
            BAD(o, GKV_EINVAL, "train_mask");
        }
        /* sizes, flags, modes */
        o = good;
        o.batch_size = 0;
        BAD(o, GKV_EINVAL, "batch_size is 0");
        o = good;
        o.flags = 0x80;
        BAD(o, GKV_EINVAL, "unknown flags");
        o = good;
        o.sample_flags = 0x80;
        BAD(o, GKV_EINVAL, "unknown sample_flags");
        o = good;
        o.dir = 7;
        BAD(o, GKV_EINVAL, "dir 7");
        o = good;
        o.prefetch = -1;
        BAD(o, GKV_EINVAL, "prefetch -1");
        o = good;
        o.workers = 1000;
        BAD(o, GKV_EINVAL, "workers 1000");
#ifndef GKV_HAVE_CUDA
        o = good;
        o.flags = GKV_LOADER_PINNED;
        BAD(o, GKV_ENOTSUP, "CUDA");
#else
        /* with a device: pinned batches are the same bytes; without one
         * (or without the runtime linked: the emulated-GPU build),
         * GKV_ENOTSUP at once */
        o = good;
        o.flags = GKV_LOADER_PINNED;
        {
            gkv_loader *l = NULL;
            gkv_batch *b;
            gkv_err rc = gkv_loader_new(&l, &o);

            if (rc == GKV_ENOTSUP) {
                gkvt_expect_msg(gkv_errmsg(), "GKV_LOADER_PINNED");
                assert_null(l);
            } else {
                NET_OK(rc);
                NET_OK(gkv_loader_next(l, &b));
                gkv_loader_free(l);
                expect_batch(f, &o, b, 0, 0);
                gkv_batch_release(b);
            }
        }
#endif
    }
    /* a mode without its source */
    o = lopts(f, GKV_LOADER_LOCAL, 1, 1);
    o.sg = NULL;
    BAD(o, GKV_EINVAL, "neither was given");
    o = lopts(f, GKV_LOADER_LOCAL, 1, 1);
    o.part = f->part[0];
    BAD(o, GKV_EINVAL, "not both");
    o.sg = NULL;
    BAD(o, GKV_EINVAL, "one-partition config");   /* partition 0 of 2 */
    o = lopts(f, GKV_LOADER_LOCAL, 1, 1);
    o.store = NULL;
    BAD(o, GKV_EINVAL, "'store', which is NULL");
    o = lopts(f, GKV_LOADER_CLIENT, 1, 1);
    o.client = NULL;
    BAD(o, GKV_EINVAL, "CLIENT needs 'client'");
    o = lopts(f, GKV_LOADER_SERVER, 1, 1);
    o.client = NULL;
    BAD(o, GKV_EINVAL, "SERVER needs 'client'");
    o.where = 3;
    BAD(o, GKV_EINVAL, "'where' is 3");
    NET_FAILS(gkv_loader_new(NULL, &o), GKV_EINVAL, "NULL out");
    /* SERVER: more layers than a batch sampled on the servers takes,
     * refused here rather than by every batch */
    {
        int fan65[65];

        for (int i = 0; i < 65; i++)
            fan65[i] = 1;
        o = lopts(f, GKV_LOADER_SERVER, 1, 1);
        o.nlayers = 65;
        o.nfan = 1;
        o.fanouts = fan65;
        o.nefeats = 0;
        BAD(o, GKV_EINVAL, "nlayers is 65");
        o.where = GKV_LOADER_CLIENT;    /* sampled here: no such limit */
        {
            gkv_loader *l = NULL;

            NET_OK(gkv_loader_new(&l, &o));
            gkv_loader_free(l);
        }
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order),
        cmocka_unit_test_setup_teardown(test_homo_1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_homo_2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hetero_1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hetero_2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edge_homo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edge_hetero, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edge_bad, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wfeat, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wfeat_leaves_client_results,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_wfeat_local, setup, teardown),
        cmocka_unit_test_setup_teardown(test_epochs_and_free, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_mask, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_killed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_faults, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
