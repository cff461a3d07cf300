/* metis_thin_test.c - the thinning of METIS's graph (pw__thin in
 * graph/part_write_metis.c), against a reference on random symmetric
 * graphs with hubs: the result is symmetric, every entry an input edge
 * with its weight, each node keeps at least min(degree, K) neighbours, and
 * with no ties (weights distinct per pair) the edges kept are exactly
 * those among the K heaviest of either end. With ties the same input in
 * another list order gives the same graph. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <metis.h>
#include "gkvt.h"

/* graph/part_write_metis.c, for tests: thins (n, xadj, adj, ew) in place
 * to K neighbours a node; the entries left, or -1 out of memory. */
int64_t pw__thin(idx_t n, idx_t *xadj, idx_t *adj, idx_t *ew, int64_t keep);

enum { NMAX = 90 };

static uint64_t rs = 88172645463325252ull;

static uint64_t
rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

/* The CSR of the weight matrix W (n x n, 0 = no edge), each list in a
 * random order. */
static void
to_csr(int n, const idx_t *W, idx_t *xadj, idx_t *adj, idx_t *ew)
{
    idx_t t = 0;

    for (int u = 0; u < n; u++) {
        idx_t s = t;
        xadj[u] = t;
        for (int v = 0; v < n; v++)
            if (W[u * n + v] != 0) {
                adj[t] = v;
                ew[t++] = W[u * n + v];
            }
        for (idx_t i = t - 1; i > s; i--) {
            idx_t j = s + (idx_t)(rnd() % (uint64_t)(i - s + 1)), a, w;
            a = adj[i], adj[i] = adj[j], adj[j] = a;
            w = ew[i], ew[i] = ew[j], ew[j] = w;
        }
    }
    xadj[n] = t;
}

/* R[u * n + v] = the weight of kept entry (u, v), after checking that
 * the thinned CSR holds input edges only, once each, with their weights,
 * and at least min(degree, keep) a node. */
static void
kept(int n, const idx_t *W, const idx_t *xadj, const idx_t *adj,
     const idx_t *ew, int64_t keep, idx_t *R)
{
    memset(R, 0, (size_t)n * n * sizeof *R);
    assert_int_equal(xadj[0], 0);
    for (int u = 0; u < n; u++) {
        int64_t d = 0;
        for (int v = 0; v < n; v++)
            d += W[u * n + v] != 0;
        assert_true(xadj[u] <= xadj[u + 1]);
        if (xadj[u + 1] - xadj[u] < (d < keep ? d : keep))
            fail_msg("node %d keeps %d of %lld neighbours (K %lld)", u,
                     (int)(xadj[u + 1] - xadj[u]), (long long)d,
                     (long long)keep);
        for (idx_t i = xadj[u]; i < xadj[u + 1]; i++) {
            int v = adj[i];
            assert_true(v >= 0 && v < n && W[u * n + v] != 0);
            assert_int_equal(R[u * n + v], 0);
            assert_int_equal(ew[i], W[u * n + v]);
            R[u * n + v] = ew[i];
        }
    }
    for (int u = 0; u < n; u++)
        for (int v = 0; v < n; v++)
            if ((R[u * n + v] != 0) != (R[v * n + u] != 0))
                fail_msg("not symmetric: %d-%d kept one way only", u, v);
}

static void
test_thin(void **state)
{
    static idx_t W[NMAX * NMAX], R[NMAX * NMAX], R2[NMAX * NMAX];
    static idx_t xadj[NMAX + 1], adj[NMAX * NMAX], ew[NMAX * NMAX];

    (void)state;
    for (int it = 0; it < 3000; it++) {
        int n = 2 + (int)(rnd() % (NMAX - 1)), m = (int)(rnd() % (8u * n));
        int ties = it & 1;
        int64_t keep = 1 + (int64_t)(rnd() % 10), e;
        memset(W, 0, sizeof W);
        for (int k = 0; k < m; k++) {
            /* a quarter of the edges at nodes 0-2: hubs */
            int u = (int)(rnd() % n);
            int v = (rnd() & 3) == 0 ? (int)(rnd() % 3 % n) : (int)(rnd() % n);
            int a = u < v ? u : v, b = u < v ? v : u;
            if (u == v)
                continue;
            /* distinct per pair, or 1-3 */
            W[a * n + b] = W[b * n + a] =
                ties ? 1 + (idx_t)(rnd() % 3) : 1 + (idx_t)(a * n + b);
        }
        to_csr(n, W, xadj, adj, ew);
        e = pw__thin(n, xadj, adj, ew, keep);
        assert_int_equal(e, xadj[n]);
        kept(n, W, xadj, adj, ew, keep, R);
        if (!ties) {
            /* the reference: (u, v) stays when v is among u's K heaviest
             * or u among v's */
            for (int u = 0; u < n; u++)
                for (int v = 0; v < n; v++) {
                    int rank_u = 0, rank_v = 0, want;
                    if (W[u * n + v] == 0)
                        continue;
                    for (int z = 0; z < n; z++) {
                        rank_u += W[u * n + z] > W[u * n + v];
                        rank_v += W[v * n + z] > W[v * n + u];
                    }
                    want = rank_u < keep || rank_v < keep;
                    if ((R[u * n + v] != 0) != want)
                        fail_msg("graph %d: edge %d-%d %s, want %s", it, u,
                                 v, R[u * n + v] ? "kept" : "dropped",
                                 want ? "kept" : "dropped");
                }
        } else {
            /* ties: another list order, the same graph */
            to_csr(n, W, xadj, adj, ew);
            assert_int_equal(pw__thin(n, xadj, adj, ew, keep), e);
            kept(n, W, xadj, adj, ew, keep, R2);
            assert_memory_equal(R, R2, (size_t)n * n * sizeof *R);
        }
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
