/* gpu_test.c - gpu/: the shared generator (base/gen.h) against the CPU
 * sampler, a host model of the GPU block pipeline against
 * gkv_sample_blocks(), the hot-set choice against a reference, clean errors
 * without a device, and (only where a CUDA device is visible) gathers
 * byte for byte against gkv_tensor_pull() and GPU blocks against CPU
 * blocks.
 *
 * The generator tests run in every build, CUDA or not: gen.h is the code
 * the device kernels run, compiled here as host C, so they are the
 * evidence that the device computes the CPU's picks. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "gkvt.h"
#include "gkvt_graph.h"
#include "graph/gkv_graph.h"
#include "graph/gkv_sample.h"
#include "base/gen.h"
#ifdef GKV_HAVE_CUDA
#include "gpu/gkv_gpu.h"
#endif

#define N_OF(a) (sizeof (a) / sizeof (a)[0])

/* ---- graphs ---------------------------------------------------------------- */

/* An R-MAT graph with float weights: about a quarter of them 0 and the
 * rest in (0, 4], so weighted sampling sees zero weights. */
static gkv_graph *
rmat_weighted(int scale, uint64_t seed)
{
    gkv_rmat_spec sp;
    gkv_graph *g;
    int64_t n, *src, *dst;
    float *w;
    uint64_t st = seed ^ 0x5151;

    memset(&sp, 0, sizeof sp);
    sp.scale = scale;
    sp.seed = seed;
    sp.edge_factor = 8;
    n = sp.edge_factor << scale;
    src = malloc((size_t)n * sizeof *src);
    dst = malloc((size_t)n * sizeof *dst);
    w = malloc((size_t)n * sizeof *w);
    assert_non_null(src);
    assert_non_null(dst);
    assert_non_null(w);
    GKVT_OK(gkv_rmat_edges(&sp, 0, n, src, dst));
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = tools__splitmix64(&st);
        w[i] = (r & 3) == 0 ? 0.0f : (float)((r >> 8) % 4096 + 1) / 1024.0f;
    }
    GKVT_OK(gkv_graph_new_homo(&g, (int64_t)1 << scale));
    GKVT_OK(gkv_graph_add_edges(g, 0, src, dst, w, (size_t)n));
    free(src);
    free(dst);
    free(w);
    return g;
}

/* ---- the generator against gkv_sample_neighbors --------------------------- */

/* The expected picks of column c of 'a' (no exclusions) as column offsets;
 * returns their number. out holds at least the column's degree or k. */
static int64_t
gen_picks(const gkv_adj *a, int64_t v, uint64_t seed, int layer, int k,
          unsigned flags, int64_t *out)
{
    int64_t c = v - a->col_lo, b = a->indptr[c], d = a->indptr[c + 1] - b;
    int replace = (flags & GKV_SAMPLE_REPLACE) != 0;
    int weighted = (flags & GKV_SAMPLE_WEIGHTED) != 0;
    int64_t z = weighted ? gkv_gen_positive(a->w + b, d) : 0;
    int64_t np = gkv_gen_npicks(d, z, k, replace, weighted);
    uint64_t bv = gkv_gen_node(gkv_gen_key(seed, layer, 0), v);

    if (weighted)
        gkv_gen_weighted(bv, a->w + b, d, z, k, replace, out);
    else
        gkv_gen_uniform(bv, d, k, replace, out);
    return np;
}

/* Samples every column of the sgraph (etype 0, IN) with
 * gkv_sample_neighbors and checks each seed's edges, in order, against
 * gen.h's picks. Returns the number of edges compared. */
static size_t
compare_neighbors(gkv_sampler *s, const gkv_adj *a, uint64_t seed, int layer,
                  int k, unsigned flags)
{
    size_t nseed = (size_t)(a->col_hi - a->col_lo), q = 0;
    int64_t *seeds = malloc(nseed * sizeof *seeds + 8), *pk;
    const int64_t *sp[1] = {seeds};
    size_t ns[1] = {nseed};
    int64_t maxd = 0;
    gkv_sample_opts o;
    gkv_sample_edges e;

    for (size_t i = 0; i < nseed; i++) {
        int64_t d = a->indptr[i + 1] - a->indptr[i];
        seeds[i] = a->col_lo + (int64_t)i;
        maxd = d > maxd ? d : maxd;
    }
    pk = malloc((size_t)(maxd > k ? maxd : k) * sizeof *pk + 8);
    memset(&o, 0, sizeof o);
    o.seed = seed;
    o.flags = flags;
    if (gkv_sample_neighbors(s, sp, ns, &k, 1, layer, &o, &e) != GKV_OK)
        fail_msg("gkv_sample_neighbors: %s", gkv_sampler_errmsg(s));
    for (size_t i = 0; i < nseed; i++) {
        int64_t v = seeds[i], b = a->indptr[i];
        int64_t np = gen_picks(a, v, seed, layer, k, flags, pk);
        for (int64_t t = 0; t < np; t++, q++) {
            int64_t p = b + pk[t];
            int64_t eid = a->eids != NULL ? a->eids[p] : a->eid_lo + p;
            if (q >= e.n)
                fail_msg("seed %llu layer %d k %d flags %u: node %lld: CPU "
                         "has %zu edges, gen.h more", (unsigned long long)seed,
                         layer, k, flags, (long long)v, e.n);
            if (e.dst[q] != v || e.src[q] != a->indices[p] || e.eid[q] != eid)
                fail_msg("seed %llu layer %d k %d flags %u: node %lld pick "
                         "%lld: CPU (%lld -> %lld, e%lld), gen.h (%lld -> "
                         "%lld, e%lld)", (unsigned long long)seed, layer, k,
                         flags, (long long)v, (long long)t,
                         (long long)e.src[q], (long long)e.dst[q],
                         (long long)e.eid[q], (long long)a->indices[p],
                         (long long)v, (long long)eid);
        }
    }
    if (q != e.n)
        fail_msg("seed %llu layer %d k %d flags %u: CPU has %zu edges, gen.h "
                 "%zu", (unsigned long long)seed, layer, k, flags, e.n, q);
    free(pk);
    free(seeds);
    return q;
}

static const unsigned modes[] = {
    0, GKV_SAMPLE_REPLACE, GKV_SAMPLE_WEIGHTED,
    GKV_SAMPLE_WEIGHTED | GKV_SAMPLE_REPLACE
};

static void
test_gen_fixed(void **state)
{
    static const int ks[] = {-1, 0, 1, 2, 3, 5};
    gkv_graph *g;
    gkv_sgraph *sg;
    gkv_sampler *s;
    gkv_adj a;
    size_t n = 0;

    (void)state;
    GKVT_OK(gkv_graph_fixed_homo(&g));
    GKVT_OK(gkv_sgraph_from_graph(&sg, g, 0, 1));
    GKVT_OK(gkv_sgraph_adj(sg, 0, GKV_DIR_IN, &a));
    assert_non_null(a.w);
    GKVT_OK(gkv_sampler_new(&s, sg, 1));
    for (uint64_t seed = 0; seed < 40; seed++)
        for (int layer = 0; layer < 3; layer++)
            for (size_t ki = 0; ki < N_OF(ks); ki++)
                for (size_t m = 0; m < N_OF(modes); m++)
                    n += compare_neighbors(s, &a, seed * 7919 + 3, layer,
                                           ks[ki], modes[m]);
    /* the hand-checked facts: node 1's edge e12 weighs 0 and is never
     * drawn; the whole run compared real edges */
    assert_true(n > 10000);
    gkv_sampler_free(s);
    gkv_sgraph_free(sg);
    gkv_graph_free(g);
}

static void
test_gen_rmat(void **state)
{
    static const int ks[] = {1, 3, 10, 15, 25, 70, 100, -1};
    uint64_t seed = gkvt_seed();
    gkv_graph *g = rmat_weighted(10, seed);
    gkv_sgraph *sg;
    gkv_sampler *s;
    gkv_adj a;
    size_t n = 0;

    (void)state;
    GKVT_OK(gkv_sgraph_from_graph(&sg, g, 0, 1));
    GKVT_OK(gkv_sgraph_adj(sg, 0, GKV_DIR_IN, &a));
    GKVT_OK(gkv_sampler_new(&s, sg, 2));
    for (size_t ki = 0; ki < N_OF(ks); ki++)
        for (size_t m = 0; m < N_OF(modes); m++)
            n += compare_neighbors(s, &a, seed + ki, (int)(ki % 3), ks[ki],
                                   modes[m]);
    assert_true(n > 100000);
    gkv_sampler_free(s);
    gkv_sgraph_free(sg);
    gkv_graph_free(g);
}

/* Columns made to reach the corners: a heavy weight that makes the
 * rejection loop give up (the fallback over unchosen positions), all-zero
 * and single-positive columns, large k (the CPU's hash-set Floyd). */
static void
test_gen_corners(void **state)
{
    enum { NC = 5, DEG = 200 };
    int64_t indptr[NC + 1], *ix = malloc(NC * DEG * sizeof *ix);
    float *w = malloc(NC * DEG * sizeof *w);
    int64_t nn = NC * DEG;
    gkv_sgraph *sg;
    gkv_sampler *s;
    gkv_adj a;
    static const int ks[] = {1, 19, 65, 100, 150, 199, 200, -1};
    int ntypes_src[1] = {0}, ntypes_dst[1] = {0};

    (void)state;
    for (int c = 0; c <= NC; c++)
        indptr[c] = (int64_t)c * DEG;
    for (int64_t p = 0; p < NC * DEG; p++) {
        int c = (int)(p / DEG), i = (int)(p % DEG);
        ix[p] = (p * 37) % nn;
        switch (c) {
        case 0: w[p] = i == 0 ? 1e30f : 1.0f; break;        /* fallback */
        case 1: w[p] = 0.0f; break;                          /* z = 0 */
        case 2: w[p] = i == 150 ? 2.5f : 0.0f; break;        /* z = 1 */
        case 3: w[p] = (i % 10 == 0) ? 1e20f : 1e-20f; break;
        default: w[p] = (float)(i % 7); break;
        }
    }
    memset(&a, 0, sizeof a);
    a.col_lo = 0;
    a.col_hi = NC;
    a.indptr = indptr;
    a.indices = ix;
    a.w = w;
    GKVT_OK(gkv_sgraph_new(&sg, 1, &nn, 1, ntypes_src, ntypes_dst));
    GKVT_OK(gkv_sgraph_set_adj(sg, 0, GKV_DIR_IN, &a));
    GKVT_OK(gkv_sampler_new(&s, sg, 1));
    for (uint64_t seed = 1; seed < 6; seed++)
        for (size_t ki = 0; ki < N_OF(ks); ki++)
            for (size_t m = 0; m < N_OF(modes); m++)
                compare_neighbors(s, &a, seed, (int)seed % 2, ks[ki],
                                  modes[m]);
    gkv_sampler_free(s);
    gkv_sgraph_free(sg);
    free(ix);
    free(w);
}

/* ---- a host model of the GPU block pipeline ----------------------------- */

/* One block as plain arrays (host). */
struct blk {
    int64_t *ids, *src, *dst, *eid;
    size_t   nsrc, ndst, ne;
};

static void
blk_free(struct blk *b)
{
    free(b->ids);
    free(b->src);
    free(b->dst);
    free(b->eid);
    memset(b, 0, sizeof *b);
}

/* What gpu/sample.cu's hop does, step by step on the host: counts, an
 * exclusive scan, picks (gen.h), first appearance by minimum (dst index i,
 * or n_dst + edge position), flags, their scan, labels. */
static void
model_hop(const gkv_adj *a, int64_t num_nodes, uint64_t seed, int layer,
          int k, unsigned flags, const int64_t *front, size_t nd,
          struct blk *b)
{
    int replace = (flags & GKV_SAMPLE_REPLACE) != 0;
    int weighted = (flags & GKV_SAMPLE_WEIGHTED) != 0;
    uint64_t key = gkv_gen_key(seed, layer, 0);
    int64_t *off = malloc((nd + 1) * sizeof *off), *gsrc, *rank;
    uint64_t *first = malloc((size_t)num_nodes * sizeof *first);
    int64_t *lab = malloc((size_t)num_nodes * sizeof *lab);
    size_t ne = 0, nn;

    for (size_t i = 0; i < nd; i++) {
        int64_t c = front[i] - a->col_lo, bb = a->indptr[c];
        int64_t d = a->indptr[c + 1] - bb;
        int64_t z = weighted ? gkv_gen_positive(a->w + bb, d) : 0;
        off[i] = (int64_t)ne;
        ne += (size_t)gkv_gen_npicks(d, z, k, replace, weighted);
    }
    off[nd] = (int64_t)ne;
    gsrc = malloc(ne * sizeof *gsrc + 8);
    b->src = malloc(ne * sizeof *b->src + 8);
    b->dst = malloc(ne * sizeof *b->dst + 8);
    b->eid = malloc(ne * sizeof *b->eid + 8);
    rank = malloc((ne + 1) * sizeof *rank);
    for (size_t i = 0; i < nd; i++) {
        int64_t c = front[i] - a->col_lo, bb = a->indptr[c];
        int64_t d = a->indptr[c + 1] - bb, o = off[i];
        uint64_t bv = gkv_gen_node(key, front[i]);
        if (weighted)
            gkv_gen_weighted(bv, a->w + bb, d, gkv_gen_positive(a->w + bb, d),
                             k, replace, gsrc + o);
        else
            gkv_gen_uniform(bv, d, k, replace, gsrc + o);
        for (int64_t q = o; q < off[i + 1]; q++) {
            int64_t p = bb + gsrc[q];
            gsrc[q] = a->indices[p];
            b->eid[q] = a->eids != NULL ? a->eids[p] : a->eid_lo + p;
            b->dst[q] = (int64_t)i;
        }
    }
    memset(first, 0xff, (size_t)num_nodes * sizeof *first);
    for (size_t i = 0; i < nd; i++) {
        first[front[i]] = i;
        lab[front[i]] = (int64_t)i;
    }
    for (size_t j = 0; j < ne; j++)
        if (nd + j < first[gsrc[j]])
            first[gsrc[j]] = nd + j;
    nn = 0;
    for (size_t j = 0; j < ne; j++) {
        rank[j] = (int64_t)nn;
        nn += first[gsrc[j]] == nd + j;
    }
    b->ndst = nd;
    b->nsrc = nd + nn;
    b->ne = ne;
    b->ids = malloc((nd + nn) * sizeof *b->ids + 8);
    memcpy(b->ids, front, nd * sizeof *front);
    for (size_t j = 0; j < ne; j++)
        if (first[gsrc[j]] == nd + j) {
            lab[gsrc[j]] = (int64_t)nd + rank[j];
            b->ids[nd + (size_t)rank[j]] = gsrc[j];
        }
    for (size_t j = 0; j < ne; j++)
        b->src[j] = lab[gsrc[j]];
    free(off);
    free(gsrc);
    free(rank);
    free(first);
    free(lab);
}

static void
model_blocks(const gkv_adj *a, int64_t num_nodes, uint64_t seed,
             unsigned flags, const int64_t *seeds, size_t nseeds,
             const int *fan, int nl, struct blk *out)
{
    const int64_t *front = seeds;
    size_t nd = nseeds;

    for (int hop = 0; hop < nl; hop++) {
        int l = nl - 1 - hop;
        model_hop(a, num_nodes, seed, hop, fan[l], flags, front, nd, &out[l]);
        front = out[l].ids;
        nd = out[l].nsrc;
    }
}

/* Asserts host block 'h' equals CPU block 'c' (homogeneous). */
static void
blk_expect(const struct blk *h, const gkv_block *c, int l, const char *what)
{
    const gkv_block_nodes *nd = &c->nodes[0];
    const gkv_sample_edges *e = &c->edges[0];

    if (h->nsrc != nd->num_src || h->ndst != nd->num_dst || h->ne != e->n)
        fail_msg("%s block %d: %zu/%zu nodes, %zu edges; CPU %zu/%zu, %zu",
                 what, l, h->nsrc, h->ndst, h->ne, nd->num_src, nd->num_dst,
                 e->n);
    for (size_t i = 0; i < h->nsrc; i++)
        if (h->ids[i] != nd->ids[i])
            fail_msg("%s block %d: ids[%zu] = %lld, CPU %lld", what, l, i,
                     (long long)h->ids[i], (long long)nd->ids[i]);
    for (size_t j = 0; j < h->ne; j++)
        if (h->src[j] != e->src[j] || h->dst[j] != e->dst[j] ||
            h->eid[j] != e->eid[j])
            fail_msg("%s block %d edge %zu: (%lld -> %lld, e%lld), CPU "
                     "(%lld -> %lld, e%lld)", what, l, j, (long long)h->src[j],
                     (long long)h->dst[j], (long long)h->eid[j],
                     (long long)e->src[j], (long long)e->dst[j],
                     (long long)e->eid[j]);
}

static void
test_model_blocks(void **state)
{
    static const int fans[][3] = {{15, 10, 0}, {5, -1, 0}, {3, 4, 2},
                                  {0, 2, 0}};
    static const int nls[] = {2, 2, 3, 2};
    uint64_t seed = gkvt_seed(), st = seed;
    gkv_graph *g = rmat_weighted(11, seed + 1);
    gkv_sgraph *sg;
    gkv_sampler *s;
    gkv_adj a;
    int64_t N = (int64_t)1 << 11, *seeds = gkvt_distinct_seeds(N, &st);

    (void)state;
    GKVT_OK(gkv_sgraph_from_graph(&sg, g, 0, 1));
    GKVT_OK(gkv_sgraph_adj(sg, 0, GKV_DIR_IN, &a));
    GKVT_OK(gkv_sampler_new(&s, sg, 2));
    for (size_t f = 0; f < N_OF(nls); f++)
        for (size_t m = 0; m < N_OF(modes); m++) {
            const int64_t *sp[1] = {seeds};
            size_t ns[1] = {f == 3 ? 1 : 300};
            gkv_sample_opts o;
            gkv_block cb[3];
            struct blk hb[3];
            memset(&o, 0, sizeof o);
            o.seed = seed * 31 + f;
            o.flags = modes[m];
            if (gkv_sample_blocks(s, sp, ns, fans[f], 1, nls[f], &o, cb) !=
                GKV_OK)
                fail_msg("gkv_sample_blocks: %s", gkv_sampler_errmsg(s));
            model_blocks(&a, N, o.seed, o.flags, seeds, ns[0], fans[f],
                         nls[f], hb);
            for (int l = 0; l < nls[f]; l++) {
                blk_expect(&hb[l], &cb[l], l, "host model");
                blk_free(&hb[l]);
            }
        }
    free(seeds);
    gkv_sampler_free(s);
    gkv_sgraph_free(sg);
    gkv_graph_free(g);
}

#ifdef GKV_HAVE_CUDA

/* ---- the hot set ------------------------------------------------------------ */

/* The reference: repeatedly the largest degree, smallest ID, not yet taken. */
static void
hot_expect(const gkv_adj *a, int64_t lo, int64_t hi, size_t rb, size_t budget)
{
    size_t n = (size_t)(hi - lo), want = budget / rb, got_n;
    unsigned char *taken = calloc(n + 1, 1);
    int64_t *got;

    if (want > n)
        want = n;
    if (gkv_gpu_hot_by_degree(a, lo, hi, rb, budget, &got, &got_n) != GKV_OK)
        fail_msg("gkv_gpu_hot_by_degree: %s", gkv_gpu_errmsg());
    assert_int_equal(got_n, want);
    for (size_t r = 0; r < want; r++) {
        int64_t best = -1, bdeg = -1;
        for (int64_t v = lo; v < hi; v++) {
            int64_t deg = 0;
            if (taken[v - lo])
                continue;
            if (v >= a->col_lo && v < a->col_hi)
                deg = a->indptr[v - a->col_lo + 1] - a->indptr[v - a->col_lo];
            if (deg > bdeg) {
                bdeg = deg;
                best = v;
            }
        }
        if (got[r] != best)
            fail_msg("rows [%lld, %lld) budget %zu: rank %zu is %lld, want "
                     "%lld (degree %lld)", (long long)lo, (long long)hi,
                     budget, r, (long long)got[r], (long long)best,
                     (long long)bdeg);
        taken[best - lo] = 1;
    }
    gkv_free(got);
    free(taken);
}

static void
test_hot_by_degree(void **state)
{
    gkv_graph *g = rmat_weighted(8, 77);
    gkv_csc c;
    gkv_adj a, part;
    int64_t *ids = (int64_t *)1;
    size_t n = 99;

    (void)state;
    GKVT_OK(gkv_graph_csc(g, 0, 1, &c));
    memset(&a, 0, sizeof a);
    a.col_lo = 0;
    a.col_hi = c.num_cols;
    a.indptr = c.indptr;
    a.indices = c.indices;
    a.eids = c.eids;
    hot_expect(&a, 0, 256, 64, 0);
    hot_expect(&a, 0, 256, 64, 63);
    hot_expect(&a, 0, 256, 64, 64 * 10);
    hot_expect(&a, 0, 256, 64, 64 * 100 + 5);
    hot_expect(&a, 0, 256, 64, 1 << 30);        /* all rows */
    hot_expect(&a, 30, 200, 12, 12 * 50);       /* a tensor's slice */
    /* a partition's adjacency: columns [100, 180) only */
    part = a;
    part.col_lo = 100;
    part.col_hi = 180;
    part.indptr = c.indptr + 100;
    hot_expect(&part, 0, 256, 8, 8 * 120);
    /* bad arguments, nothing allocated */
    assert_int_equal(gkv_gpu_hot_by_degree(NULL, 0, 256, 8, 64, &ids, &n),
                     GKV_EINVAL);
    assert_null(ids);
    assert_int_equal(n, 0);
    assert_int_equal(gkv_gpu_hot_by_degree(&a, 0, 256, 0, 64, &ids, &n),
                     GKV_EINVAL);
    assert_non_null(strstr(gkv_gpu_errmsg(), "row_bytes"));
    assert_int_equal(gkv_gpu_hot_by_degree(&a, 10, 5, 8, 64, &ids, &n),
                     GKV_EINVAL);
    assert_non_null(strstr(gkv_gpu_errmsg(), "[10, 5)"));
    assert_int_equal(gkv_gpu_hot_by_degree(&a, 0, 256, 8, 64, NULL, &n),
                     GKV_EINVAL);
    /* allocation failures leave nothing behind */
    for (long k = 0;; k++) {
        gkvt_alloc_fail_at(k);
        gkv_err rc = gkv_gpu_hot_by_degree(&a, 0, 256, 8, 800, &ids, &n);
        gkvt_alloc_fail_at(-1);
        if (rc == GKV_OK) {
            assert_int_equal(n, 100);
            gkv_free(ids);
            break;
        }
        assert_int_equal(rc, GKV_ENOMEM);
        assert_null(ids);
    }
    gkv_csc_free(&c);
    gkv_graph_free(g);
}

/* ---- device presence ---------------------------------------------------------- */

/* Why the last have_gpu() found no device: kept here, since the one error
 * slot (gkv_errmsg) tells of the thread's latest call, which by a test's
 * end is a CPU one. */
static char no_gpu_why[512];

static int
have_gpu(void)
{
    int n = 0;
    char name[128];

    if (gkv_gpu_available(&n, name, sizeof name) != GKV_OK || n < 1) {
        snprintf(no_gpu_why, sizeof no_gpu_why, "%s",
                 n < 1 && gkv_gpu_errmsg()[0] == '\0' ? "no CUDA device"
                                                       : gkv_gpu_errmsg());
        return 0;
    }
    return 1;
}

#define NEED_GPU()                                                          \
    do {                                                                    \
        if (!have_gpu())                                                    \
            gkvt_gpu_skip(no_gpu_why);                                      \
    } while (0)

/* A store with three feature tensors: f32 x 64 (256 B rows), f16 x 3 (6 B,
 * byte copies), bf16 x 100 (200 B, 8-byte words); rows [lo, hi). */
struct fx {
    char *dir;
    gkv_store *st;
};

static const struct {
    const char *name;
    gkv_dtype dt;
    uint64_t width, lo, hi;
} tens[] = {
    {"node/_N/feat", GKV_F32, 64, 0, 2048},
    {"node/_N/h16", GKV_F16, 3, 100, 1100},
    {"node/_N/b16", GKV_BF16, 100, 0, 3000},
};

/* Its teardown is gkvt_store_teardown() (struct fx begins as struct
 * gkvt_store_fx does). */
static int
fx_setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);

    f->dir = gkvt_mkdtemp("gpu");
    GKVT_OK(gkv_store_open(&f->st, f->dir, GKV_CREATE | GKV_NOSYNC, NULL));
    for (size_t i = 0; i < N_OF(tens); i++) {
        gkv_tensor_spec sp;
        memset(&sp, 0, sizeof sp);
        sp.dtype = tens[i].dt;
        sp.ndim = 1;
        sp.shape[0] = tens[i].width;
        sp.lo = tens[i].lo;
        sp.hi = tens[i].hi;
        sp.init = GKV_INIT_UNIFORM;
        sp.a = -1.0;
        sp.b = 1.0;
        sp.seed = 11 + i;
        GKVT_OK(gkv_tensor_create(f->st, tens[i].name, &sp));
    }
    *state = f;
    return 0;
}

/* ---- without a device: clean errors; bad arguments first ---------------- */

static void
test_errors(void **state)
{
    struct fx *f = *state;
    gkv_gpu_feat *fc = (gkv_gpu_feat *)1;
    gkv_gpu_sgraph *gs = (gkv_gpu_sgraph *)1;
    gkv_gpu_sampler *sm = (gkv_gpu_sampler *)1;
    gkv_gpu_feat_opts o;
    int64_t indptr[3] = {0, 1, 2}, ix[2] = {0, 1}, bad_ix[2] = {0, 7};
    int64_t bad_ptr[3] = {0, 2, 1};
    float w[2] = {1.0f, NAN};
    gkv_adj a;
    void *p = (void *)1;
    int fan[2] = {2, 2}, gpu = have_gpu();
    int64_t seed0 = 0;
    gkv_gpu_block blk[2];

    memset(&o, 0, sizeof o);
    memset(&a, 0, sizeof a);
    a.col_hi = 2;
    a.indptr = indptr;
    a.indices = ix;
    /* bad arguments: EINVAL with a message, device or not */
    assert_int_equal(gkv_gpu_feat_open(NULL, f->st, "node/_N/feat", &o),
                     GKV_EINVAL);
    assert_int_equal(gkv_gpu_feat_open(&fc, NULL, "node/_N/feat", &o),
                     GKV_EINVAL);
    assert_null(fc);
    assert_non_null(strstr(gkv_gpu_errmsg(), "store"));
    o.n_hot = 3;
    assert_int_equal(gkv_gpu_feat_open(&fc, f->st, "node/_N/feat", &o),
                     GKV_EINVAL);
    assert_non_null(strstr(gkv_gpu_errmsg(), "hot_ids"));
    o.n_hot = 0;
    assert_int_equal(gkv_gpu_feat_open(&fc, f->st, "nope", &o),
                     GKV_ENOTFOUND);
    assert_non_null(strstr(gkv_gpu_errmsg(), "nope"));
    assert_int_equal(gkv_gpu_alloc(0, 16, NULL), GKV_EINVAL);
    assert_int_equal(gkv_gpu_alloc(0, 0, &p), GKV_EINVAL);
    assert_null(p);
    assert_int_equal(gkv_gpu_copy(NULL, ix, 8, NULL), GKV_EINVAL);
    assert_int_equal(gkv_gpu_feat_gather(NULL, NULL, 0, NULL, NULL),
                     GKV_EINVAL);
    assert_int_equal(gkv_gpu_feat_sync(NULL, NULL), GKV_EINVAL);
    assert_int_equal(gkv_gpu_sgraph_new(&gs, NULL, 2, 0, 0), GKV_EINVAL);
    assert_null(gs);
    a.indptr = bad_ptr;
    assert_int_equal(gkv_gpu_sgraph_new(&gs, &a, 2, 0, 0), GKV_EINVAL);
    assert_non_null(strstr(gkv_gpu_errmsg(), "decreases at column 1"));
    a.indptr = indptr;
    a.indices = bad_ix;
    assert_int_equal(gkv_gpu_sgraph_new(&gs, &a, 2, 0, 0), GKV_ERANGE);
    assert_non_null(strstr(gkv_gpu_errmsg(), "indices[1] = 7"));
    a.indices = ix;
    a.w = w;
    assert_int_equal(gkv_gpu_sgraph_new(&gs, &a, 2, 0, 0), GKV_EINVAL);
    assert_non_null(strstr(gkv_gpu_errmsg(), "position 1"));
    a.w = NULL;
    assert_int_equal(gkv_gpu_sgraph_new(&gs, &a, 1, 0, 0), GKV_EINVAL);
    assert_int_equal(gkv_gpu_sampler_new(&sm, NULL), GKV_EINVAL);
    assert_null(sm);
    assert_int_equal(gkv_gpu_sample_blocks(NULL, &seed0, 1, fan, 2, NULL, blk,
                                           NULL), GKV_EINVAL);
    assert_int_equal(gkv_gpu_sample_blocks_feat(NULL, NULL, &seed0, 1, fan, 2,
                                                NULL, blk, &p, NULL),
                     GKV_EINVAL);
    assert_null(p);
    assert_non_null(strstr(gkv_gpu_errmsg(), "sampler"));
    if (gpu) {
        print_message("a CUDA device is visible: no-device errors not "
                      "checked\n");
        return;
    }
    /* no device: GKV_ENOTSUP naming it, nothing returned */
    {
        int n = 5;
        char name[16] = "x";
        assert_int_equal(gkv_gpu_available(&n, name, sizeof name),
                         GKV_ENOTSUP);
        assert_int_equal(n, 0);
        assert_string_equal(name, "");
        assert_non_null(strstr(gkv_gpu_errmsg(), "no CUDA device"));
    }
    assert_int_equal(gkv_gpu_feat_open(&fc, f->st, "node/_N/feat", &o),
                     GKV_ENOTSUP);
    assert_null(fc);
    assert_non_null(strstr(gkv_gpu_errmsg(), "no CUDA device"));
    assert_int_equal(gkv_gpu_sgraph_new(&gs, &a, 2, 0, 0), GKV_ENOTSUP);
    assert_null(gs);
    assert_non_null(strstr(gkv_gpu_errmsg(), "no CUDA device"));
    assert_int_equal(gkv_gpu_alloc(0, 16, &p), GKV_ENOTSUP);
    assert_null(p);
    assert_int_equal(gkv_gpu_host_alloc(16, &p), GKV_ENOTSUP);
    assert_null(p);
    assert_int_equal(gkv_gpu_copy(ix, indptr, 8, NULL), GKV_ENOTSUP);
    assert_int_equal(gkv_gpu_sync(NULL), GKV_ENOTSUP);
    assert_non_null(strstr(gkv_gpu_errmsg(), "no CUDA device"));
    /* frees of NULL are fine */
    gkv_gpu_feat_close(NULL);
    gkv_gpu_sgraph_free(NULL);
    gkv_gpu_sampler_free(NULL);
    gkv_gpu_free(NULL);
    gkv_gpu_host_free(NULL);
}

/* ---- on a device: gathers ----------------------------------------------------- */

/* Gathers 'n' random IDs (with repeats) from tensor ti through a cache
 * made with 'o' and compares every byte with gkv_tensor_pull. */
static void
gather_check(struct fx *f, size_t ti, const gkv_gpu_feat_opts *o,
             size_t want_hot, uint64_t *st)
{
    gkv_tensor_desc d;
    gkv_gpu_feat *fc;
    gkv_gpu_feat_info inf;
    size_t n = 5000, rb;
    uint64_t *uids = malloc(n * sizeof *uids);
    int64_t *ids = malloc(n * sizeof *ids), *ids_dev;
    unsigned char *want, *got;
    void *out_dev;

    GKVT_OK(gkv_tensor_info(f->st, NULL, tens[ti].name, &d));
    rb = d.row_bytes;
    for (size_t i = 0; i < n; i++) {
        uids[i] = d.lo + tools__splitmix64(st) % (d.hi - d.lo);
        ids[i] = (int64_t)uids[i];
    }
    uids[0] = d.lo;
    ids[0] = (int64_t)d.lo;
    uids[n - 1] = d.hi - 1;
    ids[n - 1] = (int64_t)(d.hi - 1);
    want = malloc(n * rb);
    got = malloc(n * rb);
    GKVT_OK(gkv_tensor_pull(f->st, NULL, tens[ti].name, uids, n, want,
                            n * rb));
    if (gkv_gpu_feat_open(&fc, f->st, tens[ti].name, o) != GKV_OK)
        fail_msg("gkv_gpu_feat_open: %s", gkv_gpu_errmsg());
    GKVT_OK(gkv_gpu_feat_info_get(fc, &inf));
    assert_int_equal(inf.row_bytes, rb);
    assert_int_equal(inf.n_hot, want_hot);
    GKVT_OK(gkv_gpu_alloc(0, n * sizeof *ids, (void **)&ids_dev));
    GKVT_OK(gkv_gpu_alloc(0, n * rb, &out_dev));
    GKVT_OK(gkv_gpu_copy(ids_dev, ids, n * sizeof *ids, NULL));
    if (gkv_gpu_feat_gather(fc, ids_dev, n, out_dev, NULL) != GKV_OK ||
        gkv_gpu_feat_sync(fc, NULL) != GKV_OK)
        fail_msg("gather: %s", gkv_gpu_errmsg());
    GKVT_OK(gkv_gpu_copy(got, out_dev, n * rb, NULL));
    GKVT_OK(gkv_gpu_sync(NULL));
    for (size_t i = 0; i < n; i++)
        if (memcmp(got + i * rb, want + i * rb, rb) != 0)
            fail_msg("%s, %zu hot: row %zu (ID %lld) differs from the pull",
                     tens[ti].name, want_hot, i, (long long)ids[i]);
    /* a bad ID: a zero row, reported by the next sync, once */
    ids[7] = (int64_t)d.hi;
    GKVT_OK(gkv_gpu_copy(ids_dev, ids, n * sizeof *ids, NULL));
    GKVT_OK(gkv_gpu_feat_gather(fc, ids_dev, n, out_dev, NULL));
    assert_int_equal(gkv_gpu_feat_sync(fc, NULL), GKV_ERANGE);
    assert_non_null(strstr(gkv_gpu_errmsg(), "ids[7]"));
    GKVT_OK(gkv_gpu_feat_sync(fc, NULL));
    GKVT_OK(gkv_gpu_copy(got, out_dev, n * rb, NULL));
    GKVT_OK(gkv_gpu_sync(NULL));
    for (size_t b = 0; b < rb; b++)
        assert_int_equal(got[7 * rb + b], 0);
    gkv_gpu_free(ids_dev);
    gkv_gpu_free(out_dev);
    gkv_gpu_feat_close(fc);
    free(uids);
    free(ids);
    free(want);
    free(got);
}

static void
test_gather(void **state)
{
    struct fx *f = *state;
    uint64_t st = gkvt_seed();
    gkv_graph *g;
    gkv_csc c;
    gkv_adj a;

    NEED_GPU();
    g = rmat_weighted(11, 5);
    GKVT_OK(gkv_graph_csc(g, 0, 1, &c));
    memset(&a, 0, sizeof a);
    a.col_hi = c.num_cols;
    a.indptr = c.indptr;
    a.indices = c.indices;
    for (size_t ti = 0; ti < N_OF(tens); ti++) {
        gkv_gpu_feat_opts o;
        size_t rows = (size_t)(tens[ti].hi - tens[ti].lo);
        gkv_tensor_desc d;
        int64_t hot[5] = {(int64_t)tens[ti].lo + 3, (int64_t)tens[ti].lo + 3,
                          (int64_t)tens[ti].lo, (int64_t)tens[ti].hi - 1,
                          (int64_t)tens[ti].lo + 9};
        GKVT_OK(gkv_tensor_info(f->st, NULL, tens[ti].name, &d));
        memset(&o, 0, sizeof o);
        gather_check(f, ti, &o, 0, &st);                 /* all on host */
        o.budget_bytes = rows * d.row_bytes;
        gather_check(f, ti, &o, rows, &st);              /* all on device */
        o.budget_bytes = rows / 3 * d.row_bytes + 1;
        o.hot_adj = &a;
        gather_check(f, ti, &o, rows / 3, &st);          /* mixed, by degree */
        o.hot_adj = NULL;
        o.hot_ids = hot;
        o.n_hot = N_OF(hot);
        gather_check(f, ti, &o, 4, &st);                 /* given, dup once */
        hot[2] = (int64_t)tens[ti].hi;
        {
            gkv_gpu_feat *fc;
            assert_int_equal(gkv_gpu_feat_open(&fc, f->st, tens[ti].name, &o),
                             GKV_ERANGE);
            assert_non_null(strstr(gkv_gpu_errmsg(), "hot_ids[2]"));
            o.budget_bytes = 0;                 /* checked with no room too */
            assert_int_equal(gkv_gpu_feat_open(&fc, f->st, tens[ti].name, &o),
                             GKV_ERANGE);
            assert_non_null(strstr(gkv_gpu_errmsg(), "hot_ids[2]"));
        }
    }
    gkv_csc_free(&c);
    gkv_graph_free(g);
}

/* ---- on a device: blocks -------------------------------------------------------- */

/* Asserts GPU block 'gb' equals CPU block 'c'. */
static void
gpu_blk_expect(const gkv_gpu_block *gb, const gkv_block *c, int l,
               const char *what)
{
    struct blk h;

    h.nsrc = gb->num_src;
    h.ndst = gb->num_dst;
    h.ne = gb->num_edges;
    h.ids = malloc(h.nsrc * 8 + 8);
    h.src = malloc(h.ne * 8 + 8);
    h.dst = malloc(h.ne * 8 + 8);
    h.eid = malloc(h.ne * 8 + 8);
    GKVT_OK(gkv_gpu_copy(h.ids, gb->ids_dev, h.nsrc * 8, NULL));
    GKVT_OK(gkv_gpu_copy(h.src, gb->src_dev, h.ne * 8, NULL));
    GKVT_OK(gkv_gpu_copy(h.dst, gb->dst_dev, h.ne * 8, NULL));
    GKVT_OK(gkv_gpu_copy(h.eid, gb->eid_dev, h.ne * 8, NULL));
    GKVT_OK(gkv_gpu_sync(NULL));
    blk_expect(&h, c, l, what);
    blk_free(&h);
}

static void
test_gpu_blocks(void **state)
{
    static const int fans[][2] = {{15, 10}, {25, 5}, {-1, 3}};
    uint64_t seed = gkvt_seed(), st = seed;
    const int scale = 14;
    int64_t N = (int64_t)1 << scale, *seeds;
    gkv_graph *g;
    gkv_sgraph *sg;
    gkv_sampler *s;
    gkv_adj a;

    (void)state;
    NEED_GPU();
    g = rmat_weighted(scale, seed + 2);
    seeds = gkvt_distinct_seeds(N, &st);
    GKVT_OK(gkv_sgraph_from_graph(&sg, g, 0, 1));
    GKVT_OK(gkv_sgraph_adj(sg, 0, GKV_DIR_IN, &a));
    GKVT_OK(gkv_sampler_new(&s, sg, 2));
    for (int zc = 0; zc < 2; zc++) {              /* device, then zero-copy */
        gkv_gpu_sgraph *gg;
        gkv_gpu_sampler *gs;
        if (gkv_gpu_sgraph_new(&gg, &a, N, 0, zc ? 1 : 0) != GKV_OK)
            fail_msg("gkv_gpu_sgraph_new: %s", gkv_gpu_errmsg());
        assert_int_equal(gkv_gpu_sgraph_on_device(gg), !zc);
        GKVT_OK(gkv_gpu_sampler_new(&gs, gg));
        for (size_t fi = 0; fi < N_OF(fans); fi++)
            for (size_t m = 0; m < N_OF(modes); m++) {
                const int64_t *sp[1] = {seeds};
                size_t ns[1] = {1000};
                gkv_sample_opts o;
                gkv_block cb[2];
                gkv_gpu_block gb[2];
                char what[96];
                memset(&o, 0, sizeof o);
                o.seed = seed + fi * 4 + m;
                o.flags = modes[m];
                GKVT_OK(gkv_sample_blocks(s, sp, ns, fans[fi], 1, 2, &o, cb));
                if (gkv_gpu_sample_blocks(gs, seeds, 1000, fans[fi], 2, &o,
                                          gb, NULL) != GKV_OK)
                    fail_msg("gkv_gpu_sample_blocks: %s", gkv_gpu_errmsg());
                snprintf(what, sizeof what, "GPU (%s, fanouts %d,%d, flags "
                         "%u)", zc ? "zero-copy" : "device", fans[fi][0],
                         fans[fi][1], modes[m]);
                for (int l = 0; l < 2; l++)
                    gpu_blk_expect(&gb[l], &cb[l], l, what);
            }
        /* a seed twice, a seed out of range */
        {
            int64_t dup[3] = {5, 9, 5}, far[2] = {1, N};
            gkv_gpu_block gb[2];
            assert_int_equal(gkv_gpu_sample_blocks(gs, dup, 3, fans[0], 2,
                                                   NULL, gb, NULL),
                             GKV_EINVAL);
            assert_non_null(strstr(gkv_gpu_errmsg(), "seed 5"));
            assert_int_equal(gkv_gpu_sample_blocks(gs, far, 2, fans[0], 2,
                                                   NULL, gb, NULL),
                             GKV_ERANGE);
            assert_non_null(strstr(gkv_gpu_errmsg(), "seeds[1]"));
        }
        gkv_gpu_sampler_free(gs);
        gkv_gpu_sgraph_free(gg);
    }
    free(seeds);
    gkv_sampler_free(s);
    gkv_sgraph_free(sg);
    gkv_graph_free(g);
}

/* One hop of more than 512 x 512 edges: the scans of its counts and flags
 * then take three levels (512 elements per scan block), a path smaller
 * batches never reach. With replacement, each seed with in-edges gives
 * exactly k picks, so the size is known before sampling. */
static void
test_gpu_blocks_large(void **state)
{
    uint64_t seed = gkvt_seed(), st = seed;
    const int scale = 16, k = 15;
    int64_t N = (int64_t)1 << scale, *perm, *seeds;
    size_t ns = 0;
    int fan[1] = {k};
    gkv_graph *g;
    gkv_sgraph *sg;
    gkv_sampler *s;
    gkv_adj a;
    gkv_sample_opts o;
    gkv_block cb[1];
    gkv_gpu_block gb[1];
    gkv_gpu_sgraph *gg;
    gkv_gpu_sampler *gs;

    (void)state;
    NEED_GPU();
    g = rmat_weighted(scale, seed + 4);
    GKVT_OK(gkv_sgraph_from_graph(&sg, g, 0, 1));
    GKVT_OK(gkv_sgraph_adj(sg, 0, GKV_DIR_IN, &a));
    GKVT_OK(gkv_sampler_new(&s, sg, 2));
    perm = gkvt_distinct_seeds(N, &st);
    seeds = malloc((size_t)N * sizeof *seeds);
    for (int64_t i = 0; i < N; i++)
        if (a.indptr[perm[i] + 1] > a.indptr[perm[i]])
            seeds[ns++] = perm[i];
    assert_true(ns * (size_t)k > 512 * 512 + 512);
    memset(&o, 0, sizeof o);
    o.seed = seed;
    o.flags = GKV_SAMPLE_REPLACE;
    {
        const int64_t *sp[1] = {seeds};
        size_t n1[1] = {ns};
        GKVT_OK(gkv_sample_blocks(s, sp, n1, fan, 1, 1, &o, cb));
    }
    assert_int_equal(cb[0].edges[0].n, ns * (size_t)k);
    if (gkv_gpu_sgraph_new(&gg, &a, N, 0, 0) != GKV_OK ||
        gkv_gpu_sampler_new(&gs, gg) != GKV_OK)
        fail_msg("GPU sampler: %s", gkv_gpu_errmsg());
    if (gkv_gpu_sample_blocks(gs, seeds, ns, fan, 1, &o, gb, NULL) != GKV_OK)
        fail_msg("gkv_gpu_sample_blocks: %s", gkv_gpu_errmsg());
    gpu_blk_expect(&gb[0], &cb[0], 0, "GPU (one hop of 3-level scans)");
    gkv_gpu_sampler_free(gs);
    gkv_gpu_sgraph_free(gg);
    free(seeds);
    free(perm);
    gkv_sampler_free(s);
    gkv_sgraph_free(sg);
    gkv_graph_free(g);
}

/* A partition's adjacency (columns [N/4, N/2) of N nodes). As on the CPU,
 * a hop whose fanout is 0 samples nothing and does not check its nodes
 * against the columns; a hop that samples does. The CPU's answers are
 * checked everywhere; the GPU's against them where there is a device (the
 * GPU used to fail every such call with GKV_ERANGE). */
static void
test_gpu_blocks_partial(void **state)
{
    static const struct {
        int fan[2], nl, outside;
        gkv_err rc;
    } cs[] = {
        {{0, 5}, 2, 0, GKV_OK},       /* hop 1 (fanout 0) meets non-columns */
        {{0, 0}, 2, 1, GKV_OK},       /* seeds outside, nothing sampled */
        {{0, 0}, 1, 1, GKV_OK},
        {{5, 0}, 2, 1, GKV_ERANGE},   /* hop 1 samples the seeds */
        {{3, 4}, 2, 1, GKV_ERANGE},   /* hop 0 does */
        {{0, 0}, 1, 2, GKV_ERANGE},   /* a seed that is not a node */
        {{3, 4}, 2, 3, GKV_EINVAL},   /* outside and twice: "twice" first */
        {{0, 0}, 1, 3, GKV_EINVAL},
    };
    uint64_t seed = gkvt_seed(), st = seed;
    const int scale = 12;
    int64_t N = (int64_t)1 << scale, lo = N / 4, hi = N / 2, base;
    int64_t *ip, *in_cols, *any, *seeds;
    int src_t[1] = {0}, dst_t[1] = {0}, gpu;
    gkv_graph *g = rmat_weighted(scale, seed + 3);
    gkv_sgraph *sg, *psg;
    gkv_sampler *s;
    gkv_adj a, part;
    gkv_gpu_sgraph *gg = NULL;
    gkv_gpu_sampler *gs = NULL;

    (void)state;
    GKVT_OK(gkv_sgraph_from_graph(&sg, g, 0, 1));
    GKVT_OK(gkv_sgraph_adj(sg, 0, GKV_DIR_IN, &a));
    ip = malloc((size_t)(hi - lo + 1) * sizeof *ip);
    base = a.indptr[lo - a.col_lo];
    for (int64_t c = lo; c <= hi; c++)
        ip[c - lo] = a.indptr[c - a.col_lo] - base;
    part = a;
    part.col_lo = lo;
    part.col_hi = hi;
    part.indptr = ip;
    part.indices = a.indices + base;
    part.eids = a.eids != NULL ? a.eids + base : NULL;
    part.eid_lo = a.eids != NULL ? 0 : a.eid_lo + base;
    part.w = a.w != NULL ? a.w + base : NULL;
    GKVT_OK(gkv_sgraph_new(&psg, 1, &N, 1, src_t, dst_t));
    GKVT_OK(gkv_sgraph_set_adj(psg, 0, GKV_DIR_IN, &part));
    GKVT_OK(gkv_sampler_new(&s, psg, 1));
    in_cols = gkvt_distinct_seeds(hi - lo, &st);
    for (int i = 0; i < 200; i++)
        in_cols[i] += lo;
    any = gkvt_distinct_seeds(N, &st);
    gpu = have_gpu();
    if (gpu) {
        if (gkv_gpu_sgraph_new(&gg, &part, N, 0, 0) != GKV_OK)
            fail_msg("gkv_gpu_sgraph_new: %s", gkv_gpu_errmsg());
        GKVT_OK(gkv_gpu_sampler_new(&gs, gg));
    }
    for (size_t ci = 0; ci < N_OF(cs); ci++)
        for (size_t m = 0; m < N_OF(modes); m++) {
            int64_t bad[2] = {lo, N}, twice[3] = {0, 1, 0};
            size_t ns = cs[ci].outside == 2 ? 2 : cs[ci].outside == 3 ? 3
                        : 200;
            const int64_t *sp[1];
            gkv_sample_opts o;
            gkv_block cb[2];
            gkv_gpu_block gb[2];
            gkv_err rc;
            char what[96];
            seeds = cs[ci].outside == 3 ? twice : cs[ci].outside == 2 ? bad
                    : cs[ci].outside ? any : in_cols;
            sp[0] = seeds;
            memset(&o, 0, sizeof o);
            o.seed = seed + ci * 4 + m;
            o.flags = modes[m];
            rc = gkv_sample_blocks(s, sp, &ns, cs[ci].fan, 1, cs[ci].nl, &o,
                                   cb);
            if (rc != cs[ci].rc)
                fail_msg("case %zu: CPU gives %s (%s), expected %s", ci,
                         gkv_err_name(rc), gkv_sampler_errmsg(s),
                         gkv_err_name(cs[ci].rc));
            if (ci == 0) {      /* hop 1's frontier leaves the columns */
                size_t out = 0;
                for (size_t i = 0; i < cb[0].nodes[0].num_dst; i++)
                    out += cb[0].nodes[0].ids[i] < lo ||
                           cb[0].nodes[0].ids[i] >= hi;
                assert_true(out > 0);
            }
            if (!gpu)
                continue;
            rc = gkv_gpu_sample_blocks(gs, seeds, ns, cs[ci].fan, cs[ci].nl,
                                       &o, gb, NULL);
            if (rc != cs[ci].rc)
                fail_msg("case %zu flags %u: GPU gives %s (%s), the CPU %s",
                         ci, modes[m], gkv_err_name(rc), gkv_gpu_errmsg(),
                         gkv_err_name(cs[ci].rc));
            if (rc != GKV_OK)
                continue;
            /* the CPU's blocks again: the GPU call did not touch them, but
             * compare against a fresh call to keep the borrow rule */
            GKVT_OK(gkv_sample_blocks(s, sp, &ns, cs[ci].fan, 1, cs[ci].nl,
                                      &o, cb));
            snprintf(what, sizeof what, "partial GPU (case %zu, flags %u)",
                     ci, modes[m]);
            for (int l = 0; l < cs[ci].nl; l++)
                gpu_blk_expect(&gb[l], &cb[l], l, what);
        }
    gkv_gpu_sampler_free(gs);
    gkv_gpu_sgraph_free(gg);
    /* GKV_SAMPLE_WEIGHTED on an adjacency without weights: an error only
     * when a hop samples, on both */
    {
        static const int fz[2] = {0, 0}, fs[2] = {3, 4};
        const int64_t *sp[1] = {in_cols};
        size_t ns = 200;
        gkv_sample_opts o;
        gkv_block cb[2];
        gkv_gpu_block gb[2];
        gkv_sgraph *nsg;
        gkv_sampler *ns_s;
        gkv_adj nw = part;
        nw.w = NULL;
        memset(&o, 0, sizeof o);
        o.flags = GKV_SAMPLE_WEIGHTED;
        GKVT_OK(gkv_sgraph_new(&nsg, 1, &N, 1, src_t, dst_t));
        GKVT_OK(gkv_sgraph_set_adj(nsg, 0, GKV_DIR_IN, &nw));
        GKVT_OK(gkv_sampler_new(&ns_s, nsg, 1));
        GKVT_OK(gkv_sample_blocks(ns_s, sp, &ns, fz, 1, 2, &o, cb));
        assert_int_equal(gkv_sample_blocks(ns_s, sp, &ns, fs, 1, 2, &o, cb),
                         GKV_EINVAL);
        if (gpu) {
            if (gkv_gpu_sgraph_new(&gg, &nw, N, 0, 0) != GKV_OK)
                fail_msg("gkv_gpu_sgraph_new: %s", gkv_gpu_errmsg());
            GKVT_OK(gkv_gpu_sampler_new(&gs, gg));
            if (gkv_gpu_sample_blocks(gs, in_cols, 200, fz, 2, &o, gb,
                                      NULL) != GKV_OK)
                fail_msg("weighted, fanouts 0: %s", gkv_gpu_errmsg());
            assert_int_equal(gb[0].num_edges + gb[1].num_edges, 0);
            assert_int_equal(gkv_gpu_sample_blocks(gs, in_cols, 200, fs, 2,
                                                   &o, gb, NULL), GKV_EINVAL);
            gkv_gpu_sampler_free(gs);
            gkv_gpu_sgraph_free(gg);
        }
        gkv_sampler_free(ns_s);
        gkv_sgraph_free(nsg);
    }
    free(in_cols);
    free(any);
    free(ip);
    gkv_sampler_free(s);
    gkv_sgraph_free(psg);
    gkv_sgraph_free(sg);
    gkv_graph_free(g);
    if (!gpu)
        gkvt_gpu_skip(no_gpu_why);
}

/* Blocks and input features in one call: the features are the pulls of
 * blocks[0]'s source nodes, byte for byte. */
static void
test_gpu_minibatch(void **state)
{
    struct fx *f = *state;
    static const int fan[2] = {10, 15};
    uint64_t st = gkvt_seed();
    gkv_graph *g;
    gkv_sgraph *sg;
    gkv_adj a;
    gkv_gpu_sgraph *gg;
    gkv_gpu_sampler *gs;
    gkv_gpu_feat *fc;
    gkv_gpu_feat_opts o;
    gkv_gpu_block gb[2];
    int64_t *seeds, *ids;
    uint64_t *uids;
    unsigned char *got, *want;
    void *feat_dev = NULL;
    size_t rb = 64 * 4, ns;

    NEED_GPU();
    g = rmat_weighted(11, 9);                   /* 2048 nodes: feat's rows */
    seeds = gkvt_distinct_seeds(2048, &st);
    GKVT_OK(gkv_sgraph_from_graph(&sg, g, 0, 1));
    GKVT_OK(gkv_sgraph_adj(sg, 0, GKV_DIR_IN, &a));
    GKVT_OK(gkv_gpu_sgraph_new(&gg, &a, 2048, 0, 0));
    GKVT_OK(gkv_gpu_sampler_new(&gs, gg));
    memset(&o, 0, sizeof o);
    o.budget_bytes = 500 * rb;
    o.hot_adj = &a;
    GKVT_OK(gkv_gpu_feat_open(&fc, f->st, "node/_N/feat", &o));
    if (gkv_gpu_sample_blocks_feat(gs, fc, seeds, 256, fan, 2, NULL, gb,
                                   &feat_dev, NULL) != GKV_OK)
        fail_msg("gkv_gpu_sample_blocks_feat: %s", gkv_gpu_errmsg());
    assert_non_null(feat_dev);
    ns = gb[0].num_src;
    assert_true(ns >= 256);
    ids = malloc(ns * sizeof *ids);
    uids = malloc(ns * sizeof *uids);
    got = malloc(ns * rb);
    want = malloc(ns * rb);
    GKVT_OK(gkv_gpu_copy(ids, gb[0].ids_dev, ns * sizeof *ids, NULL));
    GKVT_OK(gkv_gpu_copy(got, feat_dev, ns * rb, NULL));
    GKVT_OK(gkv_gpu_sync(NULL));
    for (size_t i = 0; i < ns; i++)
        uids[i] = (uint64_t)ids[i];
    GKVT_OK(gkv_tensor_pull(f->st, NULL, "node/_N/feat", uids, ns, want,
                            ns * rb));
    for (size_t i = 0; i < ns; i++)
        if (memcmp(got + i * rb, want + i * rb, rb) != 0)
            fail_msg("input node %zu (ID %lld): features differ from the "
                     "pull", i, (long long)ids[i]);
    free(ids);
    free(uids);
    free(got);
    free(want);
    free(seeds);
    gkv_gpu_feat_close(fc);
    gkv_gpu_sampler_free(gs);
    gkv_gpu_sgraph_free(gg);
    gkv_sgraph_free(sg);
    gkv_graph_free(g);
}

#ifdef GKVT_GPU_EMU
/* ---- the emulated device's own checks -------------------------------- */

/* Runs fn(arg) in a child and returns how it ended: the signal that killed
 * it, or -1 - its exit status when it exited. The child does not inherit
 * cmocka's handlers (they would carry on with the tests in the child). */
static int
child_signal(void (*fn)(void *), void *arg)
{
    int st;
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        signal(SIGABRT, SIG_DFL);
        fn(arg);
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFSIGNALED(st) ? WTERMSIG(st) : -1 - WEXITSTATUS(st);
}

static void
host_reads(void *p)
{
    _exit(((volatile unsigned char *)p)[0]);
}

struct overrun {
    gkv_gpu_feat *fc;
    const int64_t *ids_dev;
    size_t rows;
    void *out_dev;
};

static void
gather_into(void *arg)
{
    struct overrun *o = arg;

    if (gkv_gpu_feat_gather(o->fc, o->ids_dev, o->rows, o->out_dev,
                            NULL) != GKV_OK ||
        gkv_gpu_feat_sync(o->fc, NULL) != GKV_OK) {
        fprintf(stderr, "gather_into: %s\n", gkv_gpu_errmsg());
        _exit(2);
    }
}

/* What the GPU tests rely on the emulator for, beyond running kernels:
 * copies bounded by their allocation, device memory unreadable from host
 * code, and a kernel that writes past its output stopping the program. */
static void
test_emu_checks(void **state)
{
    struct fx *f = *state;
    unsigned char h[300], back[300];
    gkv_gpu_feat_opts fo;
    struct overrun o = {NULL, NULL, 40, NULL};
    int64_t ids[40], *ids_dev;
    void *d, *room40, *room39;
    char name[128];
    int n;

    GKVT_OK(gkv_gpu_available(&n, name, sizeof name));
    assert_int_equal(n, 1);
    assert_non_null(strstr(name, "emulation"));
    for (size_t i = 0; i < sizeof h; i++)
        h[i] = (unsigned char)(i * 7 + 1);
    GKVT_OK(gkv_gpu_alloc(0, 256, &d));
    GKVT_OK(gkv_gpu_copy(d, h, 256, NULL));
    memset(back, 0, sizeof back);
    GKVT_OK(gkv_gpu_copy(back, d, 256, NULL));
    assert_memory_equal(back, h, 256);
    GKVT_OK(gkv_gpu_copy((char *)d + 100, h, 156, NULL));
    assert_int_equal(gkv_gpu_copy(d, h, 257, NULL), GKV_EIO);
    assert_non_null(strstr(gkv_gpu_errmsg(), "cudaErrorInvalidValue"));
    assert_int_equal(gkv_gpu_copy(back, (char *)d + 1, 256, NULL), GKV_EIO);
    /* a failed copy wrote nothing */
    GKVT_OK(gkv_gpu_copy(back, d, 256, NULL));
    assert_memory_equal(back + 100, h, 156);
    assert_int_equal(child_signal(host_reads, d), SIGSEGV);
    gkv_gpu_free(d);
    /* a gather of 40 rows (6 bytes each: tensor h16) into room enough,
     * then into room for 39 */
    memset(&fo, 0, sizeof fo);
    GKVT_OK(gkv_gpu_feat_open(&o.fc, f->st, tens[1].name, &fo));
    for (size_t i = 0; i < N_OF(ids); i++)
        ids[i] = (int64_t)tens[1].lo + (int64_t)i;
    GKVT_OK(gkv_gpu_alloc(0, sizeof ids, (void **)&ids_dev));
    GKVT_OK(gkv_gpu_copy(ids_dev, ids, sizeof ids, NULL));
    GKVT_OK(gkv_gpu_alloc(0, 40 * 6, &room40));
    GKVT_OK(gkv_gpu_alloc(0, 39 * 6, &room39));
    o.ids_dev = ids_dev;
    o.out_dev = room40;
    assert_int_equal(child_signal(gather_into, &o), -1);
    o.out_dev = room39;
    n = child_signal(gather_into, &o);
    if (n != SIGABRT && n != SIGSEGV)
        fail_msg("a gather past its output ended with %d, not SIGABRT or "
                 "SIGSEGV", n);
    gkv_gpu_free(room39);
    gkv_gpu_free(room40);
    gkv_gpu_free(ids_dev);
    gkv_gpu_feat_close(o.fc);
}

/* Device memory running out (GKV_GPU_EMU_MEM caps the emulated device):
 * each call fails with GKV_ENOMEM, leaves nothing allocated, and the same
 * objects work once there is room; every object freed leaves no
 * allocation behind. */
static void
test_emu_out_of_memory(void **state)
{
    struct fx *f = *state;
    size_t base = gkv_emu_live_allocs();
    uint64_t seed = gkvt_seed(), st = seed;
    const int scale = 12;
    int64_t N = (int64_t)1 << scale, *seeds = gkvt_distinct_seeds(N, &st);
    int fan[2] = {25, 25};
    const int64_t *sp[1] = {seeds};
    size_t ns[1] = {4096};
    gkv_gpu_feat *fc = NULL;
    gkv_gpu_feat_opts fo;
    gkv_tensor_desc d;
    gkv_graph *g;
    gkv_sgraph *sg;
    gkv_sampler *s;
    gkv_adj a;
    gkv_sample_opts o;
    gkv_block cb[2];
    gkv_gpu_block gb[2];
    gkv_gpu_sgraph *gg;
    gkv_gpu_sampler *gs;

    /* a feature cache whose hot rows do not fit */
    GKVT_OK(gkv_tensor_info(f->st, NULL, tens[0].name, &d));
    memset(&fo, 0, sizeof fo);
    fo.budget_bytes = (size_t)(d.hi - d.lo) * d.row_bytes;
    setenv("GKV_GPU_EMU_MEM", "65536", 1);
    assert_int_equal(gkv_gpu_feat_open(&fc, f->st, tens[0].name, &fo),
                     GKV_ENOMEM);
    assert_null(fc);
    assert_non_null(strstr(gkv_gpu_errmsg(), "cudaErrorMemoryAllocation"));
    assert_int_equal(gkv_emu_live_allocs(), base);
    unsetenv("GKV_GPU_EMU_MEM");
    GKVT_OK(gkv_gpu_feat_open(&fc, f->st, tens[0].name, &fo));
    gkv_gpu_feat_close(fc);
    assert_int_equal(gkv_emu_live_allocs(), base);

    /* a batch whose hops do not fit, then the same sampler with room */
    g = rmat_weighted(scale, seed + 5);
    GKVT_OK(gkv_sgraph_from_graph(&sg, g, 0, 1));
    GKVT_OK(gkv_sgraph_adj(sg, 0, GKV_DIR_IN, &a));
    GKVT_OK(gkv_sampler_new(&s, sg, 1));
    memset(&o, 0, sizeof o);
    o.seed = seed;
    GKVT_OK(gkv_sample_blocks(s, sp, ns, fan, 1, 2, &o, cb));
    GKVT_OK(gkv_gpu_sgraph_new(&gg, &a, N, 0, 0));
    GKVT_OK(gkv_gpu_sampler_new(&gs, gg));
    setenv("GKV_GPU_EMU_MEM", "2000000", 1);
    assert_int_equal(gkv_gpu_sample_blocks(gs, seeds, ns[0], fan, 2, &o, gb,
                                           NULL), GKV_ENOMEM);
    assert_non_null(strstr(gkv_gpu_errmsg(), "out of device memory"));
    unsetenv("GKV_GPU_EMU_MEM");
    if (gkv_gpu_sample_blocks(gs, seeds, ns[0], fan, 2, &o, gb, NULL) !=
        GKV_OK)
        fail_msg("after running out: %s", gkv_gpu_errmsg());
    for (int l = 0; l < 2; l++)
        gpu_blk_expect(&gb[l], &cb[l], l, "GPU after running out of memory");
    gkv_gpu_sampler_free(gs);
    gkv_gpu_sgraph_free(gg);
    assert_int_equal(gkv_emu_live_allocs(), base);
    free(seeds);
    gkv_sampler_free(s);
    gkv_sgraph_free(sg);
    gkv_graph_free(g);
}

/* The GPU benchmark end to end on a small size (what the lent GPU machine
 * runs at full size): it checks its gathers and its first batch itself. */
static void
test_emu_bench(void **state)
{
    char prog[4096];
    char *argv[] = {prog, "--scale", "10", "--rows", "3000", "--row-bytes",
                    "72", "--n", "2000", "--batch", "100", "--batches", "2",
                    "--reps", "1", NULL};
    char *out = NULL, *err = NULL;
    int code;

    (void)state;
    snprintf(prog, sizeof prog, "%s", gkvt_prog("emu/gkv-bench-gpu"));
    code = gkvt_run(argv, NULL, 0, &out, &err, 120);
    if (code != 0 || strstr(out, "where=device") == NULL ||
        strstr(out, "where=zero-copy") == NULL ||
        strstr(out, "RESULT gpu_sample") == NULL)
        fail_msg("gkv-bench-gpu: exit %d\n%s%s", code, out, err);
    free(out);
    free(err);
}
#endif /* GKVT_GPU_EMU */

#else /* !GKV_HAVE_CUDA */

static void
test_no_cuda(void **state)
{
    (void)state;
    gkvt_gpu_skip("built without CUDA (make CUDA=no or no nvcc): the GPU "
                  "API is absent");
}

#endif

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gen_fixed),
        cmocka_unit_test(test_gen_rmat),
        cmocka_unit_test(test_gen_corners),
        cmocka_unit_test(test_model_blocks),
#ifdef GKV_HAVE_CUDA
        cmocka_unit_test(test_hot_by_degree),
        cmocka_unit_test_setup_teardown(test_errors, fx_setup, gkvt_store_teardown),
        cmocka_unit_test_setup_teardown(test_gather, fx_setup, gkvt_store_teardown),
        cmocka_unit_test(test_gpu_blocks),
        cmocka_unit_test(test_gpu_blocks_large),
        cmocka_unit_test(test_gpu_blocks_partial),
        cmocka_unit_test_setup_teardown(test_gpu_minibatch, fx_setup,
                                        gkvt_store_teardown),
#ifdef GKVT_GPU_EMU
        cmocka_unit_test_setup_teardown(test_emu_checks, fx_setup,
                                        gkvt_store_teardown),
        cmocka_unit_test_setup_teardown(test_emu_out_of_memory, fx_setup,
                                        gkvt_store_teardown),
        cmocka_unit_test(test_emu_bench),
#endif
#else
        cmocka_unit_test(test_no_cuda),
#endif
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);

#ifdef GKVT_GPU_EMU
    rc = gkvt_emu_exit("gpu_emu_test", rc);   /* nothing left allocated */
#endif
    return rc;
}
