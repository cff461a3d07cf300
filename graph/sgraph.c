/* sgraph.c - the sampling view of a graph or partition (gkv_sgraph_*):
 * per edge type and direction a CSC adjacency, set by the caller or built
 * from a gkv_graph (neighbour and edge ID packed side by side), and the
 * edge-ID index that turns edge IDs back into positions. */
#include <stdlib.h>
#include <string.h>
#include "graph/sample_int.h"

/* ---- the sgraph ------------------------------------------------------- */

/* sgraph calls are about no handle (NULL): the sgraph is made by them. */
#define sg_fail(rc, ...) gkv__fail(NULL, (rc), __VA_ARGS__)

void
graph__sgraph_set_part(gkv_sgraph *sg, const gkv_part *p)
{
    sg->part = p;
}

static void
inv_free(struct sg_inv *iv)
{
    if (iv == NULL)
        return;
    gkv__free(iv->pos);
    gkv__free(iv->keys);
    gkv__free(iv->vals);
    gkv__free(iv);
}

static void
adj_clear(struct sg_adj *sa)
{
    inv_free(atomic_load(&sa->inv));
    atomic_store(&sa->inv, NULL);
    for (int i = 0; i < 5; i++) {
        gkv__free(sa->raw[i]);
        sa->raw[i] = NULL;
    }
    sa->pk = NULL;
    atomic_store(&sa->soa, 0);
    sa->set = 0;
    memset(&sa->a, 0, sizeof sa->a);
    sa->ncols = sa->nnz = 0;
}

gkv_err
gkv_sgraph_new(gkv_sgraph **out, int num_ntypes, const int64_t *num_nodes,
               int num_etypes, const int *src_ntype, const int *dst_ntype)
{
    gkv_sgraph *sg;

    gkv__clear(NULL);
    if (out == NULL)
        return sg_fail(GKV_EINVAL, "out is NULL");
    *out = NULL;
    if (num_ntypes < 1 || num_ntypes > GKV_GRAPH_TYPES_MAX)
        return sg_fail(GKV_EINVAL, "num_ntypes %d is not in 1..%d",
                       num_ntypes, GKV_GRAPH_TYPES_MAX);
    if (num_etypes < 0 || num_etypes > GKV_GRAPH_TYPES_MAX)
        return sg_fail(GKV_EINVAL, "num_etypes %d is not in 0..%d",
                       num_etypes, GKV_GRAPH_TYPES_MAX);
    if (num_nodes == NULL ||
        (num_etypes > 0 && (src_ntype == NULL || dst_ntype == NULL)))
        return sg_fail(GKV_EINVAL, "num_nodes, src_ntype or dst_ntype is NULL");
    for (int t = 0; t < num_ntypes; t++)
        if (num_nodes[t] < 0 || num_nodes[t] >= (INT64_C(1) << 61))
            return sg_fail(GKV_EINVAL, "num_nodes[%d] = %lld is not a node "
                           "count", t, (long long)num_nodes[t]);
    for (int e = 0; e < num_etypes; e++)
        if (src_ntype[e] < 0 || src_ntype[e] >= num_ntypes ||
            dst_ntype[e] < 0 || dst_ntype[e] >= num_ntypes)
            return sg_fail(GKV_EINVAL, "edge type %d joins node types %d "
                           "and %d; there are %d", e, src_ntype[e],
                           dst_ntype[e], num_ntypes);
    if ((sg = gkv__calloc(1, sizeof *sg)) == NULL)
        return sg_fail(GKV_ENOMEM, "out of memory for the sgraph");
    sg->nnt = num_ntypes;
    sg->net = num_etypes;
    sg->nn = gkv__malloc((size_t)num_ntypes * sizeof *sg->nn);
    sg->snt = gkv__malloc(((size_t)num_etypes + 1) * sizeof *sg->snt);
    sg->dnt = gkv__malloc(((size_t)num_etypes + 1) * sizeof *sg->dnt);
    sg->adj = gkv__calloc(2 * (size_t)num_etypes + 1, sizeof *sg->adj);
    if (sg->nn == NULL || sg->snt == NULL || sg->dnt == NULL ||
        sg->adj == NULL || pthread_mutex_init(&sg->mu, NULL) != 0) {
        gkv__free(sg->nn);
        gkv__free(sg->snt);
        gkv__free(sg->dnt);
        gkv__free(sg->adj);
        gkv__free(sg);
        return sg_fail(GKV_ENOMEM, "out of memory for the sgraph");
    }
    memcpy(sg->nn, num_nodes, (size_t)num_ntypes * sizeof *sg->nn);
    if (num_etypes > 0) {
        memcpy(sg->snt, src_ntype, (size_t)num_etypes * sizeof *sg->snt);
        memcpy(sg->dnt, dst_ntype, (size_t)num_etypes * sizeof *sg->dnt);
    }
    *out = sg;
    return GKV_OK;
}

void
gkv_sgraph_free(gkv_sgraph *sg)
{
    if (sg == NULL)
        return;
    for (int i = 0; i < 2 * sg->net; i++)
        adj_clear(&sg->adj[i]);
    pthread_mutex_destroy(&sg->mu);
    gkv__free(sg->nn);
    gkv__free(sg->snt);
    gkv__free(sg->dnt);
    gkv__free(sg->adj);
    gkv__free(sg);
}

const char *
gkv_sgraph_errmsg(const gkv_sgraph *sg)
{
    (void)sg;
    return gkv_errmsg();
}

int
gkv_sgraph_num_ntypes(const gkv_sgraph *sg)
{
    return sg != NULL ? sg->nnt : -1;
}

int
gkv_sgraph_num_etypes(const gkv_sgraph *sg)
{
    return sg != NULL ? sg->net : -1;
}

int64_t
gkv_sgraph_num_nodes(const gkv_sgraph *sg, int ntype)
{
    return sg != NULL && ntype >= 0 && ntype < sg->nnt ? sg->nn[ntype] : -1;
}

int
gkv_sgraph_src_ntype(const gkv_sgraph *sg, int etype)
{
    return sg != NULL && etype >= 0 && etype < sg->net ? sg->snt[etype] : -1;
}

int
gkv_sgraph_dst_ntype(const gkv_sgraph *sg, int etype)
{
    return sg != NULL && etype >= 0 && etype < sg->net ? sg->dnt[etype] : -1;
}

gkv_err
gkv_sgraph_adj(const gkv_sgraph *sg, int etype, int dir, gkv_adj *out)
{
    struct sg_adj *sa;

    gkv__clear(NULL);
    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (sg == NULL || out == NULL)
        return sg_fail(GKV_EINVAL, "sgraph or out is NULL");
    if (etype < 0 || etype >= sg->net || (dir != GKV_DIR_IN &&
                                          dir != GKV_DIR_OUT))
        return sg_fail(GKV_EINVAL, "no edge type %d / direction %d", etype,
                       dir);
    if (!sg->adj[2 * etype + dir].set)
        return sg_fail(GKV_ENOTFOUND, "edge type %d has no %s adjacency",
                       etype, dir_name(dir));
    sa = (struct sg_adj *)&sg->adj[2 * etype + dir];
    if (sa->pk != NULL && !atomic_load_explicit(&sa->soa,
                                                memory_order_acquire)) {
        pthread_mutex_lock(&((gkv_sgraph *)sg)->mu);
        if (!atomic_load_explicit(&sa->soa, memory_order_relaxed)) {
            size_t m = (size_t)sa->nnz;
            int64_t *ix = graph__huge_alloc(m * sizeof *ix, &sa->raw[3]);
            int64_t *ei = graph__huge_alloc(m * sizeof *ei, &sa->raw[4]);
            if (ix == NULL || ei == NULL) {
                gkv__free(sa->raw[3]);
                gkv__free(sa->raw[4]);
                sa->raw[3] = sa->raw[4] = NULL;
                pthread_mutex_unlock(&((gkv_sgraph *)sg)->mu);
                return sg_fail(GKV_ENOMEM, "out of memory for the indices "
                               "and eids of edge type %d", etype);
            }
            for (size_t p = 0; p < m; p++) {
                ix[p] = sa->pk[2 * p];
                ei[p] = sa->pk[2 * p + 1];
            }
            sa->a.indices = ix;
            sa->a.eids = ei;
            atomic_store_explicit(&sa->soa, 1, memory_order_release);
        }
        pthread_mutex_unlock(&((gkv_sgraph *)sg)->mu);
    }
    *out = sa->a;
    return GKV_OK;
}

/* Checks 'a' as the (etype, dir) adjacency of 'sg'. */
static gkv_err
adj_check(const gkv_sgraph *sg, int et, int dir, const gkv_adj *a,
          int64_t *ncols, int64_t *nnz)
{
    int cnt = col_ntype(sg, et, dir), oth = nbr_ntype(sg, et, dir);
    int64_t nc, ne, on = sg->nn[oth];

    if (a->col_lo < 0 || a->col_hi < a->col_lo || a->col_hi > sg->nn[cnt])
        return sg_fail(GKV_EINVAL, "edge type %d %s: columns [%lld, %lld) "
                       "are not within the %lld nodes of type %d", et,
                       dir_name(dir), (long long)a->col_lo,
                       (long long)a->col_hi, (long long)sg->nn[cnt], cnt);
    nc = a->col_hi - a->col_lo;
    if (a->indptr == NULL)
        return sg_fail(GKV_EINVAL, "edge type %d %s: indptr is NULL", et,
                       dir_name(dir));
    if (a->indptr[0] != 0)
        return sg_fail(GKV_EINVAL, "edge type %d %s: indptr[0] is %lld, "
                       "not 0", et, dir_name(dir), (long long)a->indptr[0]);
    for (int64_t c = 0; c < nc; c++)
        if (a->indptr[c + 1] < a->indptr[c])
            return sg_fail(GKV_EINVAL, "edge type %d %s: indptr decreases "
                           "at column %lld (node %lld)", et, dir_name(dir),
                           (long long)c + 1, (long long)(a->col_lo + c));
    ne = a->indptr[nc];
    if (ne > 0 && a->indices == NULL)
        return sg_fail(GKV_EINVAL, "edge type %d %s: indices is NULL", et,
                       dir_name(dir));
    for (int64_t p = 0; p < ne; p++)
        if ((uint64_t)a->indices[p] >= (uint64_t)on)
            return sg_fail(GKV_ERANGE, "edge type %d %s: indices[%lld] = "
                           "%lld is not a node of type %d (%lld nodes)", et,
                           dir_name(dir), (long long)p,
                           (long long)a->indices[p], oth, (long long)on);
    if (a->eids != NULL) {
        for (int64_t p = 0; p < ne; p++)
            if (a->eids[p] < 0)
                return sg_fail(GKV_ERANGE, "edge type %d %s: eids[%lld] = "
                               "%lld is negative", et, dir_name(dir),
                               (long long)p, (long long)a->eids[p]);
    } else if (a->eid_lo < 0 || a->eid_lo > INT64_MAX - ne) {
        return sg_fail(GKV_ERANGE, "edge type %d %s: eid_lo %lld is not a "
                       "valid first edge ID", et, dir_name(dir),
                       (long long)a->eid_lo);
    }
    *ncols = nc;
    *nnz = ne;
    return GKV_OK;
}

gkv_err
gkv_sgraph_set_adj(gkv_sgraph *sg, int etype, int dir, const gkv_adj *a)
{
    struct sg_adj *sa;
    int64_t nc = 0, ne = 0;
    gkv_err rc;

    gkv__clear(NULL);
    if (sg == NULL || a == NULL)
        return sg_fail(GKV_EINVAL, "sgraph or adjacency is NULL");
    if (etype < 0 || etype >= sg->net)
        return sg_fail(GKV_EINVAL, "edge type %d: the sgraph has %d", etype,
                       sg->net);
    if (dir != GKV_DIR_IN && dir != GKV_DIR_OUT)
        return sg_fail(GKV_EINVAL, "direction %d is neither GKV_DIR_IN nor "
                       "GKV_DIR_OUT", dir);
    if ((rc = adj_check(sg, etype, dir, a, &nc, &ne)) != GKV_OK)
        return rc;
    sa = &sg->adj[2 * etype + dir];
    adj_clear(sa);
    sa->a = *a;
    sa->ncols = nc;
    sa->nnz = ne;
    sa->set = 1;
    return GKV_OK;
}

/* from_graph: packs [lo, hi) of a CSC into (neighbour, edge ID) pairs and
 * puts the weights in CSC order. */
struct pack_job {
    const gkv_csc *c;
    const float   *w;          /* COO weights by edge ID, or NULL */
    int64_t       *pk;
    float         *cw;
    size_t         lo, hi;
};

static void
pack_run(void *p)
{
    struct pack_job *j = p;
    const int64_t *ix = j->c->indices, *ei = j->c->eids;

    for (size_t q = j->lo; q < j->hi; q++) {
        j->pk[2 * q] = ix[q];
        j->pk[2 * q + 1] = ei[q];
    }
    if (j->w != NULL)
        for (size_t q = j->lo; q < j->hi; q++)
            j->cw[q] = j->w[ei[q]];
}

static void
pack(const gkv_csc *c, const float *w, int64_t *pk, float *cw, int nthreads)
{
    struct pack_job jobs[8];
    size_t m = (size_t)c->num_edges;
    int t = nthreads < 1 ? 1 : nthreads > 8 ? 8 : nthreads;

    if (m < ((size_t)1 << 20))
        t = 1;
    for (int i = 0; i < t; i++) {
        jobs[i].c = c;
        jobs[i].w = w;
        jobs[i].pk = pk;
        jobs[i].cw = cw;
        jobs[i].lo = m * (size_t)i / (size_t)t;
        jobs[i].hi = m * ((size_t)i + 1) / (size_t)t;
    }
    graph__parallel(pack_run, jobs, sizeof jobs[0], t);
}

gkv_err
gkv_sgraph_from_graph(gkv_sgraph **out, const gkv_graph *g, unsigned flags,
                      int nthreads)
{
    gkv_sgraph *sg = NULL;
    int64_t *nn = NULL;
    int *snt = NULL, *dnt = NULL, nnt, net;
    gkv_err rc;

    gkv__clear(NULL);
    if (out == NULL || g == NULL)
        return sg_fail(GKV_EINVAL, "out or graph is NULL");
    *out = NULL;
    if (flags & ~GKV_SG_CSR)
        return sg_fail(GKV_EINVAL, "unknown flags 0x%x", flags);
    nnt = gkv_graph_num_ntypes(g);
    net = gkv_graph_num_etypes(g);
    if (nnt < 1)
        return sg_fail(GKV_EINVAL, "the graph has no node types");
    nn = gkv__malloc((size_t)nnt * sizeof *nn);
    snt = gkv__malloc(((size_t)net + 1) * sizeof *snt);
    dnt = gkv__malloc(((size_t)net + 1) * sizeof *dnt);
    if (nn == NULL || snt == NULL || dnt == NULL) {
        rc = sg_fail(GKV_ENOMEM, "out of memory for the schema");
        goto out;
    }
    for (int t = 0; t < nnt; t++)
        nn[t] = gkv_graph_num_nodes(g, t);
    for (int e = 0; e < net; e++) {
        gkv_etype_info ei;
        gkv_graph_etype_info(g, e, &ei);
        snt[e] = ei.src_ntype;
        dnt[e] = ei.dst_ntype;
    }
    if ((rc = gkv_sgraph_new(&sg, nnt, nn, net, snt, dnt)) != GKV_OK)
        goto out;
    for (int e = 0; e < net; e++) {
        gkv_coo coo;
        gkv_graph_edges(g, e, &coo);
        for (int dir = 0; dir < 2; dir++) {
            struct sg_adj *sa = &sg->adj[2 * e + dir];
            gkv_csc c;
            int64_t *ip, *pk;
            float *w = NULL;
            size_t m, nc;
            if (dir == GKV_DIR_OUT && !(flags & GKV_SG_CSR))
                continue;
            rc = dir == GKV_DIR_IN ? gkv_graph_csc(g, e, nthreads, &c)
                                   : gkv_graph_csr(g, e, nthreads, &c);
            if (rc != GKV_OK) {
                rc = sg_fail(rc, "building the %s adjacency of edge type "
                             "%d: %s", dir_name(dir), e, gkv_strerror(rc));
                goto out;
            }
            m = (size_t)c.num_edges;
            nc = (size_t)c.num_cols;
            /* the arrays move to huge-page memory (see graph__huge_alloc) */
            ip = graph__huge_alloc((nc + 1) * sizeof *ip, &sa->raw[0]);
            pk = m <= SIZE_MAX / 16 ? graph__huge_alloc(m * 16,
                                                        &sa->raw[1]) : NULL;
            if (coo.w != NULL)
                w = graph__huge_alloc(m * sizeof *w, &sa->raw[2]);
            if (ip == NULL || pk == NULL || (coo.w != NULL && w == NULL)) {
                gkv_csc_free(&c);
                rc = sg_fail(GKV_ENOMEM, "out of memory for the %s "
                             "adjacency of edge type %d", dir_name(dir), e);
                goto out;
            }
            memcpy(ip, c.indptr, (nc + 1) * sizeof *ip);
            pack(&c, coo.w, pk, w, nthreads);
            gkv_csc_free(&c);
            sa->a.col_lo = 0;
            sa->a.col_hi = (int64_t)nc;
            sa->a.indptr = ip;
            sa->pk = pk;
            sa->a.indices = NULL;
            sa->a.eids = NULL;
            sa->a.eid_lo = 0;
            sa->a.w = w;
            sa->ncols = (int64_t)nc;
            sa->nnz = (int64_t)m;
            sa->set = 1;
        }
    }
    *out = sg;
    sg = NULL;
    rc = GKV_OK;
out:
    gkv_sgraph_free(sg);
    gkv__free(nn);
    gkv__free(snt);
    gkv__free(dnt);
    return rc;
}

struct pair { int64_t k, v; };

static int
pair_cmp(const void *x, const void *y)
{
    const struct pair *a = x, *b = y;

    return (a->k > b->k) - (a->k < b->k);
}

static gkv_err
inv_build(const struct sg_adj *sa, struct sg_inv **out)
{
    int64_t n = sa->nnz, lo = INT64_MAX, hi = -1;
    struct sg_inv *iv;

    if ((iv = gkv__calloc(1, sizeof *iv)) == NULL)
        return GKV_ENOMEM;
    for (int64_t p = 0; p < n; p++) {
        int64_t x = at_eid(sa, p);
        if (x < lo)
            lo = x;
        if (x > hi)
            hi = x;
    }
    if (n == 0) {
        *out = iv;
        return GKV_OK;
    }
    if ((uint64_t)(hi - lo) < 2 * (uint64_t)n + 64) {
        iv->lo = lo;
        iv->span = hi - lo + 1;
        if ((iv->pos = gkv__malloc((size_t)iv->span * sizeof *iv->pos)) ==
            NULL) {
            inv_free(iv);
            return GKV_ENOMEM;
        }
        memset(iv->pos, 0xff, (size_t)iv->span * sizeof *iv->pos);
        for (int64_t p = 0; p < n; p++)
            iv->pos[at_eid(sa, p) - lo] = p;
    } else {
        struct pair *pr = gkv__malloc((size_t)n * sizeof *pr);
        iv->keys = gkv__malloc((size_t)n * sizeof *iv->keys);
        iv->vals = gkv__malloc((size_t)n * sizeof *iv->vals);
        if (pr == NULL || iv->keys == NULL || iv->vals == NULL) {
            gkv__free(pr);
            inv_free(iv);
            return GKV_ENOMEM;
        }
        for (int64_t p = 0; p < n; p++) {
            pr[p].k = at_eid(sa, p);
            pr[p].v = p;
        }
        qsort(pr, (size_t)n, sizeof *pr, pair_cmp);
        for (int64_t p = 0; p < n; p++) {
            iv->keys[p] = pr[p].k;
            iv->vals[p] = pr[p].v;
        }
        iv->n = (size_t)n;
        gkv__free(pr);
    }
    *out = iv;
    return GKV_OK;
}

/* The edge-ID index of an adjacency with explicit eids, built once. */
gkv_err
graph__inv_get(const gkv_sgraph *sg, const struct sg_adj *sac,
               const struct sg_inv **out)
{
    struct sg_adj *sa = (struct sg_adj *)sac;
    struct sg_inv *iv = atomic_load_explicit(&sa->inv, memory_order_acquire);
    gkv_err rc = GKV_OK;

    if (iv == NULL) {
        pthread_mutex_lock(&((gkv_sgraph *)sg)->mu);
        iv = atomic_load_explicit(&sa->inv, memory_order_relaxed);
        if (iv == NULL && (rc = inv_build(sa, &iv)) == GKV_OK)
            atomic_store_explicit(&sa->inv, iv, memory_order_release);
        pthread_mutex_unlock(&((gkv_sgraph *)sg)->mu);
    }
    *out = iv;
    return rc;
}

/* The column (offset from col_lo) holding position p. */
static inline int64_t
pos_col(const gkv_adj *a, int64_t ncols, int64_t p)
{
    int64_t lo = 0, hi = ncols;      /* last c with indptr[c] <= p */

    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a->indptr[mid] <= p)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

gkv_err
gkv_sgraph_find_edges(const gkv_sgraph *sg, int etype, const int64_t *eids,
                      size_t n, int64_t *src, int64_t *dst)
{
    const struct sg_adj *sa;
    const struct sg_inv *iv = NULL;
    int dir;
    gkv_err rc;

    gkv__clear(NULL);
    if (sg == NULL || (n > 0 && (eids == NULL || src == NULL || dst == NULL)))
        return sg_fail(GKV_EINVAL, "sgraph or an array is NULL");
    if (etype < 0 || etype >= sg->net)
        return sg_fail(GKV_EINVAL, "edge type %d: the sgraph has %d", etype,
                       sg->net);
    dir = sg->adj[2 * etype].set ? GKV_DIR_IN : GKV_DIR_OUT;
    sa = &sg->adj[2 * etype + dir];
    if (!sa->set)
        return sg_fail(GKV_EINVAL, "edge type %d has no adjacency set",
                       etype);
    if (has_eids(sa) && (rc = graph__inv_get(sg, sa, &iv)) != GKV_OK)
        return sg_fail(rc, "out of memory for the edge-ID index of edge "
                       "type %d", etype);
    for (size_t i = 0; i < n; i++) {
        int64_t p = eid_pos(sa, iv, eids[i]), c, node, other;
        if (p < 0)
            return sg_fail(GKV_ERANGE, "eids[%zu] = %lld is not an edge of "
                           "type %d held here", i, (long long)eids[i],
                           etype);
        c = pos_col(&sa->a, sa->ncols, p);
        node = sa->a.col_lo + c;
        other = at_idx(sa, p);
        src[i] = dir == GKV_DIR_IN ? other : node;
        dst[i] = dir == GKV_DIR_IN ? node : other;
    }
    return GKV_OK;
}
