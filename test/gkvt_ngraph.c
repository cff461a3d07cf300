/* gkvt_ngraph.c - the net_graph tests' fixture (gkvt_ngraph.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkvt_ngraph.h"
#ifdef GKV_HAVE_CUDA
#include "gpu/gkv_gpu.h"
#endif

gkv_part_method gkvt_ng_method = GKV_PART_RANDOM;
const char *const *gkvt_ng_extra;

/* ---- servers (gkvt_net.h) ---------------------------------------------- */

/* Every server: no syncing. */
static const char *const g_opts[] = {"--nosync", NULL};

void
gkvt_ng_serve(struct gkvt_ng *f, int nserv)
{
    gkvt_serve(&f->j, f->j.nmach, nserv, gkvt_ng_extra, NULL);
}

gkv_client *
gkvt_ng_client(struct gkvt_ng *f, const char *group)
{
    gkv_client_opts o = {0};

    o.timeout_ms = 20000;
    return gkvt_connect(f->j.cfg, group, 0, &o);
}

/* ---- the graph ------------------------------------------------------------ */

void
gkvt_ng_graph_make(struct gkvt_ng *f, int scale, int nparts)
{
    gkv_rmat_spec sp = {0};
    gkv_part_spec spec = {0};
    gkv_part_feat ft = {0};
    gkv_graph *g;
    gkv_coo coo;
    const gkv_pbook *b;
    char out[4000], msg[512];
    int64_t *src, *dst, *emap, *S, *D;
    float *w, *W;
    uint64_t r = 99;

    f->n = (int64_t)1 << scale;
    f->m = f->n * 8;
    f->j.nmach = nparts;
    sp.scale = scale;
    sp.edge_factor = 8;
    sp.seed = 2026;
    src = malloc((size_t)f->m * 8);
    dst = malloc((size_t)f->m * 8);
    w = malloc((size_t)f->m * 4);
    f->feat = malloc((size_t)f->n * GKVT_NG_FEAT_W * 4);
    assert_true(src != NULL && dst != NULL && w != NULL && f->feat != NULL);
    GKVT_OK(gkv_rmat_edges(&sp, 0, f->m, src, dst));
    GKVT_OK(gkv_graph_new_homo(&g, f->n));
    for (int64_t e = 0; e < f->m; e++)   /* weights 0..3, a quarter zero */
        w[e] = (float)(tools__splitmix64(&r) % 4);
    GKVT_OK(gkv_graph_add_edges(g, 0, src, dst, w, (size_t)f->m));
    for (int64_t v = 0; v < f->n; v++)
        for (int j = 0; j < GKVT_NG_FEAT_W; j++)
            f->feat[v * GKVT_NG_FEAT_W + j] = (float)v + 0.125f * (float)j;
    ft.type = "_N";
    ft.name = "feat";
    ft.data = f->feat;
    ft.dtype = GKV_F32;
    ft.ndim = 1;
    ft.shape[0] = GKVT_NG_FEAT_W;
    ft.nrows = (uint64_t)f->n;
    snprintf(out, sizeof out, "%s/parts", f->j.dir);
    spec.name = "g";
    spec.method = gkvt_ng_method;
    spec.num_parts = nparts;
    spec.seed = 7;
    spec.flags = GKV_PART_CSR |
                 (gkvt_ng_method == GKV_PART_METIS ?
                  GKV_PART_BALANCE_EDGES : 0);
    spec.feats = &ft;
    spec.nfeats = 1;
    if (gkv_partition_write(g, &spec, out, NULL, msg, sizeof msg) != GKV_OK)
        fail_msg("partition_write: %s", msg);
    snprintf(f->j.json, sizeof f->j.json, "%s/g.json", out);
    for (int q = 0; q < nparts; q++)
        GKVT_OK(gkv_part_open(&f->part[q], f->j.json, q, 0));
    b = gkv_part_book(f->part[0]);
    f->nmap = gkvt_read_map(gkv_pbook_node_mapping(b, 0), f->n);
    emap = gkvt_read_map(gkv_pbook_edge_mapping(b, 0), f->m);
    GKVT_OK(gkv_graph_edges(g, 0, &coo));
    S = malloc((size_t)f->m * 8);
    D = malloc((size_t)f->m * 8);
    W = malloc((size_t)f->m * 4);
    assert_true(S != NULL && D != NULL && W != NULL);
    for (int64_t e = 0; e < f->m; e++) {
        S[emap[e]] = f->nmap[coo.src[e]];
        D[emap[e]] = f->nmap[coo.dst[e]];
        W[emap[e]] = coo.w[e];
    }
    GKVT_OK(gkv_graph_new_homo(&f->ref.whole, f->n));
    GKVT_OK(gkv_graph_add_edges(f->ref.whole, 0, S, D, W, (size_t)f->m));
    gkvt_ref_sampler(&f->ref);
    gkv_graph_free(g);
    free(src);
    free(dst);
    free(w);
    free(emap);
    free(S);
    free(D);
    free(W);
}

int
gkvt_ng_setup(void **state)
{
    /* a port clash forgets the servers it killed: slots for the next */
    return gkvt_job_setup(state, sizeof (struct gkvt_ng), "netg",
                          GKVT_NG_PROCS, g_opts, 1);
}

int
gkvt_ng_teardown(void **state)
{
    struct gkvt_ng *f = *state;
    int bad = gkvt_job_fini(&f->j);

    gkvt_ref_free(&f->ref);
    for (int q = 0; q < 4; q++)
        gkv_part_close(f->part[q]);
    free(f->feat);
    free(f->nmap);
    free(f);
    return bad;
}

/* ---- comparisons ------------------------------------------------------------- */

void
gkvt_ng_bcopy_take(struct gkvt_ng_bcopy *bc, const gkv_block *b, int nl)
{
    memset(bc, 0, sizeof *bc);
    bc->nl = nl;
    for (int i = 0; i < nl; i++) {
        size_t n = b[i].nodes[0].num_src, m = b[i].edges[0].n;

        assert_int_equal(b[i].num_ntypes, 1);
        assert_int_equal(b[i].num_etypes, 1);
        bc->nsrc[i] = n;
        bc->ndst[i] = b[i].nodes[0].num_dst;
        bc->ne[i] = m;
        bc->ids[i] = malloc(n * 8 + 8);
        bc->s[i] = malloc(m * 8 + 8);
        bc->d[i] = malloc(m * 8 + 8);
        bc->e[i] = malloc(m * 8 + 8);
        memcpy(bc->ids[i], b[i].nodes[0].ids, n * 8);
        memcpy(bc->s[i], b[i].edges[0].src, m * 8);
        memcpy(bc->d[i], b[i].edges[0].dst, m * 8);
        memcpy(bc->e[i], b[i].edges[0].eid, m * 8);
    }
}

void
gkvt_ng_bcopy_free(struct gkvt_ng_bcopy *bc)
{
    for (int i = 0; i < bc->nl; i++) {
        free(bc->ids[i]);
        free(bc->s[i]);
        free(bc->d[i]);
        free(bc->e[i]);
    }
}

const int64_t *
gkvt_ng_host_view(const int64_t *p, size_t n, int dev, int64_t *tmp)
{
    if (!dev || n == 0)
        return p;
#ifdef GKV_HAVE_CUDA
    GKVT_OK(gkv_gpu_copy(tmp, p, n * 8, NULL));
    GKVT_OK(gkv_gpu_sync(NULL));
    return tmp;
#else
    fail_msg("device arrays in a build without CUDA");
    return NULL;
#endif
}

size_t
gkvt_ng_blocks_equal(const struct gkvt_ng_bcopy *ref, const gkv_block *cb,
                     int nl, int dev)
{
    size_t edges = 0, cap = 0;
    int64_t *tmp = NULL;

    for (int i = 0; i < nl; i++) {
        if (ref->nsrc[i] > cap)
            cap = ref->nsrc[i];
        if (ref->ne[i] > cap)
            cap = ref->ne[i];
    }
    tmp = malloc(cap * 8 + 8);
    assert_non_null(tmp);
    for (int i = 0; i < nl; i++) {
        const gkv_sample_edges *e = &cb[i].edges[0];
        size_t m = ref->ne[i];

        assert_int_equal(cb[i].num_ntypes, 1);
        assert_int_equal(cb[i].num_etypes, 1);
        assert_int_equal(cb[i].nodes[0].num_src, ref->nsrc[i]);
        assert_int_equal(cb[i].nodes[0].num_dst, ref->ndst[i]);
        assert_int_equal(e->n, m);
        assert_memory_equal(gkvt_ng_host_view(cb[i].nodes[0].ids,
                                              ref->nsrc[i], dev, tmp),
                            ref->ids[i], ref->nsrc[i] * 8);
        if (m > 0) {
            assert_memory_equal(gkvt_ng_host_view(e->src, m, dev, tmp),
                                ref->s[i], m * 8);
            assert_memory_equal(gkvt_ng_host_view(e->dst, m, dev, tmp),
                                ref->d[i], m * 8);
            assert_memory_equal(gkvt_ng_host_view(e->eid, m, dev, tmp),
                                ref->e[i], m * 8);
        }
        edges += m;
    }
    /* blocks chain: destination nodes of block i are block i+1's sources */
    for (int i = 0; i + 1 < nl; i++)
        assert_int_equal(cb[i].nodes[0].num_dst, cb[i + 1].nodes[0].num_src);
    free(tmp);
    return edges;
}

void
gkvt_ng_ref_blocks(struct gkvt_ng *f, struct gkvt_ng_bcopy *ref,
                   const int64_t *seeds, size_t n, const int *fan, int nl,
                   const gkv_sample_opts *o)
{
    gkv_block wb[8];
    const int64_t *sv[1] = {seeds};
    size_t sn[1] = {n};

    GKVT_OK(gkv_sample_blocks(f->ref.ws, sv, sn, fan, 1, nl, o, wb));
    gkvt_ng_bcopy_take(ref, wb, nl);
}

size_t
gkvt_ng_check_blocks(struct gkvt_ng *f, gkv_client *c, const int64_t *seeds,
                     size_t n, const int *fan, int nl,
                     const gkv_sample_opts *o)
{
    gkv_block cb[8];
    struct gkvt_ng_bcopy ref;
    const int64_t *sv[1] = {seeds};
    size_t sn[1] = {n}, edges;

    gkvt_ng_ref_blocks(f, &ref, seeds, n, fan, nl, o);
    NET_OK(gkv_client_sample_blocks(c, sv, sn, fan, 1, nl, o, cb));
    edges = gkvt_ng_blocks_equal(&ref, cb, nl, 0);
    gkvt_ng_bcopy_free(&ref);
    return edges;
}

void
gkvt_ng_check_hop(struct gkvt_ng *f, gkv_client *c, const int64_t *seeds,
                  size_t n, int fan, int layer, const gkv_sample_opts *o)
{
    gkv_sample_edges we, ce;
    const int64_t *sv[1] = {seeds};
    size_t sn[1] = {n};
    int64_t *s, *d, *e;
    size_t m;

    GKVT_OK(gkv_sample_neighbors(f->ref.ws, sv, sn, &fan, 1, layer, o, &we));
    m = we.n;
    s = malloc(m * 8 + 8);
    d = malloc(m * 8 + 8);
    e = malloc(m * 8 + 8);
    memcpy(s, we.src, m * 8);
    memcpy(d, we.dst, m * 8);
    memcpy(e, we.eid, m * 8);
    NET_OK(gkv_client_sample_neighbors(c, sv, sn, &fan, 1, layer, o, &ce));
    assert_int_equal(ce.n, m);
    assert_true(m > 0);
    assert_memory_equal(ce.src, s, m * 8);
    assert_memory_equal(ce.dst, d, m * 8);
    assert_memory_equal(ce.eid, e, m * 8);
    free(s);
    free(d);
    free(e);
}

int
gkvt_ng_owner_of(struct gkvt_ng *f, int64_t v, int edge)
{
    int32_t q;
    const gkv_pbook *b = gkv_part_book(f->part[0]);

    if (edge)
        GKVT_OK(gkv_pbook_edge_owner(b, 0, &v, 1, &q));
    else
        GKVT_OK(gkv_pbook_node_owner(b, 0, &v, 1, &q));
    return q;
}

void
gkvt_ng_check_queries(struct gkvt_ng *f, gkv_client *c, const int64_t *nodes,
                      size_t n, const int64_t *eids, size_t ne)
{
    int64_t *a = malloc(ne * 8 + 8), *b = malloc(ne * 8 + 8);
    int64_t *deg = malloc(n * 8 + 8), *src, *dst, *eid;
    size_t m, at = 0;

    NET_OK(gkv_client_find_edges(c, 0, eids, ne, a, b));
    for (size_t i = 0; i < ne; i++) {
        int64_t s1, d1;
        GKVT_OK(gkv_part_find_edges(f->part[gkvt_ng_owner_of(f, eids[i], 1)], 0,
                                    &eids[i], 1, &s1, &d1));
        assert_int_equal(a[i], s1);
        assert_int_equal(b[i], d1);
    }
    NET_OK(gkv_client_in_degrees(c, 0, nodes, n, deg));
    for (size_t i = 0; i < n; i++) {
        int64_t d1;
        GKVT_OK(gkv_part_in_degrees(f->part[gkvt_ng_owner_of(f, nodes[i], 0)],
                                    0, &nodes[i], 1, &d1));
        assert_int_equal(deg[i], d1);
    }
    NET_OK(gkv_client_out_degrees(c, 0, nodes, n, deg));
    for (size_t i = 0; i < n; i++) {
        int64_t d1;
        GKVT_OK(gkv_part_out_degrees(f->part[gkvt_ng_owner_of(f, nodes[i], 0)],
                                     0, &nodes[i], 1, &d1));
        assert_int_equal(deg[i], d1);
    }
    NET_OK(gkv_client_in_subgraph(c, 0, nodes, n, &src, &dst, &eid, &m));
    for (size_t i = 0; i < n; i++) {
        int64_t *s1, *d1, *e1;
        size_t m1;
        GKVT_OK(gkv_part_in_subgraph(f->part[gkvt_ng_owner_of(f, nodes[i], 0)],
                                     0, &nodes[i], 1, &s1, &d1, &e1, &m1));
        assert_true(at + m1 <= m);
        if (m1 > 0) {
            assert_memory_equal(src + at, s1, m1 * 8);
            assert_memory_equal(dst + at, d1, m1 * 8);
            assert_memory_equal(eid + at, e1, m1 * 8);
        }
        at += m1;
        gkv_free(s1);
        gkv_free(d1);
        gkv_free(e1);
    }
    assert_int_equal(at, m);
    gkv_free(src);
    gkv_free(dst);
    gkv_free(eid);
    free(a);
    free(b);
    free(deg);
}

int64_t *
gkvt_ng_inverse_map(const struct gkvt_ng *f)
{
    int64_t *inv = malloc((size_t)f->n * 8);

    assert_non_null(inv);
    for (int64_t u = 0; u < f->n; u++)
        inv[f->nmap[u]] = u;
    return inv;
}

void
gkvt_ng_check_features(struct gkvt_ng *f, gkv_client *c, const int64_t *nodes,
                       size_t n)
{
    int64_t *inv = gkvt_ng_inverse_map(f);
    float *rows = malloc(n * GKVT_NG_FEAT_W * 4 + 4);

    NET_OK(gkv_client_pull(c, "node/_N/feat", (const uint64_t *)nodes, n,
                           rows, n * GKVT_NG_FEAT_W * 4));
    for (size_t i = 0; i < n; i++)
        assert_memory_equal(rows + i * GKVT_NG_FEAT_W,
                            f->feat + inv[nodes[i]] * GKVT_NG_FEAT_W,
                            GKVT_NG_FEAT_W * 4);
    free(inv);
    free(rows);
}
