/* sample_test.c - the sampler (graph/gkv_sample.h) on fixed graphs, checked
 * by hand: the per-seed counts of one hop, every edge of the homogeneous
 * and the heterogeneous graph (weighted, with excluded edges), blocks IN
 * and OUT, and find_edges. The other sampler programs: sample_rmat_test.c
 * (properties on R-MAT graphs, weighted draws, the generator),
 * sample_blocks_test.c (the same blocks however they are made) and
 * sample_bad_input_test.c (bad inputs). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkvt.h"
#include "gkvt_graph.h"
#include "graph/gkv_graph.h"
#include "graph/gkv_sample.h"
#include "graph/graph_seam.h"       /* graph__sample_hop */

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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_homo_all),
        cmocka_unit_test(test_fixed_homo_weighted_and_excluded),
        cmocka_unit_test(test_fixed_hetero),
        cmocka_unit_test(test_fixed_homo_blocks),
        cmocka_unit_test(test_out_blocks),
        cmocka_unit_test(test_find_edges),
        cmocka_unit_test(test_hop_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
