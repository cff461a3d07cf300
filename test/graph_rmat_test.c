/* graph_rmat_test.c - the R-MAT generator (graph/gkv_graph.h): the same
 * spec gives the same edges (any thread count), quadrant statistics and
 * skew, the node permutation, bad specs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "gkvt.h"
#include "gkvt_graph.h"
#include "graph/gkv_graph.h"

#define N_OF(a) (sizeof (a) / sizeof (a)[0])

/* ---- R-MAT ---------------------------------------------------------------- */

static uint64_t
edge_hash(const int64_t *s, const int64_t *d, int64_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;

    for (int64_t i = 0; i < n; i++) {
        h = gkvt_fnv64(h, (uint64_t)s[i]);
        h = gkvt_fnv64(h, (uint64_t)d[i]);
    }
    return h;
}

static void
test_rmat_deterministic(void **state)
{
    gkv_rmat_spec sp = gkvt_rmat_spec(12, 42, 0);
    gkv_rmat_spec sp2 = gkvt_rmat_spec(12, 43, 0);
    const int64_t m = 16 << 12;
    int64_t *s = malloc(m * 8), *d = malloc(m * 8);
    int64_t *s2 = malloc(m * 8), *d2 = malloc(m * 8);
    uint64_t x = gkvt_seed();
    int64_t same = 0;
    gkv_graph *g1, *g3;
    gkv_coo c1, c3;

    (void)state;
    GKVT_OK(gkv_rmat_edges(&sp, 0, m, s, d));
    /* pinned: the same edges on any machine, from any build */
    assert_int_equal(s[0], 3372);
    assert_int_equal(d[0], 518);
    assert_int_equal(s[1], 2717);
    assert_int_equal(d[1], 2043);
    assert_true(edge_hash(s, d, m) == 0x5c2adc6aa1bece71ULL);
    /* in random chunks, the same */
    for (int64_t at = 0; at < m;) {
        int64_t k = (int64_t)(tools__splitmix64(&x) % 5000);
        if (k > m - at)
            k = m - at;
        GKVT_OK(gkv_rmat_edges(&sp, at, k, s2 + at, d2 + at));
        at += k;
    }
    gkvt_expect_i64(s2, s, (size_t)m, "element");
    gkvt_expect_i64(d2, d, (size_t)m, "element");
    /* another seed, other edges */
    GKVT_OK(gkv_rmat_edges(&sp2, 0, m, s2, d2));
    for (int64_t i = 0; i < m; i++)
        same += s[i] == s2[i] && d[i] == d2[i];
    assert_true(same < m / 100);
    /* the graph is the same on 1 and 3 threads */
    GKVT_OK(gkv_rmat_graph(&g1, &sp, 1));
    GKVT_OK(gkv_rmat_graph(&g3, &sp, 3));
    assert_int_equal(gkv_graph_num_nodes(g1, 0), 4096);
    GKVT_OK(gkv_graph_edges(g1, 0, &c1));
    GKVT_OK(gkv_graph_edges(g3, 0, &c3));
    assert_int_equal(c1.n, m);
    assert_null(c1.w);
    gkvt_expect_i64(c1.src, s, (size_t)m, "element");
    gkvt_expect_i64(c3.src, s, (size_t)m, "element");
    gkvt_expect_i64(c3.dst, d, (size_t)m, "element");
    gkv_graph_free(g1);
    gkv_graph_free(g3);
    free(s);
    free(d);
    free(s2);
    free(d2);
}

/* Fraction of edges in each quadrant at bit 'bit' of (src, dst). */
static void
quadrants(const int64_t *s, const int64_t *d, int64_t m, int bit, double q[4])
{
    int64_t c[4] = {0};

    for (int64_t i = 0; i < m; i++)
        c[(((uint64_t)s[i] >> bit) & 1) * 2 + (((uint64_t)d[i] >> bit) & 1)]++;
    for (int i = 0; i < 4; i++)
        q[i] = (double)c[i] / (double)m;
}

static void
test_rmat_quadrants_and_skew(void **state)
{
    gkv_rmat_spec sp = gkvt_rmat_spec(16, 7, GKV_RMAT_NO_PERMUTE);
    const int64_t m = (int64_t)16 << 16;
    int64_t *s = malloc(m * 8), *d = malloc(m * 8);
    int64_t *deg = calloc((size_t)1 << 16, sizeof *deg), maxdeg = 0;
    const double want[4] = {0.57, 0.19, 0.19, 0.05};
    const int bits[] = {15, 8, 0};
    double q[4], top;

    (void)state;
    GKVT_OK(gkv_rmat_edges(&sp, 0, m, s, d));
    /* every level draws the same quadrant distribution: check the first
     * (top bit), a middle one and the last (bit 0); 1 M edges give a
     * standard deviation of 0.0005 */
    for (size_t b = 0; b < N_OF(bits); b++) {
        quadrants(s, d, m, bits[b], q);
        for (int i = 0; i < 4; i++)
            if (fabs(q[i] - want[i]) > 0.004)
                fail_msg("bit %d quadrant %d: %.4f, want %.2f", bits[b], i,
                         q[i], want[i]);
    }
    /* skewed: the largest in-degree is far above the mean (16) */
    for (int64_t i = 0; i < m; i++)
        deg[d[i]]++;
    for (int64_t v = 0; v < ((int64_t)1 << 16); v++)
        if (deg[v] > maxdeg)
            maxdeg = deg[v];
    assert_true(maxdeg > 100 * 16);
    /* without the permutation, low IDs hold the edges: node 0 is the hub */
    assert_int_equal(deg[0], maxdeg);

    /* with it, degree does not follow the ID: about half the edges have
     * the top bit of their src set, not c + d = 0.24 */
    sp.flags = 0;
    GKVT_OK(gkv_rmat_edges(&sp, 0, m, s, d));
    quadrants(s, d, m, 15, q);
    top = q[2] + q[3];
    assert_true(top > 0.4 && top < 0.6);
    top = q[1] + q[3];
    assert_true(top > 0.4 && top < 0.6);
    memset(deg, 0, ((size_t)1 << 16) * sizeof *deg);
    for (int64_t i = 0; i < m; i++)
        deg[d[i]]++;
    assert_true(deg[0] < maxdeg);
    assert_int_equal(deg[gkv_rmat_vertex(&sp, 0)], maxdeg);

    /* other probabilities are honoured */
    sp = gkvt_rmat_spec(10, 3, GKV_RMAT_NO_PERMUTE);
    sp.a = 0.4;
    sp.b = 0.3;
    sp.c = 0.2;
    sp.edge_factor = 256;
    GKVT_OK(gkv_rmat_edges(&sp, 0, 256 << 10, s, d));
    quadrants(s, d, 256 << 10, 9, q);
    assert_true(fabs(q[0] - 0.4) < 0.01 && fabs(q[1] - 0.3) < 0.01 &&
                fabs(q[2] - 0.2) < 0.01 && fabs(q[3] - 0.1) < 0.01);
    free(s);
    free(d);
    free(deg);
}

static void
test_rmat_permutation(void **state)
{
    unsigned char *seen = malloc((size_t)1 << 16);
    gkv_rmat_spec sp, np;
    int64_t s[1000], d[1000], s0[1000], d0[1000];

    (void)state;
    /* a bijection of [0, 2^scale) for every scale up to 16 */
    for (int scale = 0; scale <= 16; scale++) {
        int64_t n = (int64_t)1 << scale, moved = 0;
        sp = gkvt_rmat_spec(scale, 99 + (uint64_t)scale, 0);
        memset(seen, 0, (size_t)n);
        for (int64_t v = 0; v < n; v++) {
            int64_t p = gkv_rmat_vertex(&sp, v);
            assert_true(p >= 0 && p < n);
            assert_int_equal(seen[p], 0);
            seen[p] = 1;
            moved += p != v;
        }
        if (scale >= 4)
            assert_true(moved > n / 2);
        assert_int_equal(gkv_rmat_vertex(&sp, n), -1);
        assert_int_equal(gkv_rmat_vertex(&sp, -1), -1);
    }
    /* seeded: another seed, another permutation; identity when off */
    sp = gkvt_rmat_spec(16, 1, 0);
    np = gkvt_rmat_spec(16, 2, 0);
    {
        int diff = 0;
        for (int64_t v = 0; v < 100; v++)
            diff += gkv_rmat_vertex(&sp, v) != gkv_rmat_vertex(&np, v);
        assert_true(diff > 90);
    }
    np = gkvt_rmat_spec(16, 1, GKV_RMAT_NO_PERMUTE);
    assert_int_equal(gkv_rmat_vertex(&np, 12345), 12345);
    /* permuted edges are the unpermuted ones, relabelled */
    GKVT_OK(gkv_rmat_edges(&sp, 5000, 1000, s, d));
    GKVT_OK(gkv_rmat_edges(&np, 5000, 1000, s0, d0));
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(s[i], gkv_rmat_vertex(&sp, s0[i]));
        assert_int_equal(d[i], gkv_rmat_vertex(&sp, d0[i]));
    }
    /* a larger scale, checked whole */
    sp = gkvt_rmat_spec(20, 5, 0);
    {
        unsigned char *big = calloc((size_t)1 << 20, 1);
        for (int64_t v = 0; v < ((int64_t)1 << 20); v++) {
            int64_t p = gkv_rmat_vertex(&sp, v);
            assert_true(p >= 0 && p < ((int64_t)1 << 20) && !big[p]);
            big[p] = 1;
        }
        free(big);
    }
    free(seen);
}

static void
test_rmat_bad_spec(void **state)
{
    gkv_rmat_spec sp = gkvt_rmat_spec(10, 1, 0);
    gkv_graph *g = (gkv_graph *)1;
    int64_t s[4], d[4];

    (void)state;
    sp.scale = -1;
    assert_int_equal(gkv_rmat_edges(&sp, 0, 1, s, d), GKV_EINVAL);
    assert_int_equal(gkv_rmat_graph(&g, &sp, 1), GKV_EINVAL);
    assert_null(g);
    sp.scale = GKV_RMAT_SCALE_MAX + 1;
    assert_int_equal(gkv_rmat_edges(&sp, 0, 1, s, d), GKV_EINVAL);
    assert_int_equal(gkv_rmat_vertex(&sp, 0), -1);
    sp = gkvt_rmat_spec(10, 1, 0);
    sp.a = -0.1;
    sp.b = 0.5;
    assert_int_equal(gkv_rmat_edges(&sp, 0, 1, s, d), GKV_EINVAL);
    sp.a = 0.6;
    sp.b = 0.3;
    sp.c = 0.2;
    assert_int_equal(gkv_rmat_edges(&sp, 0, 1, s, d), GKV_EINVAL);
    sp.c = NAN;
    assert_int_equal(gkv_rmat_edges(&sp, 0, 1, s, d), GKV_EINVAL);
    sp = gkvt_rmat_spec(40, 1, 0);
    sp.edge_factor = 1 << 23;                       /* 2^63 edges */
    assert_int_equal(gkv_rmat_edges(&sp, 0, 1, s, d), GKV_EINVAL);
    sp.edge_factor = -1;
    assert_int_equal(gkv_rmat_edges(&sp, 0, 1, s, d), GKV_EINVAL);
    sp = gkvt_rmat_spec(4, 1, 0x10);
    assert_int_equal(gkv_rmat_edges(&sp, 0, 1, s, d), GKV_EINVAL);
    /* ranges: up to the last edge and no further */
    sp = gkvt_rmat_spec(4, 1, 0);
    GKVT_OK(gkv_rmat_edges(&sp, 252, 4, s, d));
    assert_int_equal(gkv_rmat_edges(&sp, 253, 4, s, d), GKV_EINVAL);
    assert_int_equal(gkv_rmat_edges(&sp, -1, 1, s, d), GKV_EINVAL);
    assert_int_equal(gkv_rmat_edges(&sp, 0, 1, NULL, d), GKV_EINVAL);
    GKVT_OK(gkv_rmat_edges(&sp, 256, 0, NULL, NULL));
    /* scale 0: one node, every edge a loop */
    sp = gkvt_rmat_spec(0, 1, 0);
    GKVT_OK(gkv_rmat_edges(&sp, 0, 4, s, d));
    for (int i = 0; i < 4; i++)
        assert_true(s[i] == 0 && d[i] == 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmat_deterministic),
        cmocka_unit_test(test_rmat_quadrants_and_skew),
        cmocka_unit_test(test_rmat_permutation),
        cmocka_unit_test(test_rmat_bad_spec),
    };
    return cmocka_run_group_tests_name("graph_rmat", tests, NULL, NULL);
}
