/* gkvt_graph.c - graphs for the sampling tests (gkvt_graph.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkvt_graph.h"

const char *const gkvt_ui_rel[3][3] = {
    {"user", "follows", "user"}, {"user", "clicks", "item"},
    {"item", "clicked_by", "user"}};
const char *const gkvt_ui_canon[3] = {
    "user:follows:user", "user:clicks:item", "item:clicked_by:user"};

gkv_graph *
gkvt_ui_graph(uint64_t seed, int weighted)
{
    gkv_rmat_spec sp = {0};
    gkv_graph *g;
    int64_t *src, *dst;
    float *ew = NULL;

    sp.scale = 10;
    sp.edge_factor = 8;
    sp.seed = seed;
    src = malloc(GKVT_UI_FOLLOWS * 8);
    dst = malloc(GKVT_UI_FOLLOWS * 8);
    assert_true(src != NULL && dst != NULL);
    GKVT_OK(gkv_rmat_edges(&sp, 0, GKVT_UI_FOLLOWS, src, dst));
    if (weighted) {
        ew = malloc(GKVT_UI_FOLLOWS * sizeof *ew);
        assert_non_null(ew);
        for (int64_t i = 0; i < GKVT_UI_FOLLOWS; i++)
            ew[i] = (float)(i % 3) + 0.5f;
    }
    GKVT_OK(gkv_graph_new(&g));
    GKVT_OK(gkv_graph_add_ntype(g, "user", GKVT_UI_USERS, NULL));
    GKVT_OK(gkv_graph_add_ntype(g, "item", GKVT_UI_ITEMS, NULL));
    for (int e = 0; e < 3; e++)
        GKVT_OK(gkv_graph_add_etype(g, gkvt_ui_rel[e][0], gkvt_ui_rel[e][1],
                                    gkvt_ui_rel[e][2], NULL));
    GKVT_OK(gkv_graph_add_edges(g, 0, src, dst, ew, GKVT_UI_FOLLOWS));
    for (int64_t i = 0; i < GKVT_UI_CLICKS; i++)
        dst[i] %= GKVT_UI_ITEMS;
    GKVT_OK(gkv_graph_add_edges(g, 1, src, dst, NULL, GKVT_UI_CLICKS));
    GKVT_OK(gkv_graph_add_edges(g, 2, dst, src, NULL, GKVT_UI_CLICKS));
    free(src);
    free(dst);
    free(ew);
    return g;
}

void
gkvt_ui_seeds_make(struct gkvt_ui_seeds *s, int k)
{
    for (int i = 0; i < 200; i++)
        s->us[i] = (i * 389 + 5 + k * 11) % GKVT_UI_USERS;
    for (int i = 0; i < 60; i++)
        s->is[i] = (i * 97 + 1 + k) % GKVT_UI_ITEMS;
    s->sv[0] = s->us;
    s->sv[1] = s->is;
    s->ns[0] = 200;
    s->ns[1] = 60;
}

int64_t *
gkvt_read_map(const char *path, int64_t n)
{
    gkv_npy_map m;
    char msg[256];
    int64_t *v;

    GKVT_OK(gkv_npy_map_open(&m, path, msg, sizeof msg));
    assert_int_equal(m.hdr.data_bytes, (uint64_t)n * 8);
    v = malloc((size_t)n * 8 + 8);
    assert_non_null(v);
    memcpy(v, m.data, (size_t)n * 8);
    gkv_npy_map_close(&m);
    return v;
}

void
gkvt_partition(const gkv_graph *g, const char *dir, const char *parts_dir,
               const char *name, int nparts, uint64_t seed,
               const gkv_part_feat *pf, size_t nfeats, char *json, size_t cap)
{
    gkv_part_spec spec = {0};
    gkv_part_reverse rev = {gkvt_ui_canon[1], gkvt_ui_canon[2]};
    char out[4000], msg[512];
    int e;

    snprintf(out, sizeof out, "%s/%s", dir, parts_dir);
    /* the user/item graph's clicks and their reverses */
    if (gkv_graph_etype_find(g, gkvt_ui_canon[1], &e) == GKV_OK &&
        gkv_graph_etype_find(g, gkvt_ui_canon[2], &e) == GKV_OK) {
        spec.reverse = &rev;
        spec.nreverse = 1;
    }
    spec.name = name;
    spec.method = GKV_PART_RANDOM;
    spec.num_parts = nparts;
    spec.seed = seed;
    spec.flags = GKV_PART_CSR;
    spec.feats = pf;
    spec.nfeats = nfeats;
    if (gkv_partition_write(g, &spec, out, NULL, msg, sizeof msg) != GKV_OK)
        fail_msg("partition_write: %s", msg);
    snprintf(json, cap, "%s/%s.json", out, name);
}

int64_t *
gkvt_ui_reverse(const gkv_pbook *b)
{
    int64_t *em[2], *rev = malloc(GKVT_UI_CLICKS * 8);

    assert_non_null(rev);
    for (int e = 0; e < 2; e++)
        em[e] = gkvt_read_map(gkv_pbook_edge_mapping(b, e + 1), GKVT_UI_CLICKS);
    for (int64_t k = 0; k < GKVT_UI_CLICKS; k++)
        rev[em[0][k]] = em[1][k];
    free(em[0]);
    free(em[1]);
    return rev;
}

gkv_graph *
gkvt_graph_renumber(const gkv_graph *g, const gkv_pbook *b, int64_t **emap,
                    int64_t **nmap)
{
    int nt = gkv_graph_num_ntypes(g), net = gkv_graph_num_etypes(g);
    int64_t *nm[8];
    gkv_graph *w;

    assert_true(nt >= 1 && nt <= 8);
    GKVT_OK(gkv_graph_new(&w));
    for (int t = 0; t < nt; t++) {
        int64_t n = gkv_graph_num_nodes(g, t);

        nm[t] = gkvt_read_map(gkv_pbook_node_mapping(b, t), n);
        GKVT_OK(gkv_graph_add_ntype(w, gkv_graph_ntype_name(g, t), n, NULL));
    }
    for (int e = 0; e < net; e++) {
        gkv_etype_info in;
        gkv_coo coo;
        int64_t *em, *src, *dst;
        float *ew;
        size_t n;

        GKVT_OK(gkv_graph_etype_info(g, e, &in));
        GKVT_OK(gkv_graph_add_etype(w, in.src_type, in.relation, in.dst_type,
                                    NULL));
        em = gkvt_read_map(gkv_pbook_edge_mapping(b, e), in.num_edges);
        GKVT_OK(gkv_graph_edges(g, e, &coo));
        n = (size_t)coo.n;
        src = malloc(n * 8 + 8);
        dst = malloc(n * 8 + 8);
        ew = malloc(n * sizeof *ew + 8);
        assert_true(src != NULL && dst != NULL && ew != NULL);
        for (size_t i = 0; i < n; i++) {
            src[em[i]] = nm[in.src_ntype][coo.src[i]];
            dst[em[i]] = nm[in.dst_ntype][coo.dst[i]];
            if (coo.w != NULL)
                ew[em[i]] = coo.w[i];
        }
        GKVT_OK(gkv_graph_add_edges(w, e, src, dst, coo.w != NULL ? ew : NULL,
                                    n));
        free(src);
        free(dst);
        free(ew);
        if (emap != NULL)
            emap[e] = em;
        else
            free(em);
    }
    for (int t = 0; t < nt; t++) {
        if (nmap != NULL)
            nmap[t] = nm[t];
        else
            free(nm[t]);
    }
    return w;
}

int
gkvt_edges_same(const gkv_sample_edges *a, const gkv_sample_edges *b, int net)
{
    for (int e = 0; e < net; e++) {
        if (a[e].n != b[e].n)
            return 0;
        if (a[e].n > 0 && (memcmp(a[e].src, b[e].src, a[e].n * 8) ||
                           memcmp(a[e].dst, b[e].dst, a[e].n * 8) ||
                           memcmp(a[e].eid, b[e].eid, a[e].n * 8)))
            return 0;
    }
    return 1;
}

int
gkvt_blocks_same(const gkv_block *a, const gkv_block *b, int nl)
{
    for (int i = 0; i < nl; i++) {
        if (a[i].num_ntypes != b[i].num_ntypes ||
            a[i].num_etypes != b[i].num_etypes)
            return 0;
        for (int t = 0; t < a[i].num_ntypes; t++) {
            const gkv_block_nodes *x = &a[i].nodes[t], *y = &b[i].nodes[t];
            if (x->num_src != y->num_src || x->num_dst != y->num_dst ||
                (x->num_src > 0 && memcmp(x->ids, y->ids, x->num_src * 8)))
                return 0;
        }
        if (!gkvt_edges_same(a[i].edges, b[i].edges, a[i].num_etypes))
            return 0;
    }
    return 1;
}

gkv_sgraph *
gkvt_sg_fixed(int hetero, unsigned flags)
{
    gkv_graph *g;
    gkv_sgraph *sg;

    GKVT_OK(hetero ? gkv_graph_fixed_hetero(&g) : gkv_graph_fixed_homo(&g));
    GKVT_OK(gkv_sgraph_from_graph(&sg, g, flags, 1));
    gkv_graph_free(g);
    return sg;
}

gkv_sampler *
gkvt_sampler(const gkv_sgraph *sg, int nt)
{
    gkv_sampler *s;

    GKVT_OK(gkv_sampler_new(&s, sg, nt));
    return s;
}

struct gkvt_seeds1
gkvt_one(const int64_t *v, size_t n)
{
    struct gkvt_seeds1 s = {{v}, {n}};
    return s;
}

gkv_rmat_spec
gkvt_rmat_spec(int scale, uint64_t seed, unsigned flags)
{
    gkv_rmat_spec sp;

    memset(&sp, 0, sizeof sp);
    sp.scale = scale;
    sp.seed = seed;
    sp.flags = flags;
    return sp;
}

gkv_graph *
gkvt_rmat(int scale, uint64_t seed)
{
    gkv_rmat_spec sp = gkvt_rmat_spec(scale, seed, 0);
    gkv_graph *g;

    GKVT_OK(gkv_rmat_graph(&g, &sp, 1));
    return g;
}

int64_t *
gkvt_distinct_seeds(int64_t N, uint64_t *st)
{
    int64_t *perm = malloc((size_t)N * sizeof *perm);

    assert_non_null(perm);
    for (int64_t i = 0; i < N; i++)
        perm[i] = i;
    for (int64_t i = N - 1; i > 0; i--) {
        int64_t j = (int64_t)(tools__splitmix64(st) % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    return perm;
}

void
gkvt_expect_coo(const gkv_graph *g, int et, const int64_t *s,
                const int64_t *d, const float *w, size_t n)
{
    gkv_coo c;

    GKVT_OK(gkv_graph_edges(g, et, &c));
    assert_int_equal(c.n, n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(c.src[i], s[i]);
        assert_int_equal(c.dst[i], d[i]);
    }
    if (w == NULL) {
        assert_null(c.w);
    } else {
        assert_non_null(c.w);
        for (size_t i = 0; i < n; i++)
            assert_true(c.w[i] == w[i]);
    }
}

/* The reference order: edge positions sorted by (col, position). */
static const int64_t *ref_col;

static int
ref_cmp(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

    if (ref_col[a] != ref_col[b])
        return ref_col[a] < ref_col[b] ? -1 : 1;
    return a < b ? -1 : a > b;
}

void
gkvt_csc_check(const gkv_csc *a, const int64_t *col, const int64_t *other,
               const int64_t *eid, size_t n, int64_t ncols)
{
    int64_t *ord = malloc((n + 1) * sizeof *ord);
    unsigned char *seen = calloc(n + 1, 1);

    assert_non_null(ord);
    assert_non_null(seen);
    assert_int_equal(a->num_cols, ncols);
    assert_int_equal(a->num_edges, n);
    assert_int_equal(a->indptr[0], 0);
    assert_int_equal(a->indptr[ncols], n);
    for (int64_t k = 0; k < ncols; k++)
        assert_true(a->indptr[k] <= a->indptr[k + 1]);
    for (size_t i = 0; i < n; i++)
        ord[i] = (int64_t)i;
    ref_col = col;
    qsort(ord, n, sizeof *ord, ref_cmp);
    for (int64_t k = 0, q = 0; k < ncols; k++)
        for (; q < a->indptr[k + 1]; q++) {
            int64_t j = ord[q];
            if (col[j] != k || a->indices[q] != other[j] ||
                a->eids[q] != (eid != NULL ? eid[j] : j))
                fail_msg("position %lld (column %lld): got (%lld, %lld), "
                         "want edge %lld (%lld, %lld)", (long long)q,
                         (long long)k, (long long)a->indices[q],
                         (long long)a->eids[q], (long long)j,
                         (long long)other[j],
                         (long long)(eid != NULL ? eid[j] : j));
            assert_int_equal(seen[j], 0);            /* exactly once */
            seen[j] = 1;
        }
    free(ord);
    free(seen);
}

void
gkvt_ref_sampler(struct gkvt_ref *r)
{
    GKVT_OK(gkv_sgraph_from_graph(&r->wsg, r->whole, GKV_SG_CSR, 1));
    GKVT_OK(gkv_sampler_new(&r->ws, r->wsg, 1));
}

void
gkvt_ref_free(struct gkvt_ref *r)
{
    gkv_sampler_free(r->ws);
    free(r->rev);
    gkv_sgraph_free(r->wsg);
    gkv_graph_free(r->whole);
    memset(r, 0, sizeof *r);
}

/* ---- edge features of the user/item graph ---------------------------------- */

void
gkvt_efeat_make(struct gkvt_efeat *t, const char *name, int et, gkv_dtype dt,
                unsigned ndim, uint64_t shape0, int64_t n)
{
    uint64_t elems = ndim == 0 ? 1 : shape0;

    memset(t, 0, sizeof *t);
    t->name = name;
    t->et = et;
    t->dt = dt;
    t->ndim = ndim;
    t->shape0 = shape0;
    t->orig = calloc((size_t)(n * (int64_t)elems), gkv_dtype_size(dt));
    t->w = calloc((size_t)n, sizeof *t->w);
    assert_true(t->orig != NULL && t->w != NULL);
    for (int64_t i = 0; i < n; i++) {
        uint64_t h = (uint64_t)i * 131 + (uint64_t)et * 7 + (uint64_t)name[0];

        h = tools__splitmix64(&h);
        for (uint64_t j = 0; j < elems; j++) {
            size_t at = (size_t)((uint64_t)i * elems + j);

            switch (dt) {
            case GKV_F32: ((float *)t->orig)[at] = (float)(h % 5) * 0.75f; break;
            case GKV_F64: ((double *)t->orig)[at] = (double)(h % 7) / 3.0; break;
            case GKV_F16: ((uint16_t *)t->orig)[at] =
                gkv_f32_to_f16((float)(h % 6) * 0.3f); break;
            case GKV_I32: ((int32_t *)t->orig)[at] = (int32_t)(h % 4); break;
            case GKV_U8: ((uint8_t *)t->orig)[at] = (uint8_t)(h % 5 < 2); break;
            default: fail_msg("gkvt_efeat_make: dtype %d", (int)dt); break;
            }
        }
    }
}

float
gkvt_efeat_float(const struct gkvt_efeat *t, int64_t i)
{
    uint64_t elems = t->ndim == 0 ? 1 : t->shape0;
    size_t at = (size_t)((uint64_t)i * elems);

    switch (t->dt) {
    case GKV_F32: return ((float *)t->orig)[at];
    case GKV_F64: return (float)((double *)t->orig)[at];
    case GKV_F16: return gkv_f16_to_f32(((uint16_t *)t->orig)[at]);
    case GKV_I32: return (float)((int32_t *)t->orig)[at];
    case GKV_U8: return (float)((uint8_t *)t->orig)[at];
    default: return NAN;
    }
}

void
gkvt_efeat_free(struct gkvt_efeat *t)
{
    free(t->orig);
    free(t->w);
    t->orig = NULL;
    t->w = NULL;
}

void
gkvt_ui_partition_efeats(const gkv_graph *g, const char *dir,
                         struct gkvt_efeat *ft, int nft, char *json,
                         size_t cap, struct gkvt_ref *ref, int64_t *emap[3])
{
    gkv_part_feat *pf = calloc((size_t)nft + 1, sizeof *pf);
    gkv_part *part;

    assert_non_null(pf);
    for (int i = 0; i < nft; i++) {
        pf[i].is_edge = 1;
        pf[i].type = gkvt_ui_canon[ft[i].et];
        pf[i].name = ft[i].name;
        pf[i].data = ft[i].orig;
        pf[i].dtype = ft[i].dt;
        pf[i].ndim = ft[i].ndim;
        pf[i].shape[0] = ft[i].shape0;
        pf[i].nrows = (uint64_t)gkv_graph_num_edges(g, ft[i].et);
    }
    gkvt_partition(g, dir, "parts", "p", 2, 5, pf, (size_t)nft, json, cap);
    free(pf);
    GKVT_OK(gkv_part_open(&part, json, 0, 0));
    ref->whole = gkvt_graph_renumber(g, gkv_part_book(part), emap, NULL);
    ref->rev = gkvt_ui_reverse(gkv_part_book(part));
    for (int i = 0; i < nft; i++) {
        struct gkvt_efeat *t = &ft[i];
        int64_t n = gkv_graph_num_edges(g, t->et);

        for (int64_t k = 0; k < n; k++)
            t->w[emap[t->et][k]] = gkvt_efeat_float(t, k);
    }
    gkvt_ref_sampler(ref);
    gkv_part_close(part);
}

void
gkvt_ui_efeats_free(struct gkvt_ref *ref, int64_t *emap[3],
                    struct gkvt_efeat *ft, int nft)
{
    gkvt_ref_free(ref);
    for (int e = 0; e < 3; e++) {
        free(emap[e]);
        emap[e] = NULL;
    }
    for (int i = 0; i < nft; i++)
        gkvt_efeat_free(&ft[i]);
}

/* ---- copies of blocks ---- */

int64_t *
gkvt_dup64(const int64_t *p, size_t n)
{
    int64_t *q = malloc(n * sizeof *q + 1);
    if (n > 0)
        memcpy(q, p, n * sizeof *q);
    return q;
}

void
gkvt_bcopy_take(struct gkvt_bcopy *c, const gkv_block *b, int nl)
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
            c->ids[l][t] = gkvt_dup64(b[l].nodes[t].ids, c->nsrc[l][t]);
        }
        for (int e = 0; e < c->net; e++) {
            size_t n = b[l].edges[e].n;
            c->ne[l][e] = n;
            c->es[l][e] = gkvt_dup64(b[l].edges[e].src, n);
            c->ed[l][e] = gkvt_dup64(b[l].edges[e].dst, n);
            c->ee[l][e] = gkvt_dup64(b[l].edges[e].eid, n);
        }
    }
}

void
gkvt_bcopy_free(struct gkvt_bcopy *c)
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

int
gkvt_bcopy_same(const struct gkvt_bcopy *c, const gkv_block *b)
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
