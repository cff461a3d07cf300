/* sample_rmat_test.c - the sampler (graph/gkv_sample.h) on R-MAT graphs:
 * properties of its blocks checked against the COO edge list (homogeneous,
 * and heterogeneous on 1, 2 and 3 threads), weighted draws against the
 * weights (chi-square at a fixed seed), and its picks against an
 * independent transcription of the generator gkv_sample.h specifies.
 * Hand-checked samples on fixed graphs: sample_test.c. */
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

/* Checks the structure of homogeneous blocks against the graph 'g'
 * (direction IN): node lists unique with dst first and dst = the next
 * block's src, every edge a real edge with its eid, counts = min(deg, k)
 * without replacement (k with replacement, 0 for deg 0), no duplicate eid
 * per dst without replacement, new sources in first-appearance order. */
/* graph/sample_par.c, for tests: at most n chunks of a parallel
 * relabelling hop taken by the caller (its picks on two threads, its
 * in-order prefix on more). */
void graph__sample_caller_max(gkv_sampler *s, size_t n);

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
    struct gkvt_bcopy ref;
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
    gkvt_bcopy_take(&ref, b, 2);
    for (int t = 2; t <= 3; t++) {
        GKVT_OK(gkv_sample_blocks(s[t], sp, sn, fan, 3, 2, NULL, b));
        if (!gkvt_bcopy_same(&ref, b))
            fail_msg("%d threads differ from 1", t);
    }
    /* whoever takes a parallel hop's chunks (the caller taking at most
     * none, one chunk, any number), on fresh
     * samplers (their first call runs on all threads) */
    for (int t = 2; t <= 4; t++)
        for (int q = 0; q < 3; q++) {
            gkv_sampler *x = gkvt_sampler(sg, t);
            graph__sample_caller_max(x, q == 2 ? SIZE_MAX : (size_t)q);
            GKVT_OK(gkv_sample_blocks(x, sp, sn, fan, 3, 2, NULL, b));
            if (!gkvt_bcopy_same(&ref, b))
                fail_msg("%d threads, caller taking at most %d chunks: "
                         "differ from 1 thread", t, q == 2 ? -1 : q);
            gkv_sampler_free(x);
        }
    GKVT_OK(gkv_sample_blocks(s[3], sp, sn, fan, 3, 2, NULL, b));
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
    gkvt_bcopy_free(&ref);
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
        keep = gkvt_dup64(o1[0].eid, o1[0].n);
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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hetero_threads),
        cmocka_unit_test(test_rmat_properties),
        cmocka_unit_test(test_weighted_distribution),
        cmocka_unit_test(test_generator_spec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
