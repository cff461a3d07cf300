/* part.c - the partition reader: one partition's store, its adjacency
 * (CSC, and CSR when stored) loaded into memory and checked, and the
 * queries on it (degrees, find_edges, in_subgraph).
 *
 * Everything a query touches is checked at open, so a query never trusts
 * stored data: indptr starts at 0, never decreases and ends at the edge
 * count; every index is below its node type's count. A corrupt partition
 * fails gkv_part_open() with GKV_ECORRUPT instead of crashing a server. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "graph/graph_int.h"
#include "graph/gkv_part.h"

/* ---- messages ---------------------------------------------------------- */

/* gkv__fail() / gkv__clear() about p (NULL: a failed open). */
static inline const void *pt_about(const gkv_part *p) { return p; }
#define pt_fail(p, rc, ...) gkv__fail(pt_about(p), (rc), __VA_ARGS__)
#define pt_clear(p)         gkv__clear(pt_about(p))

const char *
gkv_part_errmsg(const gkv_part *p)
{
    return gkv__errmsg_about(p);
}

/* ---- the handle --------------------------------------------------------- */

/* One edge type's adjacency in one direction, owned by the partition. */
struct part_adj {
    int64_t  col_lo, col_hi;   /* owned columns (type-wise node IDs) */
    int64_t  nedges;           /* indptr[col_hi - col_lo] */
    int64_t  eid_lo;           /* CSC: ID of position 0 */
    int64_t *indptr;           /* col_hi - col_lo + 1 */
    int64_t *indices;          /* nedges (never NULL) */
    int64_t *eids;             /* CSR: nedges (never NULL); CSC: NULL */
    float   *w;                /* nedges, or NULL: unweighted */
};

struct gkv_part {
    gkv_pbook       *pt_book;
    gkv_store       *pt_store;
    int              pt_id;       /* partition number */
    int              pt_net;      /* edge types */
    struct part_adj *pt_csc;      /* pt_net */
    struct part_adj *pt_csr;      /* pt_net, or NULL: no CSR stored */
};

static void
adj_free(struct part_adj *a, int n)
{
    for (int i = 0; a != NULL && i < n; i++) {
        gkv__free(a[i].indptr);
        gkv__free(a[i].indices);
        gkv__free(a[i].eids);
        gkv__free(a[i].w);
    }
    gkv__free(a);
}

void
gkv_part_close(gkv_part *p)
{
    if (p == NULL)
        return;
    adj_free(p->pt_csc, p->pt_net);
    adj_free(p->pt_csr, p->pt_net);
    gkv_store_close(p->pt_store);
    gkv_pbook_close(p->pt_book);
    gkv__free(p);
}

/* ---- loading ------------------------------------------------------------ */

struct lctx {
    gkv_part *p;
    gkv_txn  *tx;
    char      name[GKV_NAME_MAX + 1];   /* tensor being loaded */
};

/* Reads tensor c->name, which must be dtype 'dt', ndim 0, rows [lo, hi),
 * into a new array *dst. A missing tensor is an empty one when 'may_miss'
 * (the config says its range is empty): *dst is then hi - lo zeroed
 * elements (one when none, so that no array of a loaded partition is
 * NULL). */
static gkv_err
load(struct lctx *c, gkv_dtype dt, int64_t lo, int64_t hi, int may_miss,
     void **dst)
{
    size_t esz = gkv_dtype_size(dt), n = (size_t)(hi - lo);
    gkv_tensor_desc d;
    gkv_err rc;

    *dst = NULL;
    rc = gkv_tensor_info(c->p->pt_store, c->tx, c->name, &d);
    if (rc == GKV_ENOTFOUND) {
        if (!may_miss)
            return pt_fail(NULL, GKV_ECORRUPT, "partition %d: tensor '%s' "
                           "is missing (the config gives it rows [%lld, "
                           "%lld))", c->p->pt_id, c->name, (long long)lo,
                           (long long)hi);
        if ((*dst = gkv__calloc(n ? n : 1, esz)) == NULL)
            return pt_fail(NULL, GKV_ENOMEM, "out of memory");
        return GKV_OK;
    }
    if (rc != GKV_OK)
        return pt_fail(NULL, rc, "partition %d: tensor '%s': %s",
                       c->p->pt_id, c->name,
                       gkv_store_errmsg(c->p->pt_store));
    if (d.dtype != dt || d.ndim != 0 || d.lo != (uint64_t)lo ||
        d.hi != (uint64_t)hi)
        return pt_fail(NULL, GKV_ECORRUPT, "partition %d: tensor '%s' is "
                       "%s, %u-d rows, IDs [%llu, %llu); expected %s scalars,"
                       " IDs [%lld, %lld) (a partition of another run of the "
                       "partitioner than the config, or damage)", c->p->pt_id,
                       c->name, gkv_dtype_name(d.dtype), d.ndim,
                       (unsigned long long)d.lo, (unsigned long long)d.hi,
                       gkv_dtype_name(dt), (long long)lo, (long long)hi);
    if ((*dst = gkv__malloc(n * esz)) == NULL)
        return pt_fail(NULL, GKV_ENOMEM, "out of memory");
    rc = gkv_tensor_read(c->p->pt_store, c->tx, c->name, (uint64_t)lo,
                         (uint64_t)hi, *dst, n * esz);
    if (rc != GKV_OK)
        return pt_fail(NULL, rc, "partition %d: reading tensor '%s': %s",
                       c->p->pt_id, c->name,
                       gkv_store_errmsg(c->p->pt_store));
    return GKV_OK;
}

static void
set_name(struct lctx *c, const char *dir, const char *canon,
         const char *what)
{
    snprintf(c->name, sizeof c->name, "%s/%s/%s", dir, canon, what);
}

/* Checks an indptr of ncols + 1 offsets: starts at 0, never decreases,
 * ends at 'm' (m < 0: any end, at most 'max_end'). */
static gkv_err
check_indptr(struct lctx *c, const int64_t *ptr, int64_t ncols, int64_t m,
             int64_t max_end)
{
    if (ptr[0] != 0)
        return pt_fail(NULL, GKV_ECORRUPT, "partition %d: tensor '%s': row "
                       "0 is %lld, expected 0", c->p->pt_id, c->name,
                       (long long)ptr[0]);
    for (int64_t i = 1; i <= ncols; i++)
        if (ptr[i] < ptr[i - 1])
            return pt_fail(NULL, GKV_ECORRUPT, "partition %d: tensor '%s': "
                           "row %lld is %lld, below row %lld (%lld): "
                           "offsets must not decrease", c->p->pt_id,
                           c->name, (long long)i, (long long)ptr[i],
                           (long long)(i - 1), (long long)ptr[i - 1]);
    if (m >= 0 && ptr[ncols] != m)
        return pt_fail(NULL, GKV_ECORRUPT, "partition %d: tensor '%s': last "
                       "row %lld is %lld, but the partition owns %lld edges",
                       c->p->pt_id, c->name, (long long)ncols,
                       (long long)ptr[ncols], (long long)m);
    if (m < 0 && ptr[ncols] > max_end)
        return pt_fail(NULL, GKV_ECORRUPT, "partition %d: tensor '%s': last "
                       "row %lld is %lld, more than the %lld edges of the "
                       "type", c->p->pt_id, c->name, (long long)ncols,
                       (long long)ptr[ncols], (long long)max_end);
    return GKV_OK;
}

/* Checks m IDs (rows lo + i of the tensor) are in [0, count). */
static gkv_err
check_ids(struct lctx *c, const int64_t *v, int64_t m, int64_t lo,
          int64_t count, const char *what)
{
    for (int64_t i = 0; i < m; i++)
        if (v[i] < 0 || v[i] >= count)
            return pt_fail(NULL, GKV_ECORRUPT, "partition %d: tensor '%s': "
                           "row %lld is %lld, not a %s ID (there are %lld)",
                           c->p->pt_id, c->name, (long long)(lo + i),
                           (long long)v[i], what, (long long)count);
    return GKV_OK;
}

static gkv_err
check_weights(struct lctx *c, const float *w, int64_t m, int64_t lo)
{
    for (int64_t i = 0; i < m; i++)
        if (!isfinite(w[i]) || w[i] < 0)
            return pt_fail(NULL, GKV_ECORRUPT, "partition %d: tensor '%s': "
                           "row %lld is not a weight (finite, 0 or more): %g",
                           c->p->pt_id, c->name, (long long)(lo + i),
                           (double)w[i]);
    return GKV_OK;
}

static gkv_err
load_csc(struct lctx *c, int et, const gkv_etype_info *ei)
{
    const gkv_pbook *b = c->p->pt_book;
    struct part_adj *a = &c->p->pt_csc[et];
    int64_t elo, ehi, ncols, m;
    char what[GKV_TYPE_NAME_MAX + 16];
    gkv_err rc;

    gkv_pbook_node_range(b, ei->dst_ntype, c->p->pt_id, &a->col_lo,
                         &a->col_hi);
    gkv_pbook_edge_range(b, et, c->p->pt_id, &elo, &ehi);
    ncols = a->col_hi - a->col_lo;
    if (ncols == INT64_MAX)             /* indptr: ncols + 1 rows */
        return pt_fail(NULL, GKV_ECORRUPT, "partition %d: owns %lld '%s' "
                       "nodes, too many for an indptr", c->p->pt_id,
                       (long long)ncols, ei->dst_type);
    m = ehi - elo;
    a->eid_lo = elo;
    a->nedges = m;
    set_name(c, "csc", ei->canonical, "indptr");
    if ((rc = load(c, GKV_I64, 0, ncols + 1, ncols == 0,
                   (void **)&a->indptr)) != 0 ||
        (rc = check_indptr(c, a->indptr, ncols, m, 0)) != 0)
        return rc;
    set_name(c, "csc", ei->canonical, "indices");
    snprintf(what, sizeof what, "'%s' node", ei->src_type);
    if ((rc = load(c, GKV_I64, elo, ehi, m == 0, (void **)&a->indices)) != 0 ||
        (rc = check_ids(c, a->indices, m, elo, gkv_pbook_num_nodes(
                            b, ei->src_ntype), what)) != 0)
        return rc;
    if (ei->weighted) {
        set_name(c, "csc", ei->canonical, "weight");
        if ((rc = load(c, GKV_F32, elo, ehi, m == 0, (void **)&a->w)) != 0 ||
            (rc = check_weights(c, a->w, m, elo)) != 0)
            return rc;
    }
    return GKV_OK;
}

static gkv_err
load_csr(struct lctx *c, int et, const gkv_etype_info *ei)
{
    const gkv_pbook *b = c->p->pt_book;
    struct part_adj *a = &c->p->pt_csr[et];
    char what[GKV_TYPE_NAME_MAX + 32];
    int64_t ncols, m;
    gkv_err rc;

    gkv_pbook_node_range(b, ei->src_ntype, c->p->pt_id, &a->col_lo,
                         &a->col_hi);
    ncols = a->col_hi - a->col_lo;
    if (ncols == INT64_MAX)             /* indptr: ncols + 1 rows */
        return pt_fail(NULL, GKV_ECORRUPT, "partition %d: owns %lld '%s' "
                       "nodes, too many for an indptr", c->p->pt_id,
                       (long long)ncols, ei->src_type);
    set_name(c, "csr", ei->canonical, "indptr");
    if ((rc = load(c, GKV_I64, 0, ncols + 1, ncols == 0,
                   (void **)&a->indptr)) != 0 ||
        (rc = check_indptr(c, a->indptr, ncols, -1, ei->num_edges)) != 0)
        return rc;
    m = a->nedges = a->indptr[ncols];
    set_name(c, "csr", ei->canonical, "indices");
    snprintf(what, sizeof what, "'%s' node", ei->dst_type);
    if ((rc = load(c, GKV_I64, 0, m, m == 0, (void **)&a->indices)) != 0 ||
        (rc = check_ids(c, a->indices, m, 0, gkv_pbook_num_nodes(
                            b, ei->dst_ntype), what)) != 0)
        return rc;
    set_name(c, "csr", ei->canonical, "eids");
    snprintf(what, sizeof what, "'%s' edge", ei->canonical);
    if ((rc = load(c, GKV_I64, 0, m, m == 0, (void **)&a->eids)) != 0 ||
        (rc = check_ids(c, a->eids, m, 0, ei->num_edges, what)) != 0)
        return rc;
    for (int64_t col = 0; col < ncols; col++)
        for (int64_t k = a->indptr[col] + 1; k < a->indptr[col + 1]; k++)
            if (a->eids[k] <= a->eids[k - 1])
                return pt_fail(NULL, GKV_ECORRUPT, "partition %d: tensor "
                               "'%s': row %lld (%lld) is not above row %lld "
                               "(%lld): a node's edge IDs must increase",
                               c->p->pt_id, c->name, (long long)k,
                               (long long)a->eids[k], (long long)(k - 1),
                               (long long)a->eids[k - 1]);
    if (ei->weighted) {
        set_name(c, "csr", ei->canonical, "weight");
        if ((rc = load(c, GKV_F32, 0, m, m == 0, (void **)&a->w)) != 0 ||
            (rc = check_weights(c, a->w, m, 0)) != 0)
            return rc;
    }
    return GKV_OK;
}

gkv_err
gkv_part_open(gkv_part **out, const char *json_path, int part,
              unsigned flags)
{
    struct lctx c = {0};
    gkv_part *p = NULL;
    gkv_err rc;

    pt_clear(NULL);
    if (out == NULL || json_path == NULL)
        return pt_fail(NULL, GKV_EINVAL, "gkv_part_open: NULL argument");
    *out = NULL;
    if ((flags & ~(GKV_PART_WRITABLE | GKV_NOSYNC | GKV_GUARD)) != 0)
        return pt_fail(NULL, GKV_EINVAL, "gkv_part_open: unknown flags "
                       "0x%x", flags & ~(GKV_PART_WRITABLE | GKV_NOSYNC |
                                         GKV_GUARD));
    if ((p = gkv__calloc(1, sizeof *p)) == NULL)
        return pt_fail(NULL, GKV_ENOMEM, "out of memory");
    c.p = p;
    p->pt_id = part;
    if ((rc = gkv_pbook_open(&p->pt_book, json_path)) != GKV_OK) {
        pt_fail(NULL, rc, "%s", gkv_pbook_errmsg(NULL));
        goto out;
    }
    if (part < 0 || part >= gkv_pbook_num_parts(p->pt_book)) {
        rc = pt_fail(NULL, GKV_EINVAL, "%s: no partition %d (there are %d)",
                     json_path, part, gkv_pbook_num_parts(p->pt_book));
        goto out;
    }
    rc = gkv_store_open(&p->pt_store, gkv_pbook_part_path(p->pt_book, part),
                        ((flags & GKV_PART_WRITABLE) ? 0 : GKV_RDONLY) |
                        (flags & (GKV_NOSYNC | GKV_GUARD)), NULL);
    if (rc != GKV_OK) {
        pt_fail(NULL, rc, "partition %d: store '%s': %s", part,
                gkv_pbook_part_path(p->pt_book, part),
                gkv_store_errmsg(NULL));
        goto out;
    }
    p->pt_net = gkv_pbook_num_etypes(p->pt_book);
    if ((p->pt_csc = gkv__calloc((size_t)p->pt_net + 1,
                                 sizeof *p->pt_csc)) == NULL ||
        (gkv_pbook_has_csr(p->pt_book) &&
         (p->pt_csr = gkv__calloc((size_t)p->pt_net + 1,
                                  sizeof *p->pt_csr)) == NULL)) {
        rc = pt_fail(NULL, GKV_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = gkv_txn_begin(p->pt_store, &c.tx)) != GKV_OK) {
        pt_fail(NULL, rc, "partition %d: %s", part,
                gkv_store_errmsg(p->pt_store));
        goto out;
    }
    for (int et = 0; et < p->pt_net; et++) {
        gkv_etype_info ei;

        gkv_pbook_etype_info(p->pt_book, et, &ei);
        if ((rc = load_csc(&c, et, &ei)) != GKV_OK ||
            (p->pt_csr != NULL && (rc = load_csr(&c, et, &ei)) != GKV_OK))
            goto out;
    }
    *out = p;
    p = NULL;
    rc = GKV_OK;
out:
    gkv_txn_end(c.tx);
    gkv_part_close(p);
    return rc;
}

/* ---- accessors ---------------------------------------------------------- */

const gkv_pbook *gkv_part_book(const gkv_part *p) { return p->pt_book; }
gkv_store       *gkv_part_store(const gkv_part *p) { return p->pt_store; }
int              gkv_part_id(const gkv_part *p) { return p->pt_id; }

int64_t
gkv_part_num_nodes(const gkv_part *p, int ntype)
{
    int64_t lo, hi;

    if (gkv_pbook_node_range(p->pt_book, ntype, p->pt_id, &lo, &hi) != 0)
        return -1;
    return hi - lo;
}

int64_t
gkv_part_num_edges(const gkv_part *p, int etype)
{
    int64_t lo, hi;

    if (gkv_pbook_edge_range(p->pt_book, etype, p->pt_id, &lo, &hi) != 0)
        return -1;
    return hi - lo;
}

static void
to_adj(const struct part_adj *a, gkv_adj *out)
{
    out->col_lo = a->col_lo;
    out->col_hi = a->col_hi;
    out->indptr = a->indptr;
    out->indices = a->indices;
    out->eids = a->eids;
    out->eid_lo = a->eids == NULL ? a->eid_lo : 0;
    out->w = a->w;
}

/* The adjacency of 'etype' in one direction (csr 0/1), or NULL with the
 * message set. */
static const struct part_adj *
get_adj(const gkv_part *p, int etype, int csr, const char *fn)
{
    pt_clear(p);
    if (etype < 0 || etype >= p->pt_net) {
        pt_fail(p, GKV_EINVAL, "%s: no edge type %d (there are %d)", fn,
                etype, p->pt_net);
        return NULL;
    }
    if (csr && p->pt_csr == NULL) {
        pt_fail(p, GKV_ENOTSUP, "%s: partition %d stores no CSR (the "
                "config has \"csr\": false); out-edges need it", fn,
                p->pt_id);
        return NULL;
    }
    return csr ? &p->pt_csr[etype] : &p->pt_csc[etype];
}

gkv_err
gkv_part_csc(const gkv_part *p, int etype, gkv_adj *out)
{
    const struct part_adj *a = get_adj(p, etype, 0, "gkv_part_csc");

    if (a == NULL)
        return etype < 0 || etype >= p->pt_net ? GKV_EINVAL : GKV_ENOTSUP;
    to_adj(a, out);
    return GKV_OK;
}

gkv_err
gkv_part_csr(const gkv_part *p, int etype, gkv_adj *out)
{
    const struct part_adj *a = get_adj(p, etype, 1, "gkv_part_csr");

    if (a == NULL)
        return etype < 0 || etype >= p->pt_net ? GKV_EINVAL : GKV_ENOTSUP;
    to_adj(a, out);
    return GKV_OK;
}

/* ---- queries ------------------------------------------------------------ */

/* ERANGE for 'id' (arr[i]) of node type 'nt' (edge type when 'edge'),
 * which is outside [lo, hi): not of the type, or owned elsewhere. */
static gkv_err
not_owned(const gkv_part *p, int edge, int t, const char *arr, size_t i,
          int64_t id)
{
    const gkv_pbook *b = p->pt_book;
    const char *kind = edge ? "edge" : "node";
    const char *tname = edge ? gkv_pbook_etype_name(b, t)
                             : gkv_pbook_ntype_name(b, t);
    int64_t count = edge ? gkv_pbook_num_edges(b, t)
                         : gkv_pbook_num_nodes(b, t);
    int32_t q = -1;

    if (id < 0 || id >= count)
        return pt_fail(p, GKV_ERANGE, "%s[%zu] = %lld is not a '%s' %s ID: "
                       "there are %lld", arr, i, (long long)id, tname, kind,
                       (long long)count);
    if (edge)
        gkv_pbook_edge_owner(b, t, &id, 1, &q);
    else
        gkv_pbook_node_owner(b, t, &id, 1, &q);
    return pt_fail(p, GKV_ERANGE, "%s[%zu] = %lld: '%s' %s owned by "
                   "partition %d, not %d", arr, i, (long long)id, tname, kind,
                   (int)q, p->pt_id);
}

static gkv_err
degrees(const gkv_part *p, int etype, int csr, const int64_t *nodes,
        size_t n, int64_t *deg, const char *fn)
{
    const struct part_adj *a = get_adj(p, etype, csr, fn);
    gkv_etype_info ei;

    if (a == NULL)
        return etype < 0 || etype >= p->pt_net ? GKV_EINVAL : GKV_ENOTSUP;
    if (n > 0 && (nodes == NULL || deg == NULL))
        return pt_fail(p, GKV_EINVAL, "%s: NULL array", fn);
    gkv_pbook_etype_info(p->pt_book, etype, &ei);
    for (size_t i = 0; i < n; i++) {
        int64_t v = nodes[i];
        if (v < a->col_lo || v >= a->col_hi)
            return not_owned(p, 0, csr ? ei.src_ntype : ei.dst_ntype,
                             "nodes", i, v);
        deg[i] = a->indptr[v - a->col_lo + 1] - a->indptr[v - a->col_lo];
    }
    return GKV_OK;
}

gkv_err
gkv_part_in_degrees(const gkv_part *p, int etype, const int64_t *nodes,
                    size_t n, int64_t *deg)
{
    return degrees(p, etype, 0, nodes, n, deg, "gkv_part_in_degrees");
}

gkv_err
gkv_part_out_degrees(const gkv_part *p, int etype, const int64_t *nodes,
                     size_t n, int64_t *deg)
{
    return degrees(p, etype, 1, nodes, n, deg, "gkv_part_out_degrees");
}

gkv_err
gkv_part_find_edges(const gkv_part *p, int etype, const int64_t *eids,
                    size_t n, int64_t *src, int64_t *dst)
{
    const struct part_adj *a = get_adj(p, etype, 0, "gkv_part_find_edges");
    int64_t ncols;

    if (a == NULL)
        return GKV_EINVAL;
    if (n > 0 && (eids == NULL || src == NULL || dst == NULL))
        return pt_fail(p, GKV_EINVAL, "gkv_part_find_edges: NULL array");
    ncols = a->col_hi - a->col_lo;
    for (size_t i = 0; i < n; i++) {
        int64_t e = eids[i], k, lo = 0, hi = ncols - 1;

        /* e - eid_lo only once e >= eid_lo (>= 0): no overflow */
        if (e < a->eid_lo || e - a->eid_lo >= a->nedges)
            return not_owned(p, 1, etype, "eids", i, e);
        k = e - a->eid_lo;
        /* the column holding position k: the last c with indptr[c] <= k
         * (indptr[0] = 0 <= k < indptr[ncols], so 0 <= c < ncols) */
        while (lo < hi) {
            int64_t mid = lo + (hi - lo + 1) / 2;
            if (a->indptr[mid] <= k)
                lo = mid;
            else
                hi = mid - 1;
        }
        src[i] = a->indices[k];
        dst[i] = a->col_lo + lo;
    }
    return GKV_OK;
}

gkv_err
gkv_part_in_subgraph(const gkv_part *p, int etype, const int64_t *nodes,
                     size_t n, int64_t **src, int64_t **dst, int64_t **eid,
                     size_t *m)
{
    const struct part_adj *a = get_adj(p, etype, 0, "gkv_part_in_subgraph");
    int64_t *s = NULL, *d = NULL, *e = NULL;
    gkv_etype_info ei;
    size_t total = 0, j = 0;

    if (src != NULL)
        *src = NULL;
    if (dst != NULL)
        *dst = NULL;
    if (eid != NULL)
        *eid = NULL;
    if (a == NULL)
        return GKV_EINVAL;
    if (src == NULL || dst == NULL || eid == NULL || m == NULL ||
        (n > 0 && nodes == NULL))
        return pt_fail(p, GKV_EINVAL, "gkv_part_in_subgraph: NULL argument");
    gkv_pbook_etype_info(p->pt_book, etype, &ei);
    for (size_t i = 0; i < n; i++) {
        int64_t v = nodes[i];
        if (v < a->col_lo || v >= a->col_hi)
            return not_owned(p, 0, ei.dst_ntype, "nodes", i, v);
        total += (size_t)(a->indptr[v - a->col_lo + 1] -
                          a->indptr[v - a->col_lo]);
    }
    if (total > 0 &&
        ((s = gkv__malloc(total * sizeof *s)) == NULL ||
         (d = gkv__malloc(total * sizeof *d)) == NULL ||
         (e = gkv__malloc(total * sizeof *e)) == NULL)) {
        gkv__free(s);
        gkv__free(d);
        return pt_fail(p, GKV_ENOMEM, "gkv_part_in_subgraph: out of memory "
                       "for %zu edges", total);
    }
    for (size_t i = 0; i < n; i++) {
        int64_t v = nodes[i], c = v - a->col_lo;
        for (int64_t k = a->indptr[c]; k < a->indptr[c + 1]; k++, j++) {
            s[j] = a->indices[k];
            d[j] = v;
            e[j] = a->eid_lo + k;
        }
    }
    *src = s;
    *dst = d;
    *eid = e;
    *m = total;
    return GKV_OK;
}
