/* sample_test.c - the sampler (graph/gkv_sample.h): hand-checked samples
 * and blocks on the fixed graphs, properties on R-MAT graphs checked
 * against the COO edge list, weighted draws against the weights
 * (chi-square at a fixed seed), determinism over seeds and thread counts,
 * sampling split over column ranges as partitions own them, edge
 * mini-batches and allocation failures. Bad inputs: sample_bad_input_test.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkvt.h"
#include "gkvt_graph.h"
#include "graph/gkv_graph.h"
#include "graph/gkv_sample.h"
#include "graph/graph_seam.h"       /* graph__sample_hop */

#define N_OF(a) (sizeof (a) / sizeof (a)[0])

/* ---- helpers ------------------------------------------------------------ */

/* Asserts edges e equal the triples want[0..n) (src, dst, eid). */
static void
expect_edges(const gkv_sample_edges *e, const int64_t (*want)[3], size_t n)
{
    assert_int_equal(e->n, n);
    for (size_t i = 0; i < n; i++) {
        if (e->src[i] != want[i][0] || e->dst[i] != want[i][1] ||
            e->eid[i] != want[i][2])
            fail_msg("edge %zu: got (%lld, %lld, e%lld), want (%lld, %lld, "
                     "e%lld)", i, (long long)e->src[i], (long long)e->dst[i],
                     (long long)e->eid[i], (long long)want[i][0],
                     (long long)want[i][1], (long long)want[i][2]);
    }
}

/* A deep copy of blocks, to compare results of different calls. */
struct bcopy {
    int nl, nnt, net;
    int64_t *ids[8][4];
    size_t nsrc[8][4], ndst[8][4];
    int64_t *es[8][4], *ed[8][4], *ee[8][4];
    size_t ne[8][4];
};

static int64_t *
dup64(const int64_t *p, size_t n)
{
    int64_t *q = malloc(n * sizeof *q + 1);
    if (n > 0)
        memcpy(q, p, n * sizeof *q);
    return q;
}

static void
bcopy_take(struct bcopy *c, const gkv_block *b, int nl)
{
    memset(c, 0, sizeof *c);
    c->nl = nl;
    c->nnt = b[0].num_ntypes;
    c->net = b[0].num_etypes;
    assert_true(nl <= 8 && c->nnt <= 4 && c->net <= 4);
    for (int l = 0; l < nl; l++) {
        for (int t = 0; t < c->nnt; t++) {
            c->nsrc[l][t] = b[l].nodes[t].num_src;
            c->ndst[l][t] = b[l].nodes[t].num_dst;
            c->ids[l][t] = dup64(b[l].nodes[t].ids, c->nsrc[l][t]);
        }
        for (int e = 0; e < c->net; e++) {
            size_t n = b[l].edges[e].n;
            c->ne[l][e] = n;
            c->es[l][e] = dup64(b[l].edges[e].src, n);
            c->ed[l][e] = dup64(b[l].edges[e].dst, n);
            c->ee[l][e] = dup64(b[l].edges[e].eid, n);
        }
    }
}

static void
bcopy_free(struct bcopy *c)
{
    for (int l = 0; l < c->nl; l++) {
        for (int t = 0; t < c->nnt; t++)
            free(c->ids[l][t]);
        for (int e = 0; e < c->net; e++) {
            free(c->es[l][e]);
            free(c->ed[l][e]);
            free(c->ee[l][e]);
        }
    }
}

/* 1 if b equals the copy exactly. */
static int
bcopy_same(const struct bcopy *c, const gkv_block *b)
{
    for (int l = 0; l < c->nl; l++) {
        for (int t = 0; t < c->nnt; t++) {
            if (b[l].nodes[t].num_src != c->nsrc[l][t] ||
                b[l].nodes[t].num_dst != c->ndst[l][t] ||
                (c->nsrc[l][t] > 0 &&
                 memcmp(b[l].nodes[t].ids, c->ids[l][t],
                        c->nsrc[l][t] * 8) != 0))
                return 0;
        }
        for (int e = 0; e < c->net; e++) {
            size_t n = c->ne[l][e];
            if (b[l].edges[e].n != n)
                return 0;
            if (n > 0 && (memcmp(b[l].edges[e].src, c->es[l][e], n * 8) ||
                          memcmp(b[l].edges[e].dst, c->ed[l][e], n * 8) ||
                          memcmp(b[l].edges[e].eid, c->ee[l][e], n * 8)))
                return 0;
        }
    }
    return 1;
}

/* Checks the structure of homogeneous blocks against the graph 'g'
 * (direction IN): node lists unique with dst first and dst = the next
 * block's src, every edge a real edge with its eid, counts = min(deg, k)
 * without replacement (k with replacement, 0 for deg 0), no duplicate eid
 * per dst without replacement, new sources in first-appearance order. */
static void
check_blocks_homo(const gkv_graph *g, const gkv_csc *csc, const gkv_block *b,
                  int nl, const int *fan, int replace, const int64_t *seeds,
                  size_t nseeds)
{
    gkv_coo coo;
    int64_t N = gkv_graph_num_nodes(g, 0);
    int64_t *mark = malloc((size_t)N * sizeof *mark);

    GKVT_OK(gkv_graph_edges(g, 0, &coo));
    for (int l = nl - 1; l >= 0; l--) {
        const gkv_block_nodes *bn = &b[l].nodes[0];
        const gkv_sample_edges *be = &b[l].edges[0];
        size_t e = 0, nextnew = bn->num_dst;
        int k = fan[l];
        if (l == nl - 1) {
            assert_int_equal(bn->num_dst, nseeds);
            gkvt_expect_i64(bn->ids, seeds, nseeds, "seeds");
        } else {
            assert_int_equal(bn->num_dst, b[l + 1].nodes[0].num_src);
            gkvt_expect_i64(bn->ids, b[l + 1].nodes[0].ids, bn->num_dst,
                            "dst = next block's src");
        }
        for (int64_t i = 0; i < N; i++)
            mark[i] = -1;
        for (size_t i = 0; i < bn->num_src; i++) {
            if (mark[bn->ids[i]] >= 0)
                fail_msg("layer %d: node %lld twice", l,
                         (long long)bn->ids[i]);
            mark[bn->ids[i]] = (int64_t)i;
        }
        for (size_t i = 0; i < bn->num_dst; i++) {
            int64_t v = bn->ids[i];
            int64_t deg = csc->indptr[v + 1] - csc->indptr[v];
            int64_t want = k < 0 ? deg : replace ? (deg > 0 ? k : 0)
                           : (deg < k ? deg : k);
            size_t e0 = e;
            while (e < be->n && be->dst[e] == (int64_t)i) {
                int64_t u = bn->ids[be->src[e]], id = be->eid[e];
                if (id < 0 || id >= coo.n || coo.src[id] != u ||
                    coo.dst[id] != v)
                    fail_msg("layer %d: edge %lld -> %lld with eid %lld is "
                             "not in the graph", l, (long long)u,
                             (long long)v, (long long)id);
                if (be->src[e] >= (int64_t)bn->num_dst) {
                    /* a new source: its local ID is the next one, the
                     * first time it appears */
                    if (be->src[e] == (int64_t)nextnew)
                        nextnew++;
                    else if (be->src[e] > (int64_t)nextnew)
                        fail_msg("layer %d: source %lld appears before %zu",
                                 l, (long long)be->src[e], nextnew);
                }
                if (!replace)
                    for (size_t q = e0; q < e; q++)
                        if (be->eid[q] == id)
                            fail_msg("layer %d: eid %lld twice for dst %lld",
                                     l, (long long)id, (long long)v);
                e++;
            }
            if ((int64_t)(e - e0) != want)
                fail_msg("layer %d: dst %lld (degree %lld) got %zu edges, "
                         "want %lld", l, (long long)v, (long long)deg, e - e0,
                         (long long)want);
        }
        assert_int_equal(e, be->n);
        assert_int_equal(nextnew, bn->num_src);
    }
    free(mark);
}

/* ---- the fixed graphs --------------------------------------------------- */

static const int64_t homo_in[8][4][3] = {
    {{3, 0, 4}, {6, 0, 8}},
    {{0, 1, 0}, {4, 1, 12}},
    {{0, 2, 1}, {1, 2, 2}},
    {{2, 3, 3}, {2, 3, 5}, {4, 3, 6}, {0, 3, 13}},
    {{1, 4, 9}, {3, 4, 10}},
    {{5, 5, 7}, {6, 5, 11}},
    {{0}}, {{0}},
};
static const size_t homo_indeg[8] = {2, 2, 2, 4, 2, 2, 0, 0};
static const int64_t homo_out[8][3][3] = {
    {{0, 1, 0}, {0, 2, 1}, {0, 3, 13}},
    {{1, 2, 2}, {1, 4, 9}},
    {{2, 3, 3}, {2, 3, 5}},
    {{3, 0, 4}, {3, 4, 10}},
    {{4, 3, 6}, {4, 1, 12}},
    {{5, 5, 7}},
    {{6, 0, 8}, {6, 5, 11}},
    {{0}},
};
static const size_t homo_outdeg[8] = {3, 2, 2, 2, 2, 1, 2, 0};

/* graph__sample_hop's per-seed counts (what a server packs its SAMPLE
 * reply by): each node three times in a row, 300 seeds, so that one and
 * three threads (the parallel path: a fresh sampler's first call) both
 * run; every count is min(fanout, degree) (fanout with replacement when
 * the degree is not 0), the counts sum to the edges, and seed j's edges
 * are centred on seeds[j]. */
static void
test_hop_counts(void **state)
{
    gkv_sgraph *sg = gkvt_sg_fixed(0, GKV_SG_CSR);
    int64_t seeds[300], c64[300];
    int64_t *cv[1] = {c64};
    const int64_t *sp[1] = {seeds};
    size_t ns[1] = {300};

    (void)state;
    for (int i = 0; i < 300; i++)
        seeds[i] = (i / 3) % 8;
    for (int nt = 1; nt <= 3; nt += 2)
        for (int dir = 0; dir < 2; dir++)
            for (int rep = 0; rep < 2; rep++) {
                gkv_sampler *s = gkvt_sampler(sg, nt);
                gkv_sample_opts o;
                gkv_sample_edges out[1];
                const int64_t *ctr;
                int fan = 2;
                size_t e = 0;
                memset(&o, 0, sizeof o);
                o.dir = dir;
                o.flags = rep ? GKV_SAMPLE_REPLACE : 0;
                for (int i = 0; i < 300; i++)
                    c64[i] = -7;
                GKVT_OK(graph__sample_hop(s, sp, ns, &fan, 1, 0, &o, NULL, cv,
                                          out));
                ctr = dir == GKV_DIR_IN ? out[0].dst : out[0].src;
                for (int j = 0; j < 300; j++) {
                    int64_t deg = (int64_t)(dir == GKV_DIR_IN
                                            ? homo_indeg[seeds[j]]
                                            : homo_outdeg[seeds[j]]);
                    int64_t want = deg == 0 ? 0 : rep ? fan
                                   : deg < fan ? deg : fan;
                    if (c64[j] != want)
                        fail_msg("%d threads, dir %d, replace %d: seed %d "
                                 "(node %lld) counted %lld, want %lld", nt,
                                 dir, rep, j, (long long)seeds[j],
                                 (long long)c64[j], (long long)want);
                    for (int64_t k = 0; k < c64[j]; k++, e++)
                        assert_int_equal(ctr[e], seeds[j]);
                }
                assert_int_equal(e, out[0].n);
                gkv_sampler_free(s);
            }
    gkv_sgraph_free(sg);
}

static void
test_fixed_homo_all(void **state)
{
    gkv_sgraph *sg = gkvt_sg_fixed(0, GKV_SG_CSR);
    gkv_sample_opts o;
    gkv_sample_edges out[1];
    int all = -1;

    (void)state;
    memset(&o, 0, sizeof o);
    for (int nt = 1; nt <= 3; nt += 2) {
        gkv_sampler *s = gkvt_sampler(sg, nt);
        for (int dir = 0; dir < 2; dir++) {
            /* each node alone, then all eight at once, then 200 seeds
             * (the parallel path) */
            int64_t v8[8] = {0, 1, 2, 3, 4, 5, 6, 7}, many[200];
            struct gkvt_seeds1 sd;
            o.dir = dir;
            for (int64_t v = 0; v < 8; v++) {
                sd = gkvt_one(&v, 1);
                GKVT_OK(gkv_sample_neighbors(s, sd.p, sd.n, &all, 1, 0, &o,
                                             out));
                if (dir == GKV_DIR_IN)
                    expect_edges(out, homo_in[v], homo_indeg[v]);
                else
                    expect_edges(out, homo_out[v], homo_outdeg[v]);
            }
            sd = gkvt_one(v8, 8);
            GKVT_OK(gkv_sample_neighbors(s, sd.p, sd.n, &all, 1, 3, &o, out));
            assert_int_equal(out[0].n, 14);
            for (int i = 0; i < 200; i++)
                many[i] = (i * 5) % 8;
            sd = gkvt_one(many, 200);
            GKVT_OK(gkv_sample_neighbors(s, sd.p, sd.n, &all, 1, 1, &o, out));
            {
                size_t e = 0;
                for (int i = 0; i < 200; i++) {
                    int64_t v = many[i];
                    size_t d = dir == 0 ? homo_indeg[v] : homo_outdeg[v];
                    for (size_t j = 0; j < d; j++, e++) {
                        const int64_t *w = dir == 0 ? homo_in[v][j]
                                                    : homo_out[v][j];
                        assert_int_equal(out[0].src[e], w[0]);
                        assert_int_equal(out[0].dst[e], w[1]);
                        assert_int_equal(out[0].eid[e], w[2]);
                    }
                }
                assert_int_equal(out[0].n, e);
            }
        }
        gkv_sampler_free(s);
    }
    gkv_sgraph_free(sg);
}

static void
test_fixed_homo_weighted_and_excluded(void **state)
{
    gkv_sgraph *sg = gkvt_sg_fixed(0, 0);
    gkv_sampler *s = gkvt_sampler(sg, 1);
    gkv_sample_opts o;
    gkv_sample_edges out[1];
    int64_t v1 = 1, v3 = 3, many[256];
    struct gkvt_seeds1 sd;
    int all = -1, k100 = 100, k1 = 1, k5 = 5;
    int64_t ex[] = {13, 3, 3};
    size_t nex = 3;
    const int64_t *exp[1] = {ex};

    (void)state;
    memset(&o, 0, sizeof o);
    o.flags = GKV_SAMPLE_WEIGHTED;
    /* node 1's in-edges: e0 (w 1) and e12 (w 0) */
    sd = gkvt_one(&v1, 1);
    GKVT_OK(gkv_sample_neighbors(s, sd.p, sd.n, &all, 1, 0, &o, out));
    expect_edges(out, (const int64_t[][3]){{0, 1, 0}}, 1);
    o.flags = GKV_SAMPLE_WEIGHTED | GKV_SAMPLE_REPLACE;
    GKVT_OK(gkv_sample_neighbors(s, sd.p, sd.n, &k100, 1, 0, &o, out));
    assert_int_equal(out[0].n, 100);
    for (int i = 0; i < 100; i++)
        assert_int_equal(out[0].eid[i], 0);
    /* uniform with replacement does draw e12 */
    o.flags = GKV_SAMPLE_REPLACE;
    GKVT_OK(gkv_sample_neighbors(s, sd.p, sd.n, &k100, 1, 0, &o, out));
    {
        int n12 = 0;
        for (int i = 0; i < 100; i++)
            n12 += out[0].eid[i] == 12;
        assert_true(n12 > 20 && n12 < 80);
    }
    /* weighted fanout 1 over every node at many seeds: never e12 */
    for (int i = 0; i < 256; i++)
        many[i] = i % 8;
    sd = gkvt_one(many, 256);
    for (uint64_t seed = 0; seed < 20; seed++) {
        o.seed = seed;
        for (int f = 0; f < 2; f++) {
            o.flags = GKV_SAMPLE_WEIGHTED | (f ? GKV_SAMPLE_REPLACE : 0);
            GKVT_OK(gkv_sample_neighbors(s, sd.p, sd.n, &k1, 1, (int)seed, &o,
                                         out));
            for (size_t e = 0; e < out[0].n; e++)
                assert_int_not_equal(out[0].eid[e], 12);
        }
    }
    /* excluded e13 and e3 (given twice): node 3 keeps e5, e6 */
    memset(&o, 0, sizeof o);
    o.exclude = exp;
    o.exclude_n = &nex;
    sd = gkvt_one(&v3, 1);
    GKVT_OK(gkv_sample_neighbors(s, sd.p, sd.n, &all, 1, 0, &o, out));
    expect_edges(out, (const int64_t[][3]){{2, 3, 5}, {4, 3, 6}}, 2);
    GKVT_OK(gkv_sample_neighbors(s, sd.p, sd.n, &k5, 1, 0, &o, out));
    expect_edges(out, (const int64_t[][3]){{2, 3, 5}, {4, 3, 6}}, 2);
    for (uint64_t seed = 0; seed < 50; seed++) {
        o.seed = seed;
        for (int f = 0; f < 4; f++) {
            o.flags = (f & 1 ? GKV_SAMPLE_REPLACE : 0) |
                      (f & 2 ? GKV_SAMPLE_WEIGHTED : 0);
            GKVT_OK(gkv_sample_neighbors(s, sd.p, sd.n, &k1, 1, 0, &o, out));
            assert_int_equal(out[0].n, 1);
            assert_true(out[0].eid[0] == 5 || out[0].eid[0] == 6);
        }
    }
    gkv_sampler_free(s);
    gkv_sgraph_free(sg);
}

static void
test_fixed_hetero(void **state)
{
    gkv_sgraph *sg = gkvt_sg_fixed(1, GKV_SG_CSR);
    gkv_sampler *s = gkvt_sampler(sg, 2);
    gkv_sample_edges out[3];
    gkv_block b[1];
    int all = -1;
    int64_t users[] = {0, 1, 2, 3}, items[] = {0, 1, 2, 3, 4}, u0 = 0, i1 = 1;
    const int64_t *sp[2] = {users, items};
    size_t sn[2] = {4, 5};
    gkv_sample_opts o;

    (void)state;
    memset(&o, 0, sizeof o);
    GKVT_OK(gkv_sample_neighbors(s, sp, sn, &all, 1, 0, NULL, out));
    expect_edges(&out[0], (const int64_t[][3]){{2, 0, 3}, {3, 0, 4},
                 {0, 1, 0}, {0, 2, 1}, {1, 2, 2}, {3, 2, 5}}, 6);
    expect_edges(&out[1], (const int64_t[][3]){{0, 0, 0}, {0, 1, 1},
                 {1, 1, 2}, {2, 1, 4}, {3, 1, 6}, {1, 3, 3}, {2, 4, 5}}, 7);
    expect_edges(&out[2], (const int64_t[][3]){{1, 0, 1}, {0, 1, 0},
                 {1, 2, 2}, {4, 3, 4}, {3, 4, 3}}, 5);
    /* per-etype fanouts: only "buys" */
    {
        int fan[3] = {0, -1, 0};
        GKVT_OK(gkv_sample_neighbors(s, sp, sn, fan, 3, 0, NULL, out));
        assert_int_equal(out[0].n, 0);
        assert_int_equal(out[1].n, 7);
        assert_int_equal(out[2].n, 0);
    }
    /* out-edges of the users: follows and buys (similar has item seeds) */
    o.dir = GKV_DIR_OUT;
    {
        int64_t none[1];
        const int64_t *up[2] = {users, none};
        size_t un[2] = {4, 0};
        GKVT_OK(gkv_sample_neighbors(s, up, un, &all, 1, 0, &o, out));
        expect_edges(&out[0], (const int64_t[][3]){{0, 1, 0}, {0, 2, 1},
                     {1, 2, 2}, {2, 0, 3}, {3, 0, 4}, {3, 2, 5}}, 6);
        expect_edges(&out[1], (const int64_t[][3]){{0, 0, 0}, {0, 1, 1},
                     {1, 1, 2}, {1, 3, 3}, {2, 1, 4}, {2, 4, 5}, {3, 1, 6}},
                     7);
        assert_int_equal(out[2].n, 0);
    }
    /* a hetero block by hand: seeds user 0, item 1, all neighbours.
     *   follows into u0: (u2, e3) (u3, e4)       users: 0 | 2 3
     *   buys into i1: (u0,e1) (u1,e2) (u2,e4) (u3,e6)   users: + 1
     *   similar into i1: (i0, e0)               items: 1 | 0 */
    sp[0] = &u0;
    sp[1] = &i1;
    sn[0] = sn[1] = 1;
    GKVT_OK(gkv_sample_blocks(s, sp, sn, &all, 1, 1, NULL, b));
    assert_int_equal(b[0].num_ntypes, 2);
    assert_int_equal(b[0].num_etypes, 3);
    assert_int_equal(b[0].nodes[0].num_dst, 1);
    assert_int_equal(b[0].nodes[0].num_src, 4);
    gkvt_expect_i64(b[0].nodes[0].ids, (const int64_t[]){0, 2, 3, 1}, 4,
                    "users");
    assert_int_equal(b[0].nodes[1].num_dst, 1);
    assert_int_equal(b[0].nodes[1].num_src, 2);
    gkvt_expect_i64(b[0].nodes[1].ids, (const int64_t[]){1, 0}, 2,
                    "items");
    expect_edges(&b[0].edges[0], (const int64_t[][3]){{1, 0, 3}, {2, 0, 4}},
                 2);
    expect_edges(&b[0].edges[1], (const int64_t[][3]){{0, 0, 1}, {3, 0, 2},
                 {1, 0, 4}, {2, 0, 6}}, 4);
    expect_edges(&b[0].edges[2], (const int64_t[][3]){{1, 0, 0}}, 1);
    /* two layers: the second hop starts from users {0,2,3,1}, items {1,0} */
    {
        gkv_block b2[2];
        GKVT_OK(gkv_sample_blocks(s, sp, sn, (const int[]){-1, -1}, 1, 2,
                                  NULL, b2));
        assert_int_equal(b2[1].nodes[0].num_src, 4);
        assert_int_equal(b2[0].nodes[0].num_dst, 4);
        gkvt_expect_i64(b2[0].nodes[0].ids, (const int64_t[]){0, 2, 3, 1}, 4,
                        "users");
        gkvt_expect_i64(b2[0].nodes[1].ids, (const int64_t[]){1, 0}, 2,
                        "items");
        /* follows into u0 u2 u3 u1: u0 <- 2,3; u2 <- 0,1,3; u1 <- 0 */
        expect_edges(&b2[0].edges[0], (const int64_t[][3]){{1, 0, 3},
                     {2, 0, 4}, {0, 1, 1}, {3, 1, 2}, {2, 1, 5}, {0, 3, 0}},
                     6);
        /* similar into i1 (i0), i0 (i1) */
        expect_edges(&b2[0].edges[2], (const int64_t[][3]){{1, 0, 0},
                     {0, 1, 1}}, 2);
        assert_int_equal(b2[0].edges[1].n, 5);   /* i1: 4 buyers, i0: 1 */
    }
    gkv_sampler_free(s);
    gkv_sgraph_free(sg);
}

static void
test_fixed_homo_blocks(void **state)
{
    gkv_sgraph *sg = gkvt_sg_fixed(0, 0);
    int64_t seeds[] = {3, 0};
    struct gkvt_seeds1 sd = gkvt_one(seeds, 2);
    const int fan[2] = {-1, -1};

    (void)state;
    for (int nt = 1; nt <= 3; nt++) {
        gkv_sampler *s = gkvt_sampler(sg, nt);
        gkv_block b[2];
        for (int rep = 0; rep < 2; rep++) {     /* markers were reset */
            GKVT_OK(gkv_sample_blocks(s, sd.p, sd.n, fan, 1, 2, NULL, b));
            /* block 1 (seeds): 3 <- (2,e3) (2,e5) (4,e6) (0,e13);
             * 0 <- (3,e4) (6,e8). Nodes 3 0 | 2 4 6. */
            assert_int_equal(b[1].nodes[0].num_dst, 2);
            assert_int_equal(b[1].nodes[0].num_src, 5);
            gkvt_expect_i64(b[1].nodes[0].ids,
                            (const int64_t[]){3, 0, 2, 4, 6}, 5,
                            "block 1 nodes");
            expect_edges(&b[1].edges[0], (const int64_t[][3]){{2, 0, 3},
                         {2, 0, 5}, {3, 0, 6}, {1, 0, 13}, {0, 1, 4},
                         {4, 1, 8}}, 6);
            /* block 0: dst 3 0 2 4 6; 2 <- (0,e1) (1,e2); 4 <- (1,e9)
             * (3,e10); 6 <- none. Nodes 3 0 2 4 6 | 1. */
            assert_int_equal(b[0].nodes[0].num_dst, 5);
            assert_int_equal(b[0].nodes[0].num_src, 6);
            gkvt_expect_i64(b[0].nodes[0].ids,
                            (const int64_t[]){3, 0, 2, 4, 6, 1}, 6,
                            "block 0 nodes");
            expect_edges(&b[0].edges[0], (const int64_t[][3]){{2, 0, 3},
                         {2, 0, 5}, {3, 0, 6}, {1, 0, 13}, {0, 1, 4},
                         {4, 1, 8}, {1, 2, 1}, {5, 2, 2}, {5, 3, 9},
                         {0, 3, 10}}, 10);
        }
        gkv_sampler_free(s);
    }
    gkv_sgraph_free(sg);
}

/* Out-direction blocks hold the sampled out-edges reversed: node 3's
 * out-edges 3 -> 0 (e4) and 3 -> 4 (e10) give nodes 3 | 0 4. */
static void
test_out_blocks(void **state)
{
    gkv_sgraph *sg = gkvt_sg_fixed(0, GKV_SG_CSR);
    gkv_sampler *s = gkvt_sampler(sg, 1);
    int64_t v = 3;
    struct gkvt_seeds1 sd = gkvt_one(&v, 1);
    gkv_sample_opts o;
    gkv_block b[2];
    int all = -1;

    (void)state;
    memset(&o, 0, sizeof o);
    o.dir = GKV_DIR_OUT;
    GKVT_OK(gkv_sample_blocks(s, sd.p, sd.n, &all, 1, 1, &o, b));
    assert_int_equal(b[0].nodes[0].num_dst, 1);
    assert_int_equal(b[0].nodes[0].num_src, 3);
    gkvt_expect_i64(b[0].nodes[0].ids, (const int64_t[]){3, 0, 4}, 3, "nodes");
    expect_edges(&b[0].edges[0], (const int64_t[][3]){{1, 0, 4}, {2, 0, 10}},
                 2);
    /* two layers: 0's out-edges 0->1 (e0) 0->2 (e1) 0->3 (e13); 4's 4->3
     * (e6) 4->1 (e12) */
    GKVT_OK(gkv_sample_blocks(s, sd.p, sd.n, (const int[]){-1, -1}, 1, 2, &o,
                              b));
    gkvt_expect_i64(b[0].nodes[0].ids, (const int64_t[]){3, 0, 4, 1, 2}, 5,
                    "nodes");
    expect_edges(&b[0].edges[0], (const int64_t[][3]){{1, 0, 4}, {2, 0, 10},
                 {3, 1, 0}, {4, 1, 1}, {0, 1, 13}, {0, 2, 6}, {3, 2, 12}}, 7);
    gkv_sampler_free(s);
    gkv_sgraph_free(sg);
}

/* A heterogeneous graph from R-MAT edges: node types a (N) and b (N / 2),
 * edge types a->a, a->b, b->a. Blocks must be real edges, with per-type
 * node lists unique, dst first, and be the same on 1, 2 and 3 threads. */
static void
test_hetero_threads(void **state)
{
    gkv_graph *r = gkvt_rmat(12, 21), *g;
    gkv_coo rc, coo[3];
    int64_t N = gkv_graph_num_nodes(r, 0), *s2, *d2;
    int e0, e1, e2;
    gkv_sgraph *sg;
    gkv_sampler *s[4];
    uint64_t st = 77;
    int64_t *sa = gkvt_distinct_seeds(N, &st);
    int64_t *sb = gkvt_distinct_seeds(N / 2, &st);
    const int64_t *sp[2] = {sa, sb};
    size_t sn[2] = {400, 300};
    /* per layer, per etype: blocks[0] row first */
    const int fan[6] = {2, 3, 1, 4, -1, 6};
    struct bcopy ref;
    gkv_block b[2];
    int64_t *mark;

    (void)state;
    GKVT_OK(gkv_graph_edges(r, 0, &rc));
    GKVT_OK(gkv_graph_new(&g));
    GKVT_OK(gkv_graph_add_ntype(g, "a", N, NULL));
    GKVT_OK(gkv_graph_add_ntype(g, "b", N / 2, NULL));
    GKVT_OK(gkv_graph_add_etype(g, "a", "aa", "a", &e0));
    GKVT_OK(gkv_graph_add_etype(g, "a", "ab", "b", &e1));
    GKVT_OK(gkv_graph_add_etype(g, "b", "ba", "a", &e2));
    s2 = malloc((size_t)rc.n * 8);
    d2 = malloc((size_t)rc.n * 8);
    GKVT_OK(gkv_graph_add_edges(g, e0, rc.src, rc.dst, NULL, (size_t)rc.n));
    for (int64_t i = 0; i < rc.n; i++) {
        s2[i] = rc.src[i];
        d2[i] = rc.dst[i] % (N / 2);
    }
    GKVT_OK(gkv_graph_add_edges(g, e1, s2, d2, NULL, (size_t)rc.n / 2));
    for (int64_t i = 0; i < rc.n; i++) {
        s2[i] = rc.src[i] % (N / 2);
        d2[i] = rc.dst[i];
    }
    GKVT_OK(gkv_graph_add_edges(g, e2, s2, d2, NULL, (size_t)rc.n / 3));
    for (int e = 0; e < 3; e++)
        GKVT_OK(gkv_graph_edges(g, e, &coo[e]));
    GKVT_OK(gkv_sgraph_from_graph(&sg, g, 0, 2));
    for (int t = 1; t <= 3; t++)
        s[t] = gkvt_sampler(sg, t);
    GKVT_OK(gkv_sample_blocks(s[1], sp, sn, fan, 3, 2, NULL, b));
    bcopy_take(&ref, b, 2);
    for (int t = 2; t <= 3; t++) {
        GKVT_OK(gkv_sample_blocks(s[t], sp, sn, fan, 3, 2, NULL, b));
        if (!bcopy_same(&ref, b))
            fail_msg("%d threads differ from 1", t);
    }
    mark = malloc((size_t)N * sizeof *mark);
    for (int l = 1; l >= 0; l--) {
        for (int t = 0; t < 2; t++) {
            const gkv_block_nodes *bn = &b[l].nodes[t];
            const int64_t *want = l == 1 ? sp[t] : b[1].nodes[t].ids;
            size_t nw = l == 1 ? sn[t] : b[1].nodes[t].num_src;
            assert_int_equal(bn->num_dst, nw);
            gkvt_expect_i64(bn->ids, want, nw, "dst nodes");
            for (int64_t i = 0; i < N; i++)
                mark[i] = 0;
            for (size_t i = 0; i < bn->num_src; i++) {
                assert_int_equal(mark[bn->ids[i]], 0);
                mark[bn->ids[i]] = 1;
            }
        }
        for (int e = 0; e < 3; e++) {
            const gkv_sample_edges *be = &b[l].edges[e];
            int snt = e == 2 ? 1 : 0, dnt = e == 1 ? 1 : 0;
            assert_true(be->n > 0);
            for (size_t i = 0; i < be->n; i++) {
                int64_t id = be->eid[i];
                assert_true(be->src[i] >= 0 &&
                            (size_t)be->src[i] < b[l].nodes[snt].num_src);
                assert_true(be->dst[i] >= 0 &&
                            (size_t)be->dst[i] < b[l].nodes[dnt].num_dst);
                assert_true(id >= 0 && id < coo[e].n);
                assert_int_equal(coo[e].src[id],
                                 b[l].nodes[snt].ids[be->src[i]]);
                assert_int_equal(coo[e].dst[id],
                                 b[l].nodes[dnt].ids[be->dst[i]]);
            }
        }
    }
    bcopy_free(&ref);
    for (int t = 1; t <= 3; t++)
        gkv_sampler_free(s[t]);
    gkv_sgraph_free(sg);
    gkv_graph_free(g);
    gkv_graph_free(r);
    free(s2);
    free(d2);
    free(sa);
    free(sb);
    free(mark);
}

/* ---- R-MAT properties --------------------------------------------------- */

static void
test_rmat_properties(void **state)
{
    uint64_t st = gkvt_seed();

    (void)state;
    for (int scale = 10; scale <= 12; scale++) {
        gkv_graph *g = gkvt_rmat(scale, 7 + (uint64_t)scale);
        int64_t N = gkv_graph_num_nodes(g, 0);
        gkv_sgraph *sg;
        gkv_csc csc, csr;
        gkv_coo coo;
        gkv_sampler *s;
        int64_t *seeds = gkvt_distinct_seeds(N, &st);
        static const int ks[] = {1, 5, 15, 70, -1};

        GKVT_OK(gkv_sgraph_from_graph(&sg, g, GKV_SG_CSR, 2));
        GKVT_OK(gkv_graph_csc(g, 0, 1, &csc));
        GKVT_OK(gkv_graph_csr(g, 0, 1, &csr));
        GKVT_OK(gkv_graph_edges(g, 0, &coo));
        s = gkvt_sampler(sg, scale == 11 ? 2 : 1);
        for (size_t ki = 0; ki < N_OF(ks); ki++)
            for (int mode = 0; mode < 4; mode++) {
                int k = ks[ki], replace = mode & 1, dir = mode >> 1;
                const gkv_csc *a = dir ? &csr : &csc;
                gkv_sample_opts o;
                gkv_sample_edges out[1];
                struct gkvt_seeds1 sd = gkvt_one(seeds, 1000);
                size_t e = 0;
                memset(&o, 0, sizeof o);
                o.seed = st;
                o.dir = dir;
                o.flags = replace ? GKV_SAMPLE_REPLACE : 0;
                GKVT_OK(gkv_sample_neighbors(s, sd.p, sd.n, &k, 1, 0, &o,
                                             out));
                for (int i = 0; i < 1000; i++) {
                    int64_t v = seeds[i], deg = a->indptr[v + 1] - a->indptr[v];
                    int64_t want = k < 0 ? deg : replace ? (deg ? k : 0)
                                   : (deg < k ? deg : k);
                    size_t e0 = e;
                    for (int64_t j = 0; j < want; j++, e++) {
                        int64_t id = out[0].eid[e];
                        assert_true(e < out[0].n);
                        if (id < 0 || id >= coo.n ||
                            coo.src[id] != out[0].src[e] ||
                            coo.dst[id] != out[0].dst[e] ||
                            (dir ? out[0].src[e] : out[0].dst[e]) != v)
                            fail_msg("scale %d k %d mode %d: edge %zu "
                                     "(%lld -> %lld, e%lld) is not an edge "
                                     "of seed %lld", scale, k, mode, e,
                                     (long long)out[0].src[e],
                                     (long long)out[0].dst[e], (long long)id,
                                     (long long)v);
                        if (!replace)
                            for (size_t q = e0; q < e; q++)
                                assert_int_not_equal(out[0].eid[q], id);
                    }
                }
                assert_int_equal(e, out[0].n);
            }
        /* blocks: structure and counts */
        {
            gkv_block b[3];
            int fan[3] = {5, 10, 15};
            struct gkvt_seeds1 sd = gkvt_one(seeds, 256);
            gkv_sample_opts o;
            memset(&o, 0, sizeof o);
            o.seed = st + 1;
            GKVT_OK(gkv_sample_blocks(s, sd.p, sd.n, fan, 1, 3, &o, b));
            check_blocks_homo(g, &csc, b, 3, fan, 0, seeds, 256);
            o.flags = GKV_SAMPLE_REPLACE;
            GKVT_OK(gkv_sample_blocks(s, sd.p, sd.n, fan, 1, 3, &o, b));
            check_blocks_homo(g, &csc, b, 3, fan, 1, seeds, 256);
        }
        gkv_sampler_free(s);
        gkv_sgraph_free(sg);
        gkv_csc_free(&csc);
        gkv_csc_free(&csr);
        gkv_graph_free(g);
        free(seeds);
    }
}

/* ---- weights ------------------------------------------------------------ */

/* A star: node 0 has in-edges from 1..n with the given weights. */
static gkv_graph *
star(const float *w, int n)
{
    gkv_graph *g;
    int64_t src[64], dst[64];

    GKVT_OK(gkv_graph_new_homo(&g, n + 1));
    for (int i = 0; i < n; i++) {
        src[i] = i + 1;
        dst[i] = 0;
    }
    GKVT_OK(gkv_graph_add_edges(g, 0, src, dst, w, (size_t)n));
    return g;
}

static double
chi2(const long *cnt, const float *w, int n, long total)
{
    double sw = 0, x = 0;

    for (int i = 0; i < n; i++)
        sw += w[i];
    for (int i = 0; i < n; i++) {
        double ex = total * w[i] / sw;
        if (w[i] == 0) {
            if (cnt[i] != 0)
                fail_msg("weight-0 edge %d drawn %ld times", i, cnt[i]);
            continue;
        }
        x += (cnt[i] - ex) * (cnt[i] - ex) / ex;
    }
    return x;
}

static void
test_weighted_distribution(void **state)
{
    static const float w[6] = {1, 2, 3, 4, 0, 10};
    gkv_graph *g = star(w, 6);
    gkv_sgraph *sg;
    gkv_sampler *s;
    gkv_sample_opts o;
    gkv_sample_edges out[1];
    int64_t zero = 0, seeds[2000];
    struct gkvt_seeds1 sd = gkvt_one(&zero, 1);
    long cnt[6] = {0};
    int k = 20000, k1 = 1;
    gkv_coo coo;

    (void)state;
    GKVT_OK(gkv_sgraph_from_graph(&sg, g, 0, 1));
    s = gkvt_sampler(sg, 1);
    memset(&o, 0, sizeof o);
    o.seed = 12345;
    /* with replacement: 20000 draws of node 0; 4 degrees of freedom (five
     * positive weights), chi-square 0.999 quantile 18.47 */
    o.flags = GKV_SAMPLE_WEIGHTED | GKV_SAMPLE_REPLACE;
    GKVT_OK(gkv_sample_neighbors(s, sd.p, sd.n, &k, 1, 0, &o, out));
    assert_int_equal(out[0].n, 20000);
    for (size_t i = 0; i < out[0].n; i++)
        cnt[out[0].eid[i]]++;
    assert_true(chi2(cnt, w, 6, 20000) < 18.47);
    /* without replacement, fanout 1: one draw per (seed, layer); node 0
     * repeated 2000 times draws the same edge, so vary the layer */
    memset(cnt, 0, sizeof cnt);
    o.flags = GKV_SAMPLE_WEIGHTED;
    for (int layer = 0; layer < 4000; layer++) {
        GKVT_OK(gkv_sample_neighbors(s, sd.p, sd.n, &k1, 1, layer, &o, out));
        assert_int_equal(out[0].n, 1);
        cnt[out[0].eid[0]]++;
    }
    assert_true(chi2(cnt, w, 6, 4000) < 18.47);
    /* the edge-weight tensor (by edge ID) gives the very same samples */
    GKVT_OK(gkv_graph_edges(g, 0, &coo));
    for (int i = 0; i < 2000; i++)
        seeds[i] = 0;
    {
        gkv_sample_edges o1[1], o2[1];
        int64_t *keep;
        const float *ew[1] = {coo.w};
        int64_t ewlen = coo.n;
        struct gkvt_seeds1 sd2 = gkvt_one(seeds, 2000);
        int k3 = 3;
        gkv_sampler *s2 = gkvt_sampler(sg, 2);
        o.flags = GKV_SAMPLE_WEIGHTED;
        GKVT_OK(gkv_sample_neighbors(s, sd2.p, sd2.n, &k3, 1, 2, &o, o1));
        keep = dup64(o1[0].eid, o1[0].n);
        o.flags = 0;
        o.edge_w = ew;
        o.edge_w_len = &ewlen;
        GKVT_OK(gkv_sample_neighbors(s2, sd2.p, sd2.n, &k3, 1, 2, &o, o2));
        assert_int_equal(o1[0].n, 6000);
        assert_int_equal(o2[0].n, 6000);
        assert_memory_equal(keep, o2[0].eid, 6000 * 8);
        free(keep);
        gkv_sampler_free(s2);
    }
    gkv_sampler_free(s);
    gkv_sgraph_free(sg);
    gkv_graph_free(g);

    /* rejection falls back to exact removal: one weight dwarfs the others */
    {
        static const float w2[7] = {100000, 1, 1, 0, 1, 1, 1};
        int k4 = 4;
        g = star(w2, 7);
        GKVT_OK(gkv_sgraph_from_graph(&sg, g, 0, 1));
        s = gkvt_sampler(sg, 1);
        memset(&o, 0, sizeof o);
        o.flags = GKV_SAMPLE_WEIGHTED;
        memset(cnt, 0, sizeof cnt);
        for (int layer = 0; layer < 300; layer++) {
            GKVT_OK(gkv_sample_neighbors(s, sd.p, sd.n, &k4, 1, layer, &o,
                                         out));
            assert_int_equal(out[0].n, 4);
            for (int i = 0; i < 4; i++) {
                assert_int_not_equal(out[0].eid[i], 3);
                for (int j = 0; j < i; j++)
                    assert_int_not_equal(out[0].eid[i], out[0].eid[j]);
            }
            assert_int_equal(out[0].eid[0], 0);     /* the heavy one first */
        }
        gkv_sampler_free(s);
        gkv_sgraph_free(sg);
        gkv_graph_free(g);
    }
}

/* ---- determinism -------------------------------------------------------- */

static void
test_determinism(void **state)
{
    gkv_graph *g = gkvt_rmat(12, 99);
    int64_t N = gkv_graph_num_nodes(g, 0);
    uint64_t st = 4242;
    int64_t *seeds = gkvt_distinct_seeds(N, &st);
    struct gkvt_seeds1 sd = gkvt_one(seeds, 1024);
    gkv_sgraph *sg;
    gkv_sampler *s[4];
    int fan[3] = {5, 10, 15};
    int64_t exl[64];
    size_t nexl = 64;
    const int64_t *exp[1] = {exl};

    (void)state;
    for (int i = 0; i < 64; i++)
        exl[i] = i * 997 % gkv_graph_num_edges(g, 0);
    GKVT_OK(gkv_sgraph_from_graph(&sg, g, 0, 2));
    for (int t = 1; t <= 3; t++)
        s[t] = gkvt_sampler(sg, t);
    for (int mode = 0; mode < 4; mode++) {
        gkv_sample_opts o;
        gkv_block b[3];
        struct bcopy ref;
        memset(&o, 0, sizeof o);
        o.seed = 77;
        if (mode == 1)
            o.flags = GKV_SAMPLE_REPLACE;
        if (mode == 2) {
            o.exclude = exp;
            o.exclude_n = &nexl;
        }
        if (mode == 3)
            fan[2] = -1;
        GKVT_OK(gkv_sample_blocks(s[1], sd.p, sd.n, fan, 1, 3, &o, b));
        bcopy_take(&ref, b, 3);
        assert_true(ref.ne[0][0] > 1000);
        /* the same again, and on 2 and 3 threads: fresh samplers, since
         * a sampler's first call always runs on all its threads (later
         * ones may run on the caller alone when that is faster) */
        for (int t = 1; t <= 3; t++) {
            gkv_sampler *x = t == 1 ? s[1] : gkvt_sampler(sg, t);
            GKVT_OK(gkv_sample_blocks(x, sd.p, sd.n, fan, 1, 3, &o, b));
            if (!bcopy_same(&ref, b))
                fail_msg("mode %d: %d threads differ from 1", mode, t);
            if (t > 1)
                gkv_sampler_free(x);
        }
        /* one 2-thread sampler, call after call: it runs some calls on
         * its workers and some on the caller alone (whichever is faster,
         * retrying the other every 32 calls); every result is the same */
        if (mode == 0)
            for (int c = 0; c < 40; c++) {
                GKVT_OK(gkv_sample_blocks(s[2], sd.p, sd.n, fan, 1, 3, &o,
                                          b));
                if (!bcopy_same(&ref, b))
                    fail_msg("call %d of a 2-thread sampler differs", c);
            }
        /* a different seed differs */
        o.seed = 78;
        GKVT_OK(gkv_sample_blocks(s[2], sd.p, sd.n, fan, 1, 3, &o, b));
        assert_false(bcopy_same(&ref, b));
        bcopy_free(&ref);
    }
    /* single hops too, and each hop of a block sample is the single hop
     * at that layer on its destination nodes */
    {
        gkv_block b[3];
        gkv_sample_edges o1[1], o2[1];
        fan[2] = 15;
        GKVT_OK(gkv_sample_blocks(s[3], sd.p, sd.n, fan, 1, 3, NULL, b));
        for (int h = 0; h < 3; h++) {
            int bi = 2 - h;
            const gkv_block_nodes *bn = &b[bi].nodes[0];
            struct gkvt_seeds1 hs = gkvt_one(bn->ids, bn->num_dst);
            int64_t *keep;
            GKVT_OK(gkv_sample_neighbors(s[1], hs.p, hs.n, &fan[bi], 1, h,
                                         NULL, o1));
            assert_int_equal(o1[0].n, b[bi].edges[0].n);
            for (size_t e = 0; e < o1[0].n; e++) {
                assert_int_equal(o1[0].src[e], bn->ids[b[bi].edges[0].src[e]]);
                assert_int_equal(o1[0].dst[e], bn->ids[b[bi].edges[0].dst[e]]);
                assert_int_equal(o1[0].eid[e], b[bi].edges[0].eid[e]);
            }
            keep = dup64(o1[0].eid, o1[0].n);
            {
                gkv_sampler *x = gkvt_sampler(sg, 2);
                GKVT_OK(gkv_sample_neighbors(x, hs.p, hs.n, &fan[bi], 1, h,
                                             NULL, o2));
                assert_int_equal(o2[0].n, o1[0].n);
                assert_memory_equal(o2[0].eid, keep, o1[0].n * 8);
                gkv_sampler_free(x);
            }
            free(keep);
        }
    }
    for (int t = 1; t <= 3; t++)
        gkv_sampler_free(s[t]);
    gkv_sgraph_free(sg);
    gkv_graph_free(g);
    free(seeds);
}

/* ---- split adjacency (partitions) --------------------------------------- */

struct piece {
    int64_t *indptr;
    gkv_sgraph *sg;
    gkv_sampler *s;
    int64_t lo, hi;
};

static void
test_split_adjacency(void **state)
{
    gkv_graph *g = gkvt_rmat(11, 5);
    int64_t N = gkv_graph_num_nodes(g, 0);
    int src_nt = 0, dst_nt = 0;
    gkv_csc csc;
    float *w;
    gkv_coo coo;
    struct piece pc[3];
    gkv_sgraph *whole;
    gkv_sampler *ws;
    const int64_t cuts[4] = {0, N / 3, N / 2 + 17, N};
    uint64_t st = 31337;
    int64_t *seeds = gkvt_distinct_seeds(N, &st);
    int fan[2] = {4, 9};

    (void)state;
    GKVT_OK(gkv_graph_csc(g, 0, 1, &csc));
    GKVT_OK(gkv_graph_edges(g, 0, &coo));
    w = malloc((size_t)csc.num_edges * sizeof *w);
    for (int64_t p = 0; p < csc.num_edges; p++)
        w[p] = (float)(1 + (csc.eids[p] * 7) % 5);
    for (int implicit = 0; implicit < 2; implicit++) {
        gkv_adj a;
        memset(&a, 0, sizeof a);
        GKVT_OK(gkv_sgraph_new(&whole, 1, &N, 1, &src_nt, &dst_nt));
        a.col_lo = 0;
        a.col_hi = N;
        a.indptr = csc.indptr;
        a.indices = csc.indices;
        a.eids = implicit ? NULL : csc.eids;
        a.w = w;
        GKVT_OK(gkv_sgraph_set_adj(whole, 0, GKV_DIR_IN, &a));
        for (int i = 0; i < 3; i++) {
            int64_t lo = cuts[i], hi = cuts[i + 1], base = csc.indptr[lo];
            pc[i].lo = lo;
            pc[i].hi = hi;
            pc[i].indptr = malloc((size_t)(hi - lo + 1) * 8);
            for (int64_t c = 0; c <= hi - lo; c++)
                pc[i].indptr[c] = csc.indptr[lo + c] - base;
            a.col_lo = lo;
            a.col_hi = hi;
            a.indptr = pc[i].indptr;
            a.indices = csc.indices + base;
            a.eids = implicit ? NULL : csc.eids + base;
            a.eid_lo = implicit ? base : 0;
            a.w = w + base;
            GKVT_OK(gkv_sgraph_new(&pc[i].sg, 1, &N, 1, &src_nt, &dst_nt));
            GKVT_OK(gkv_sgraph_set_adj(pc[i].sg, 0, GKV_DIR_IN, &a));
            pc[i].s = gkvt_sampler(pc[i].sg, i == 1 ? 2 : 1);
        }
        for (int mode = 0; mode < 3; mode++) {
            gkv_sample_opts o;
            gkv_block b[2];
            memset(&o, 0, sizeof o);
            o.seed = 2024 + (uint64_t)mode;
            o.flags = mode == 1 ? GKV_SAMPLE_REPLACE
                      : mode == 2 ? GKV_SAMPLE_WEIGHTED : 0;
            {
                struct gkvt_seeds1 sd = gkvt_one(seeds, 600);
                ws = gkvt_sampler(whole, 2); /* first call: on both threads */
                GKVT_OK(gkv_sample_blocks(ws, sd.p, sd.n, fan, 1, 2, &o, b));
            }
            /* every hop, node by node on the piece that owns it */
            for (int h = 0; h < 2; h++) {
                int bi = 1 - h;
                const gkv_block_nodes *bn = &b[bi].nodes[0];
                const gkv_sample_edges *be = &b[bi].edges[0];
                size_t e = 0;
                for (size_t i = 0; i < bn->num_dst; i++) {
                    int64_t v = bn->ids[i];
                    int p = v < cuts[1] ? 0 : v < cuts[2] ? 1 : 2;
                    struct gkvt_seeds1 one_v = gkvt_one(&v, 1);
                    gkv_sample_edges out[1];
                    GKVT_OK(gkv_sample_neighbors(pc[p].s, one_v.p, one_v.n,
                                                 &fan[bi], 1, h, &o, out));
                    for (size_t j = 0; j < out[0].n; j++, e++) {
                        assert_true(e < be->n);
                        assert_int_equal(be->dst[e], (int64_t)i);
                        assert_int_equal(out[0].src[j], bn->ids[be->src[e]]);
                        assert_int_equal(out[0].eid[j], be->eid[e]);
                        if (!implicit)
                            assert_int_equal(coo.src[out[0].eid[j]],
                                             out[0].src[j]);
                    }
                    /* and a node another piece owns is refused */
                    {
                        int q = (p + 1) % 3;
                        gkv_err rc = gkv_sample_neighbors(
                            pc[q].s, one_v.p, one_v.n, &fan[bi], 1, h, &o,
                            out);
                        char want[64];
                        assert_int_equal(rc, GKV_ERANGE);
                        snprintf(want, sizeof want, "node %lld ",
                                 (long long)v);
                        assert_non_null(strstr(gkv_sampler_errmsg(pc[q].s),
                                               want));
                    }
                }
                assert_int_equal(e, be->n);
            }
            gkv_sampler_free(ws);
        }
        for (int i = 0; i < 3; i++) {
            gkv_sampler_free(pc[i].s);
            gkv_sgraph_free(pc[i].sg);
            free(pc[i].indptr);
        }
        gkv_sgraph_free(whole);
    }
    free(w);
    free(seeds);
    gkv_csc_free(&csc);
    gkv_graph_free(g);
}

/* ---- edge mini-batches -------------------------------------------------- */

static void
test_edge_batch(void **state)
{
    gkv_graph *g = gkvt_rmat(10, 3), *g2;
    gkv_coo coo;
    int64_t N = gkv_graph_num_nodes(g, 0), m, *src, *dst, *rev;
    gkv_sgraph *sg;
    gkv_sampler *s1, *s2;
    int fan[2] = {5, -1};
    int64_t batch[64];
    uint64_t st = 99;

    (void)state;
    /* the graph with every edge's reverse: edge i and i + m */
    GKVT_OK(gkv_graph_edges(g, 0, &coo));
    m = coo.n;
    src = malloc((size_t)(2 * m) * 8);
    dst = malloc((size_t)(2 * m) * 8);
    rev = malloc((size_t)(2 * m) * 8);
    for (int64_t i = 0; i < m; i++) {
        src[i] = dst[i + m] = coo.src[i];
        dst[i] = src[i + m] = coo.dst[i];
        rev[i] = i + m;
        rev[i + m] = i;
    }
    GKVT_OK(gkv_graph_new_homo(&g2, N));
    GKVT_OK(gkv_graph_add_edges(g2, 0, src, dst, NULL, (size_t)(2 * m)));
    GKVT_OK(gkv_sgraph_from_graph(&sg, g2, 0, 1));
    s1 = gkvt_sampler(sg, 1);
    for (int i = 0; i < 64; i++)
        batch[i] = (int64_t)(tools__splitmix64(&st) % (uint64_t)(2 * m));
    for (int ex = 0; ex < 3; ex++) {
        gkv_edge_batch_spec sp;
        gkv_edge_batch eb;
        gkv_block b[2];
        struct bcopy ref;
        const gkv_block_nodes *sn;
        int64_t *want = malloc(64 * 7 * 8);
        size_t nw = 0;
        memset(&sp, 0, sizeof sp);
        sp.etype = 0;
        sp.eids = batch;
        sp.n = 64;
        sp.num_neg = 5;
        sp.exclude = ex == 0 ? 0 : ex == 1 ? GKV_EXCLUDE_SELF
                     : GKV_EXCLUDE_SELF | GKV_EXCLUDE_REVERSE;
        sp.reverse_etype = 0;
        sp.reverse_eids = rev;
        sp.reverse_n = 2 * m;
        GKVT_OK(gkv_sample_edge_batch(s1, &sp, fan, 1, 2, NULL, &eb, b));
        assert_int_equal(eb.num_pos, 64);
        assert_int_equal(eb.num_neg, 320);
        sn = &b[1].nodes[0];
        /* pairs map back to the right global nodes */
        for (int i = 0; i < 64; i++) {
            assert_int_equal(sn->ids[eb.pos_src[i]], src[batch[i]]);
            assert_int_equal(sn->ids[eb.pos_dst[i]], dst[batch[i]]);
            for (int j = 0; j < 5; j++) {
                int64_t nd;
                assert_int_equal(eb.neg_src[i * 5 + j], eb.pos_src[i]);
                assert_true(eb.neg_dst[i * 5 + j] >= 0 &&
                            eb.neg_dst[i * 5 + j] < (int64_t)sn->num_dst);
                nd = sn->ids[eb.neg_dst[i * 5 + j]];
                assert_true(nd >= 0 && nd < N);
            }
        }
        /* the seed set: union of the endpoints in first-appearance order */
        for (int i = 0; i < 64 * 7; i++) {
            int64_t v;
            if (i < 128)
                v = i % 2 ? dst[batch[i / 2]] : src[batch[i / 2]];
            else
                v = sn->ids[eb.neg_dst[i - 128]];
            size_t q;
            for (q = 0; q < nw && want[q] != v; q++)
                ;
            if (q == nw)
                want[nw++] = v;
        }
        assert_int_equal(sn->num_dst, nw);
        assert_int_equal(sn->num_src >= nw, 1);
        gkvt_expect_i64(sn->ids, want, nw, "seed set");
        /* exclusions, at both layers; without them the seed hop (fanout
         * -1) holds every batch edge */
        for (int l = 0; l < 2; l++)
            for (size_t e = 0; e < b[l].edges[0].n; e++) {
                int64_t id = b[l].edges[0].eid[e];
                for (int i = 0; i < 64; i++) {
                    if (ex >= 1 && id == batch[i])
                        fail_msg("excluded batch edge %lld sampled",
                                 (long long)id);
                    if (ex == 2 && id == rev[batch[i]])
                        fail_msg("excluded reverse edge %lld sampled",
                                 (long long)id);
                }
            }
        if (ex == 0)
            for (int i = 0; i < 64; i++) {
                size_t e;
                for (e = 0; e < b[1].edges[0].n; e++)
                    if (b[1].edges[0].eid[e] == batch[i])
                        break;
                assert_true(e < b[1].edges[0].n);
            }
        /* the same on two threads (a fresh sampler: its first call runs
         * on both) */
        bcopy_take(&ref, b, 2);
        {
            int64_t *keep = dup64(eb.neg_dst, 320);
            s2 = gkvt_sampler(sg, 2);
            GKVT_OK(gkv_sample_edge_batch(s2, &sp, fan, 1, 2, NULL, &eb, b));
            assert_true(bcopy_same(&ref, b));
            assert_memory_equal(keep, eb.neg_dst, 320 * 8);
            gkv_sampler_free(s2);
            free(keep);
        }
        bcopy_free(&ref);
        free(want);
    }
    /* reverse by type: a two-etype graph with "rev" holding edge i reversed */
    {
        gkv_graph *g3;
        gkv_sgraph *sg3;
        gkv_sampler *s3;
        int e_fwd, e_rev;
        gkv_edge_batch_spec sp;
        gkv_edge_batch eb;
        gkv_block b[1];
        int f1 = -1;
        GKVT_OK(gkv_graph_new(&g3));
        GKVT_OK(gkv_graph_add_ntype(g3, "n", N, NULL));
        GKVT_OK(gkv_graph_add_etype(g3, "n", "fwd", "n", &e_fwd));
        GKVT_OK(gkv_graph_add_etype(g3, "n", "rev", "n", &e_rev));
        GKVT_OK(gkv_graph_add_edges(g3, e_fwd, src, dst, NULL, (size_t)m));
        GKVT_OK(gkv_graph_add_edges(g3, e_rev, dst, src, NULL, (size_t)m));
        GKVT_OK(gkv_sgraph_from_graph(&sg3, g3, 0, 1));
        s3 = gkvt_sampler(sg3, 2);
        memset(&sp, 0, sizeof sp);
        sp.etype = e_fwd;
        sp.eids = batch;
        sp.n = 32;
        for (int i = 0; i < 32; i++)
            batch[i] %= m;
        sp.num_neg = 2;
        sp.exclude = GKV_EXCLUDE_SELF | GKV_EXCLUDE_REVERSE;
        sp.reverse_etype = e_rev;
        GKVT_OK(gkv_sample_edge_batch(s3, &sp, &f1, 1, 1, NULL, &eb, b));
        for (int et = 0; et < 2; et++)
            for (size_t e = 0; e < b[0].edges[et].n; e++)
                for (int i = 0; i < 32; i++)
                    assert_int_not_equal(b[0].edges[et].eid[e], batch[i]);
        sp.exclude = 0;
        GKVT_OK(gkv_sample_edge_batch(s3, &sp, &f1, 1, 1, NULL, &eb, b));
        for (int i = 0; i < 32; i++) {
            int found = 0;
            for (size_t e = 0; e < b[0].edges[e_rev].n; e++)
                found |= b[0].edges[e_rev].eid[e] == batch[i];
            assert_true(found);
        }
        gkv_sampler_free(s3);
        gkv_sgraph_free(sg3);
        gkv_graph_free(g3);
    }
    gkv_sampler_free(s1);
    gkv_sgraph_free(sg);
    gkv_graph_free(g2);
    gkv_graph_free(g);
    free(src);
    free(dst);
    free(rev);
}

/* ---- the generator as gkv_sample.h specifies it ------------------------- */

/* An independent transcription of the header's generator: the sampler
 * must give exactly these picks. */
static uint64_t
ref_m(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t
ref_a(uint64_t x, uint64_t v)
{
    return ref_m(x ^ ref_m(v + 0x9e3779b97f4a7c15ULL));
}

static uint64_t
ref_r(uint64_t dom, uint64_t seed, uint64_t layer, uint64_t et, uint64_t v,
      uint64_t t)
{
    uint64_t b = ref_a(ref_a(ref_a(ref_a(dom, seed), layer), et), v);
    return ref_m(b + (t + 1) * 0x9e3779b97f4a7c15ULL);
}

static uint64_t
ref_below(uint64_t r, uint64_t n)
{
    __extension__ unsigned __int128 p = (unsigned __int128)r * n;
    return (uint64_t)(p >> 64);
}

static void
test_generator_spec(void **state)
{
    const uint64_t DS = 0x474b5653414d504cULL, DN = 0x474b564e45474154ULL;
    gkv_graph *g = gkvt_rmat(10, 8);
    int64_t N = gkv_graph_num_nodes(g, 0), nodes[400];
    gkv_sgraph *sg;
    gkv_sampler *s;
    gkv_csc csc;
    gkv_sample_opts o;
    gkv_sample_edges out[1];
    size_t nn = 0;
    int k = 5, kr = 7;

    (void)state;
    GKVT_OK(gkv_sgraph_from_graph(&sg, g, 0, 1));
    GKVT_OK(gkv_graph_csc(g, 0, 1, &csc));
    s = gkvt_sampler(sg, 2);
    for (int64_t v = 0; v < N && nn < 400; v++)
        if (csc.indptr[v + 1] - csc.indptr[v] > 6)
            nodes[nn++] = v;
    assert_true(nn > 150);
    memset(&o, 0, sizeof o);
    o.seed = 9;
    for (int replace = 0; replace < 2; replace++) {
        struct gkvt_seeds1 sd = gkvt_one(nodes, nn);
        size_t e = 0;
        o.flags = replace ? GKV_SAMPLE_REPLACE : 0;
        GKVT_OK(gkv_sample_neighbors(s, sd.p, sd.n, replace ? &kr : &k, 1, 2,
                                     &o, out));
        for (size_t i = 0; i < nn; i++) {
            int64_t v = nodes[i], b = csc.indptr[v];
            int64_t d = csc.indptr[v + 1] - b, x[8];
            int kk = replace ? kr : k;
            for (int t = 0; t < kk; t++) {
                if (replace) {
                    x[t] = (int64_t)ref_below(ref_r(DS, 9, 2, 0, (uint64_t)v,
                                                    (uint64_t)t),
                                              (uint64_t)d);
                } else {
                    int64_t j = d - k + t;
                    x[t] = (int64_t)ref_below(ref_r(DS, 9, 2, 0, (uint64_t)v,
                                                    (uint64_t)t),
                                              (uint64_t)j + 1);
                    for (int q = 0; q < t; q++)
                        if (x[q] == x[t])
                            x[t] = j;
                }
                if (out[0].eid[e] != csc.eids[b + x[t]])
                    fail_msg("node %lld pick %d: eid %lld, the header's "
                             "generator gives %lld", (long long)v, t,
                             (long long)out[0].eid[e],
                             (long long)csc.eids[b + x[t]]);
                e++;
            }
        }
        assert_int_equal(e, out[0].n);
    }
    /* weighted, with replacement: a star with weights 1 2 3 4 0 10 */
    {
        static const float w[6] = {1, 2, 3, 4, 0, 10};
        gkv_graph *g2 = star(w, 6);
        gkv_sgraph *sg2;
        gkv_sampler *s2;
        int64_t zero = 0;
        struct gkvt_seeds1 sd = gkvt_one(&zero, 1);
        int k50 = 50;
        double S[7] = {0};
        GKVT_OK(gkv_sgraph_from_graph(&sg2, g2, 0, 1));
        s2 = gkvt_sampler(sg2, 1);
        for (int i = 0; i < 6; i++)
            S[i + 1] = S[i] + (double)w[i];
        o.seed = 3;
        o.flags = GKV_SAMPLE_WEIGHTED | GKV_SAMPLE_REPLACE;
        GKVT_OK(gkv_sample_neighbors(s2, sd.p, sd.n, &k50, 1, 4, &o, out));
        assert_int_equal(out[0].n, 50);
        for (int t = 0; t < 50; t++) {
            uint64_t r = ref_r(DS, 3, 4, 0, 0, (uint64_t)t);
            double target = (double)(r >> 11) * 0x1.0p-53 * S[6];
            int i = 0;
            while (i < 6 && !(S[i + 1] > target))
                i++;
            assert_int_equal(out[0].eid[t], i);
        }
        gkv_sampler_free(s2);
        gkv_sgraph_free(sg2);
        gkv_graph_free(g2);
    }
    /* negatives of an edge batch */
    {
        gkv_edge_batch_spec sp;
        gkv_edge_batch eb;
        gkv_block b[1];
        int64_t eids[40];
        int f1 = 2;
        for (int i = 0; i < 40; i++)
            eids[i] = i * 37;
        memset(&sp, 0, sizeof sp);
        sp.eids = eids;
        sp.n = 40;
        sp.num_neg = 3;
        o.seed = 11;
        o.flags = 0;
        GKVT_OK(gkv_sample_edge_batch(s, &sp, &f1, 1, 1, &o, &eb, b));
        for (int i = 0; i < 40; i++)
            for (int j = 0; j < 3; j++) {
                uint64_t want = ref_below(ref_r(DN, 11, 0, 0,
                                                (uint64_t)eids[i],
                                                (uint64_t)j), (uint64_t)N);
                assert_int_equal(b[0].nodes[0].ids[eb.neg_dst[i * 3 + j]],
                                 (int64_t)want);
            }
    }
    gkv_sampler_free(s);
    gkv_csc_free(&csc);
    gkv_sgraph_free(sg);
    gkv_graph_free(g);
}

/* ---- find_edges --------------------------------------------------------- */

static void
test_find_edges(void **state)
{
    gkv_sgraph *sg = gkvt_sg_fixed(0, GKV_SG_CSR);
    int64_t eids[14], s[14], d[14], bad = 14, neg = -1;
    gkv_graph *g;
    gkv_coo coo;

    (void)state;
    GKVT_OK(gkv_graph_fixed_homo(&g));
    GKVT_OK(gkv_graph_edges(g, 0, &coo));
    for (int i = 0; i < 14; i++)
        eids[i] = 13 - i;
    GKVT_OK(gkv_sgraph_find_edges(sg, 0, eids, 14, s, d));
    for (int i = 0; i < 14; i++) {
        assert_int_equal(s[i], coo.src[13 - i]);
        assert_int_equal(d[i], coo.dst[13 - i]);
    }
    assert_int_equal(gkv_sgraph_find_edges(sg, 0, &bad, 1, s, d), GKV_ERANGE);
    assert_non_null(strstr(gkv_sgraph_errmsg(sg), "14"));
    assert_int_equal(gkv_sgraph_find_edges(sg, 0, &neg, 1, s, d), GKV_ERANGE);
    assert_int_equal(gkv_sgraph_find_edges(sg, 1, eids, 1, s, d), GKV_EINVAL);
    assert_int_equal(gkv_sgraph_find_edges(sg, 0, NULL, 1, s, d), GKV_EINVAL);
    gkv_graph_free(g);
    gkv_sgraph_free(sg);
}

/* ---- allocation failures ------------------------------------------------ */

static void
test_alloc_failures(void **state)
{
    gkv_graph *g = gkvt_rmat(9, 1);
    long base = gkvt_alloc_live();
    gkv_sgraph *sg;
    gkv_err rc;
    int64_t N = gkv_graph_num_nodes(g, 0);
    uint64_t st = 5;
    int64_t *seeds = gkvt_distinct_seeds(N, &st);
    struct gkvt_seeds1 sd = gkvt_one(seeds, 300);
    int fan[2] = {3, 7};
    struct bcopy ref;
    gkv_block b[2];

    (void)state;
    /* sgraph from a graph */
    for (int n = 0;; n++) {
        sg = (gkv_sgraph *)1;
        gkvt_alloc_fail_at(n);
        rc = gkv_sgraph_from_graph(&sg, g, GKV_SG_CSR, 2);
        gkvt_alloc_fail_at(-1);
        if (rc == GKV_OK)
            break;
        assert_int_equal(rc, GKV_ENOMEM);
        assert_null(sg);
        assert_int_equal(gkvt_alloc_live(), base);
    }
    base = gkvt_alloc_live();
    /* sampler creation, one and three threads */
    for (int nt = 1; nt <= 3; nt += 2)
        for (int n = 0;; n++) {
            gkv_sampler *s = (gkv_sampler *)1;
            gkvt_alloc_fail_at(n);
            rc = gkv_sampler_new(&s, sg, nt);
            gkvt_alloc_fail_at(-1);
            if (rc == GKV_OK) {
                gkv_sampler_free(s);
                break;
            }
            assert_int_equal(rc, GKV_ENOMEM);
            assert_null(s);
            assert_int_equal(gkvt_alloc_live(), base);
        }
    /* a block sample on a fresh sampler failing at each allocation: the
     * call fails whole, and the same sampler then gives the right blocks */
    {
        gkv_sampler *s = gkvt_sampler(sg, 1);
        GKVT_OK(gkv_sample_blocks(s, sd.p, sd.n, fan, 1, 2, NULL, b));
        bcopy_take(&ref, b, 2);
        gkv_sampler_free(s);
    }
    for (int nt = 1; nt <= 2; nt++) {
        int fails = 0;
        for (int n = 0;; n++) {
            gkv_sampler *s = gkvt_sampler(sg, nt);
            gkvt_alloc_fail_at(n);
            rc = gkv_sample_blocks(s, sd.p, sd.n, fan, 1, 2, NULL, b);
            gkvt_alloc_fail_at(-1);
            if (rc == GKV_OK) {
                assert_true(bcopy_same(&ref, b));
                gkv_sampler_free(s);
                break;
            }
            fails++;
            assert_int_equal(rc, GKV_ENOMEM);
            assert_non_null(strstr(gkv_sampler_errmsg(s), "memory"));
            GKVT_OK(gkv_sample_blocks(s, sd.p, sd.n, fan, 1, 2, NULL, b));
            assert_true(bcopy_same(&ref, b));
            gkv_sampler_free(s);
            assert_int_equal(gkvt_alloc_live(), base);
        }
        assert_true(fails > 3);
    }
    bcopy_free(&ref);
    gkv_sgraph_free(sg);
    gkv_graph_free(g);
    free(seeds);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_homo_all),
        cmocka_unit_test(test_fixed_homo_weighted_and_excluded),
        cmocka_unit_test(test_fixed_hetero),
        cmocka_unit_test(test_fixed_homo_blocks),
        cmocka_unit_test(test_out_blocks),
        cmocka_unit_test(test_hetero_threads),
        cmocka_unit_test(test_rmat_properties),
        cmocka_unit_test(test_weighted_distribution),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_split_adjacency),
        cmocka_unit_test(test_edge_batch),
        cmocka_unit_test(test_generator_spec),
        cmocka_unit_test(test_find_edges),
        cmocka_unit_test(test_hop_counts),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
