/* graph_e2e_test.c - the graph layer end to end: partition a weighted R-MAT
 * graph with gkv_partition_write (random, range and METIS), open every
 * partition with gkv_part_open, and check that sampling the partitions one
 * at a time, each on the nodes it owns, gives exactly what sampling the
 * whole graph (in the new IDs) gives: single hops in both directions, with
 * and without replacement, weighted, with excluded edges, and every hop of
 * a multi-layer block sample. This is the property the server relies on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkvt.h"
#include "gkv.h"
#include "gkv_sample.h"

#define SCALE 11
#define NPARTS 3

struct fx {
    char       *dir;
    gkv_graph  *g;          /* the original graph */
    int64_t     n, m;       /* nodes, edges */
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    gkv_rmat_spec sp = {0};
    int64_t *src, *dst;
    float *w;
    uint64_t r = 99;

    if (f == NULL || (f->dir = gkvt_mkdtemp("e2e")) == NULL)
        return -1;
    sp.scale = SCALE;
    sp.edge_factor = 8;
    sp.seed = 2026;
    f->n = (int64_t)1 << SCALE;
    f->m = f->n * 8;
    src = malloc(sizeof *src * (size_t)f->m);
    dst = malloc(sizeof *dst * (size_t)f->m);
    w = malloc(sizeof *w * (size_t)f->m);
    if (src == NULL || dst == NULL || w == NULL ||
        gkv_rmat_edges(&sp, 0, f->m, src, dst) != GKV_OK ||
        gkv_graph_new_homo(&f->g, f->n) != GKV_OK)
        return -1;
    for (int64_t e = 0; e < f->m; e++)   /* weights 0..3, a quarter zero */
        w[e] = (float)(tools__splitmix64(&r) % 4);
    if (gkv_graph_add_edges(f->g, 0, src, dst, w, (size_t)f->m) != GKV_OK)
        return -1;
    free(src);
    free(dst);
    free(w);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    gkv_graph_free(f->g);
    gkvt_rmtree(f->dir);
    free(f);
    return 0;
}

/* Reads an int64 .npy of 'n' entries into a new array. */
static int64_t *
read_map(const char *path, int64_t n)
{
    gkv_npy_map m;
    char msg[256];
    int64_t *v;

    GKVT_OK(gkv_npy_map_open(&m, path, msg, sizeof msg));
    assert_int_equal(m.hdr.dtype, GKV_I64);
    assert_int_equal(m.hdr.data_bytes, (uint64_t)n * 8);
    v = malloc((size_t)n * 8);
    assert_non_null(v);
    memcpy(v, m.data, (size_t)n * 8);
    gkv_npy_map_close(&m);
    return v;
}

/* One partitioned copy, opened: the partitions, their sgraphs and
 * samplers, and the whole graph in the new IDs with its sgraph. */
struct parted {
    gkv_part    *p[NPARTS];
    gkv_sgraph  *sg[NPARTS];
    gkv_sampler *s[NPARTS];
    gkv_graph   *h;          /* the original graph, renumbered */
    gkv_sgraph  *whole;
    gkv_sampler *ws;
    int64_t     *nmap;       /* old node ID -> new */
};

static void
parted_open(struct fx *f, gkv_part_method method, struct parted *pt)
{
    gkv_part_spec spec = {0};
    gkv_part_report rep;
    char out[512], json[600], msg[512];
    const gkv_pbook *b;
    int64_t *emap, *S, *D;
    float *W;
    gkv_coo coo;

    memset(pt, 0, sizeof *pt);
    snprintf(out, sizeof out, "%s/%s", f->dir, gkv_part_method_name(method));
    spec.name = "g";
    spec.method = method;
    spec.num_parts = NPARTS;
    spec.seed = 7;
    spec.flags = GKV_PART_CSR;
    if (gkv_partition_write(f->g, &spec, out, &rep, msg, sizeof msg) != GKV_OK)
        fail_msg("partition_write: %s", msg);
    assert_int_equal(rep.num_edges, f->m);
    snprintf(json, sizeof json, "%s/g.json", out);
    for (int q = 0; q < NPARTS; q++) {
        GKVT_OK(gkv_part_open(&pt->p[q], json, q, 0));
        GKVT_OK(gkv_part_sgraph(pt->p[q], &pt->sg[q]));
        GKVT_OK(gkv_sampler_new(&pt->s[q], pt->sg[q], q == 1 ? 2 : 1));
    }
    b = gkv_part_book(pt->p[0]);
    pt->nmap = read_map(gkv_pbook_node_mapping(b, 0), f->n);
    emap = read_map(gkv_pbook_edge_mapping(b, 0), f->m);
    /* the whole graph in the new IDs, edges in new edge-ID order */
    GKVT_OK(gkv_graph_edges(f->g, 0, &coo));
    S = malloc((size_t)f->m * 8);
    D = malloc((size_t)f->m * 8);
    W = malloc((size_t)f->m * 4);
    assert_true(S != NULL && D != NULL && W != NULL);
    for (int64_t e = 0; e < f->m; e++) {
        int64_t ne = emap[e];

        assert_true(ne >= 0 && ne < f->m);
        S[ne] = pt->nmap[coo.src[e]];
        D[ne] = pt->nmap[coo.dst[e]];
        W[ne] = coo.w[e];
    }
    GKVT_OK(gkv_graph_new_homo(&pt->h, f->n));
    GKVT_OK(gkv_graph_add_edges(pt->h, 0, S, D, W, (size_t)f->m));
    GKVT_OK(gkv_sgraph_from_graph(&pt->whole, pt->h, GKV_SG_CSR, 1));
    GKVT_OK(gkv_sampler_new(&pt->ws, pt->whole, 1));
    free(S);
    free(D);
    free(W);
    free(emap);
}

static void
parted_close(struct parted *pt)
{
    for (int q = 0; q < NPARTS; q++) {
        gkv_sampler_free(pt->s[q]);
        gkv_sgraph_free(pt->sg[q]);
        gkv_part_close(pt->p[q]);
    }
    gkv_sampler_free(pt->ws);
    gkv_sgraph_free(pt->whole);
    gkv_graph_free(pt->h);
    free(pt->nmap);
}

/* Samples 'seeds' hop-wise on the partitions that own them and on the
 * whole graph, and checks the two agree edge for edge: for each seed, the
 * same picks (neighbour and edge ID) in the same order. */
static void
check_hop(struct parted *pt, const int64_t *seeds, size_t n, int fanout,
          int layer, const gkv_sample_opts *o)
{
    const gkv_pbook *b = gkv_part_book(pt->p[0]);
    int32_t *owner = malloc(n * sizeof *owner + 1);
    int64_t *mine = malloc(n * sizeof *mine + 1);
    size_t *at = calloc(n + 1, sizeof *at);   /* seed i's first whole edge */
    gkv_sample_edges we, pe;
    const int64_t *ws[1];
    size_t wn[1] = {n};
    int in = o->dir == GKV_DIR_IN;

    assert_true(owner != NULL && mine != NULL && at != NULL);
    GKVT_OK(gkv_pbook_node_owner(b, 0, seeds, n, owner));
    ws[0] = seeds;
    GKVT_OK(gkv_sample_neighbors(pt->ws, ws, wn, &fanout, 1, layer, o, &we));
    /* whole edges come grouped by seed in seed order */
    for (size_t i = 0, e = 0; i < n; i++) {
        at[i] = e;
        while (e < we.n && (in ? we.dst[e] : we.src[e]) == seeds[i])
            e++;
        at[i + 1] = e;
    }
    assert_int_equal(at[n], we.n);
    for (int q = 0; q < NPARTS; q++) {
        size_t k = 0, e = 0;
        const int64_t *ps[1] = {mine};
        size_t pn[1];

        for (size_t i = 0; i < n; i++)
            if (owner[i] == q)
                mine[k++] = seeds[i];
        pn[0] = k;
        GKVT_OK(gkv_sample_neighbors(pt->s[q], ps, pn, &fanout, 1, layer, o, &pe));
        for (size_t i = 0; i < n; i++) {
            if (owner[i] != q)
                continue;
            for (size_t j = at[i]; j < at[i + 1]; j++, e++) {
                assert_true(e < pe.n);
                assert_int_equal(pe.src[e], we.src[j]);
                assert_int_equal(pe.dst[e], we.dst[j]);
                assert_int_equal(pe.eid[e], we.eid[j]);
            }
        }
        assert_int_equal(e, pe.n);
    }
    free(owner);
    free(mine);
    free(at);
}

static void
check_method(struct fx *f, gkv_part_method method)
{
    struct parted pt;
    int64_t seeds[300];
    uint64_t r = 5;
    gkv_sample_opts o = {0};
    int64_t excl[64];
    const int64_t *ex[1] = {excl};
    size_t exn[1] = {64};

    parted_open(f, method, &pt);
    if (method == GKV_PART_RANGE)           /* range keeps every node ID */
        for (int64_t v = 0; v < f->n; v++)
            assert_int_equal(pt.nmap[v], v);
    for (size_t i = 0; i < 300; i++)        /* distinct, in random order */
        seeds[i] = (int64_t)((i * 1597 + 11) % (uint64_t)f->n);
    for (int k = 0; k < 64; k++)
        excl[k] = (int64_t)(tools__splitmix64(&r) % (uint64_t)f->m);

    o.seed = 42;
    check_hop(&pt, seeds, 300, 5, 0, &o);
    check_hop(&pt, seeds, 300, -1, 1, &o);
    o.flags = GKV_SAMPLE_REPLACE;
    check_hop(&pt, seeds, 300, 7, 2, &o);
    o.flags = GKV_SAMPLE_WEIGHTED;
    check_hop(&pt, seeds, 300, 4, 0, &o);
    o.flags = GKV_SAMPLE_WEIGHTED | GKV_SAMPLE_REPLACE;
    check_hop(&pt, seeds, 300, 4, 1, &o);
    o.flags = 0;
    o.exclude = ex;
    o.exclude_n = exn;
    check_hop(&pt, seeds, 300, 3, 0, &o);
    o.exclude = NULL;
    o.exclude_n = NULL;
    o.dir = GKV_DIR_OUT;
    check_hop(&pt, seeds, 300, 5, 0, &o);
    o.dir = GKV_DIR_IN;

    {   /* every hop of a 3-layer block sample, re-sampled on the owners */
        gkv_block blk[3];
        const int64_t *bs[1] = {seeds};
        size_t bn[1] = {64};
        int fan[3] = {3, 5, 10};   /* DGL order: the seed hop takes 10 */

        GKVT_OK(gkv_sample_blocks(pt.ws, bs, bn, fan, 1, 3, &o, blk));
        for (int hop = 0; hop < 3; hop++) {
            const gkv_block *bk = &blk[2 - hop];
            size_t nd = bk->nodes[0].num_dst;
            int64_t *dsts = malloc(nd * 8 + 8);

            assert_non_null(dsts);
            memcpy(dsts, bk->nodes[0].ids, nd * 8);
            /* copy out: check_hop samples with the whole sampler again,
             * which reuses the blocks' memory */
            {
                size_t ne = bk->edges[0].n;
                int64_t *gs = malloc(ne * 8 + 8), *ge = malloc(ne * 8 + 8);
                int64_t *gd = malloc(ne * 8 + 8);
                gkv_sample_edges we;
                const int64_t *ws[1] = {dsts};
                size_t wn[1] = {nd};

                assert_true(gs != NULL && ge != NULL && gd != NULL);
                for (size_t e = 0; e < ne; e++) {
                    gs[e] = bk->nodes[0].ids[bk->edges[0].src[e]];
                    gd[e] = bk->nodes[0].ids[bk->edges[0].dst[e]];
                    ge[e] = bk->edges[0].eid[e];
                }
                check_hop(&pt, dsts, nd, fan[2 - hop], hop, &o);
                /* and the block's edges are that hop's single-hop sample */
                GKVT_OK(gkv_sample_neighbors(pt.ws, ws, wn, &fan[2 - hop], 1,
                                             hop, &o, &we));
                assert_int_equal(we.n, ne);
                for (size_t e = 0; e < ne; e++) {
                    assert_int_equal(we.src[e], gs[e]);
                    assert_int_equal(we.dst[e], gd[e]);
                    assert_int_equal(we.eid[e], ge[e]);
                }
                free(gs);
                free(gd);
                free(ge);
            }
            free(dsts);
            if (hop < 2)   /* blocks were overwritten: sample them again */
                GKVT_OK(gkv_sample_blocks(pt.ws, bs, bn, fan, 1, 3, &o, blk));
        }
    }
    {   /* in-degrees of the partitions equal the whole graph's */
        gkv_adj a;
        GKVT_OK(gkv_sgraph_adj(pt.whole, 0, GKV_DIR_IN, &a));
        for (int q = 0; q < NPARTS; q++) {
            int64_t lo, hi, deg;
            GKVT_OK(gkv_pbook_node_range(gkv_part_book(pt.p[q]), 0, q, &lo, &hi));
            for (int64_t v = lo; v < hi; v += 7) {
                GKVT_OK(gkv_part_in_degrees(pt.p[q], 0, &v, 1, &deg));
                assert_int_equal(deg, a.indptr[v + 1] - a.indptr[v]);
            }
        }
    }
    parted_close(&pt);
}

static void test_random(void **state) { check_method(*state, GKV_PART_RANDOM); }
static void test_range(void **state)  { check_method(*state, GKV_PART_RANGE); }
static void test_metis(void **state)  { check_method(*state, GKV_PART_METIS); }

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_random, setup, teardown),
        cmocka_unit_test_setup_teardown(test_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metis, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
