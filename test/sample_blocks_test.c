/* sample_blocks_test.c - the sampler (graph/gkv_sample.h) gives the same
 * blocks however they are made: over seeds and thread counts
 * (determinism; whichever thread takes a parallel hop's chunks), split
 * over column ranges as partitions own them, as edge
 * mini-batches, and after allocation failures (each failing call reports
 * GKV_ENOMEM and leaks nothing). Hand-checked samples on fixed graphs:
 * sample_test.c. */
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkvt.h"
#include "gkvt_graph.h"
#include "graph/gkv_graph.h"
#include "graph/gkv_sample.h"
#include "graph/graph_seam.h"       /* graph__sample_hop */

/* graph/sample_par.c, for tests: at most n chunks of a parallel
 * relabelling hop taken by the caller (its picks on two threads, its
 * in-order prefix on more). */
void graph__sample_caller_max(gkv_sampler *s, size_t n);
/* graph/sample_par.c, for tests: every call on the workers. */
void graph__sample_always_par(gkv_sampler *s);

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
        struct gkvt_bcopy ref;
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
        gkvt_bcopy_take(&ref, b, 3);
        assert_true(ref.ne[0][0] > 1000);
        /* the same again, and on 2 and 3 threads: fresh samplers, since
         * a sampler's first call always runs on all its threads (later
         * ones may run on the caller alone when that is faster) */
        for (int t = 1; t <= 3; t++) {
            gkv_sampler *x = t == 1 ? s[1] : gkvt_sampler(sg, t);
            GKVT_OK(gkv_sample_blocks(x, sd.p, sd.n, fan, 1, 3, &o, b));
            if (!gkvt_bcopy_same(&ref, b))
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
                if (!gkvt_bcopy_same(&ref, b))
                    fail_msg("call %d of a 2-thread sampler differs", c);
            }
        /* a different seed differs */
        o.seed = 78;
        GKVT_OK(gkv_sample_blocks(s[2], sd.p, sd.n, fan, 1, 3, &o, b));
        assert_false(gkvt_bcopy_same(&ref, b));
        gkvt_bcopy_free(&ref);
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
            keep = gkvt_dup64(o1[0].eid, o1[0].n);
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

/* A parallel relabelling hop cuts the frontier into chunks. On two
 * threads both pick them and one at a time labels them in order; on
 * three or more the caller labels a prefix in order and the workers key
 * the suffix, merged after. Who takes which chunk depends on the
 * scheduling. Letting the caller take at most 0, 1 or 3 chunks (so that
 * it labels chunks a worker picked, or the suffix starts at once) or any
 * number, on 2, 3 and 4 threads, in every mode, gives the one-thread
 * blocks. */
static void
test_caller_split(void **state)
{
    gkv_graph *g = gkvt_rmat(13, 5);
    int64_t N = gkv_graph_num_nodes(g, 0);
    uint64_t st = 99;
    int64_t *seeds = gkvt_distinct_seeds(N, &st);
    gkv_sgraph *sg;
    gkv_sampler *s1;
    int fan[3] = {5, 10, 15};
    const size_t pm[4] = {0, 1, 3, SIZE_MAX};
    int64_t exl[256];
    size_t nexl = 256;
    const int64_t *exp[1] = {exl};

    (void)state;
    for (int i = 0; i < 256; i++)
        exl[i] = i * 7919 % gkv_graph_num_edges(g, 0);
    GKVT_OK(gkv_sgraph_from_graph(&sg, g, 0, 2));
    s1 = gkvt_sampler(sg, 1);
    for (int mode = 0; mode < 5; mode++) {
        /* 1,000 or 3,000 seeds: a last hop of tens of thousands of edges */
        struct gkvt_seeds1 sd = gkvt_one(seeds + mode * 100,
                                         mode == 4 ? 3000 : 1000);
        gkv_sample_opts o;
        gkv_block b[3];
        struct gkvt_bcopy ref;
        memset(&o, 0, sizeof o);
        o.seed = 1000 + (uint64_t)mode;
        if (mode == 1)
            o.flags = GKV_SAMPLE_REPLACE;
        if (mode == 2) {
            o.exclude = exp;
            o.exclude_n = &nexl;
        }
        fan[2] = mode == 3 ? -1 : 15;
        GKVT_OK(gkv_sample_blocks(s1, sd.p, sd.n, fan, 1, 3, &o, b));
        gkvt_bcopy_take(&ref, b, 3);
        assert_true(ref.ne[0][0] > 10000);
        for (int t = 2; t <= 4; t++)
            for (int q = 0; q < 4; q++) {
                /* fresh: a sampler's first call runs on all its threads */
                gkv_sampler *x = gkvt_sampler(sg, t);
                graph__sample_caller_max(x, pm[q]);
                GKVT_OK(gkv_sample_blocks(x, sd.p, sd.n, fan, 1, 3, &o, b));
                if (!gkvt_bcopy_same(&ref, b))
                    fail_msg("mode %d, %d threads, caller taking at most "
                             "%zu chunks: differs from 1 thread", mode, t,
                             pm[q]);
                gkv_sampler_free(x);
            }
        gkvt_bcopy_free(&ref);
    }
    gkv_sampler_free(s1);
    gkv_sgraph_free(sg);
    gkv_graph_free(g);
    free(seeds);
}

/* What a two-thread sampler keeps between calls stays near its largest
 * hop: a node with 2^18 in-edges sampled with fanout -1 from a different
 * chunk of the frontier in each call (each chunk's buffers once held its
 * picks, 6 MiB) must not leave a large buffer behind at every chunk. */
static void
test_hub_memory(void **state)
{
    const int64_t D = (int64_t)1 << 18, F = 1024;
    int64_t *indptr = calloc((size_t)F + 1, sizeof *indptr);
    int64_t *indices = malloc((size_t)(D + F) * sizeof *indices);
    int64_t nn[1] = {F + D}, seeds[1024], p = 0;
    int snt[1] = {0}, dnt[1] = {0}, fan[1] = {-1};
    size_t first = 0;
    int uncounted = 0;
    gkv_sgraph *sg;
    gkv_sampler *s;
    gkv_adj a;

    (void)state;
    for (int64_t c = 0; c < F; c++) {        /* node 0: the hub */
        if (c == 0)
            for (int64_t j = 0; j < D; j++)
                indices[p++] = F + j;
        else
            indices[p++] = F + (c * 7919) % D;
        indptr[c + 1] = p;
    }
    memset(&a, 0, sizeof a);
    a.col_hi = F;
    a.indptr = indptr;
    a.indices = indices;
    GKVT_OK(gkv_sgraph_new(&sg, 1, nn, 1, snt, dnt));
    GKVT_OK(gkv_sgraph_set_adj(sg, 0, GKV_DIR_IN, &a));
    s = gkvt_sampler(sg, 2);
    graph__sample_always_par(s);
    for (int call = 0; call < 16; call++) {
        /* the hub at frontier index 64 * call: chunks are 64 nodes here */
        int64_t at = (int64_t)call * 64;
        struct gkvt_seeds1 sd;
        gkv_block b[1];
        struct mallinfo2 m;
        size_t live;
        for (int64_t i = 0; i < F; i++)
            seeds[i] = i == at ? 0 : i < at ? i + 1 : i;
        sd = gkvt_one(seeds, (size_t)F);
        GKVT_OK(gkv_sample_blocks(s, sd.p, sd.n, fan, 1, 1, NULL, b));
        assert_int_equal(b[0].edges[0].n, (size_t)(D + F - 1));
        m = mallinfo2();
        live = m.uordblks + m.hblkhd;
        if (call == 0 && live == 0) {
            /* mallinfo2 counts nothing (AddressSanitizer's allocator) */
            uncounted = 1;
            break;
        }
        if (call == 0)
            first = live;
        else if (live > first + (size_t)D * 3 * sizeof(int64_t))
            fail_msg("call %d: %zu bytes live, %zu after the first call",
                     call, live, first);
    }
    gkv_sampler_free(s);
    gkv_sgraph_free(sg);
    free(indptr);
    free(indices);
    if (uncounted)
        skip();
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
        struct gkvt_bcopy ref;
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
        gkvt_bcopy_take(&ref, b, 2);
        {
            int64_t *keep = gkvt_dup64(eb.neg_dst, 320);
            s2 = gkvt_sampler(sg, 2);
            GKVT_OK(gkv_sample_edge_batch(s2, &sp, fan, 1, 2, NULL, &eb, b));
            assert_true(gkvt_bcopy_same(&ref, b));
            assert_memory_equal(keep, eb.neg_dst, 320 * 8);
            gkv_sampler_free(s2);
            free(keep);
        }
        gkvt_bcopy_free(&ref);
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
    struct gkvt_bcopy ref;
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
        gkvt_bcopy_take(&ref, b, 2);
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
                assert_true(gkvt_bcopy_same(&ref, b));
                gkv_sampler_free(s);
                break;
            }
            fails++;
            assert_int_equal(rc, GKV_ENOMEM);
            assert_non_null(strstr(gkv_sampler_errmsg(s), "memory"));
            GKVT_OK(gkv_sample_blocks(s, sd.p, sd.n, fan, 1, 2, NULL, b));
            assert_true(gkvt_bcopy_same(&ref, b));
            gkv_sampler_free(s);
            assert_int_equal(gkvt_alloc_live(), base);
        }
        assert_true(fails > 3);
    }
    gkvt_bcopy_free(&ref);
    gkv_sgraph_free(sg);
    gkv_graph_free(g);
    free(seeds);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_caller_split),
        cmocka_unit_test(test_hub_memory),
        cmocka_unit_test(test_split_adjacency),
        cmocka_unit_test(test_edge_batch),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
