/* part_store.c - the partitioner's step 4 (see part_write.c): one
 * partition's store, its CSC (and CSR) scattered from the edge numbering,
 * and its features gathered at the new IDs, written in slices. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "graph/part_write.h"

/* ---- one partition's edges, from the numbering ------------------------- */

struct scan_job {
    const struct pw *w;
    int et;
    int64_t lo, hi;               /* edge slice */
    int64_t elo, m;               /* partition's new edge IDs [elo, elo + m) */
    int64_t *indices, *oeid;      /* m each (oeid may be NULL) */
    float *wt;                    /* m or NULL */
    int64_t slo, shi;             /* the partition's new source IDs */
    int64_t inner;                /* out: edges whose source it owns too */
};

/* Scatters the edges of one partition to their CSC positions. */
static void
scan_part(void *p)
{
    struct scan_job *j = p;
    const struct pw *w = j->w;
    const gkv_etype_info *ei = &w->einfo[j->et];
    const int64_t *emap = w->emap[j->et];
    const int64_t *sid = w->newid[ei->src_ntype];
    int64_t inner = 0;
    gkv_coo c;

    gkv_graph_edges(w->g, j->et, &c);
    for (int64_t i = j->lo; i < j->hi; i++) {
        uint64_t k = (uint64_t)(emap[i] - j->elo);
        int64_t ns;
        if (k >= (uint64_t)j->m)
            continue;
        j->indices[k] = ns = nid(sid, c.src[i]);
        inner += ns >= j->slo && ns < j->shi;
        if (j->wt != NULL)
            j->wt[k] = c.w[i];
        if (j->oeid != NULL)
            j->oeid[k] = i;
    }
    j->inner = inner;
}

/* ---- writing tensors ---------------------------------------------------- */

/* Creates tensor 'name' (zeros: nothing is written yet) for rows [lo, hi).
 * *slice_rows gets the rows of one write: about SLICE_BYTES, a whole number
 * of chunks, so no write rewrites a chunk another one wrote. */
static gkv_err
tensor_begin(struct pw *w, gkv_store *s, int p, const char *name,
             gkv_dtype dt, unsigned ndim, const uint64_t *shape, uint64_t lo,
             uint64_t hi, uint64_t *slice_rows)
{
    gkv_tensor_spec ts;
    gkv_tensor_desc d;
    gkv_err rc;
    uint64_t per;

    memset(&ts, 0, sizeof ts);
    ts.dtype = dt;
    ts.ndim = ndim;
    for (unsigned k = 0; k < ndim; k++)
        ts.shape[k] = shape[k];
    ts.lo = lo;
    ts.hi = hi;
    ts.init = GKV_INIT_ZEROS;
    if ((rc = gkv_tensor_create(s, name, &ts)) != GKV_OK ||
        (rc = gkv_tensor_info(s, NULL, name, &d)) != GKV_OK)
        return pw__fail(w, rc, "partition %d: creating tensor '%s': %s", p,
                        name, gkv_store_errmsg(s));
    per = SLICE_BYTES / d.row_bytes;
    if (per >= d.chunk_rows)
        per -= per % d.chunk_rows;
    *slice_rows = per > 0 ? per : 1;
    return GKV_OK;
}

static gkv_err
tensor_slice(struct pw *w, gkv_store *s, int p, const char *name, uint64_t a,
             uint64_t b, const void *rows, size_t row_bytes)
{
    size_t len = (size_t)(b - a) * row_bytes;
    gkv_err rc;

    if ((rc = gkv_tensor_write(s, name, a, b, rows, len)) != GKV_OK)
        return pw__fail(w, rc, "partition %d: writing tensor '%s' rows "
                        "[%llu, %llu): %s", p, name, (unsigned long long)a,
                        (unsigned long long)b, gkv_store_errmsg(s));
    return pw__wrote(w, len);
}

/* Writes rows [lo, hi) from one contiguous array. */
static gkv_err
put_tensor(struct pw *w, gkv_store *s, int p, const char *name, gkv_dtype dt,
           unsigned ndim, const uint64_t *shape, uint64_t lo, uint64_t hi,
           const void *rows)
{
    size_t rb = gkv_dtype_size(dt);
    uint64_t per;
    gkv_err rc;

    if (hi <= lo)
        return GKV_OK;
    for (unsigned k = 0; k < ndim; k++)
        rb *= (size_t)shape[k];
    if ((rc = tensor_begin(w, s, p, name, dt, ndim, shape, lo, hi, &per)) != GKV_OK)
        return rc;
    for (uint64_t a = lo; a < hi; a += per) {
        uint64_t b = hi - a < per ? hi : a + per;
        if ((rc = tensor_slice(w, s, p, name, a, b,
                               (const unsigned char *)rows + (a - lo) * rb,
                               rb)) != GKV_OK)
            return rc;
    }
    return GKV_OK;
}

/* Writes the rows of feature f for new IDs [lo, lo + n): row k is the
 * feature's row src_of(k) (ids[k], or first + k when ids is NULL). */
static gkv_err
put_feat(struct pw *w, gkv_store *s, int p, const struct pw_feat *f,
         uint64_t lo, uint64_t n, const int64_t *ids, int64_t first)
{
    unsigned char *buf = NULL;
    uint64_t per;
    gkv_err rc;

    if (n == 0)
        return GKV_OK;
    if (ids == NULL)
        return put_tensor(w, s, p, f->tname, f->dtype, f->ndim, f->shape, lo,
                          lo + n, f->rows + (size_t)first * f->row_bytes);
    if ((rc = tensor_begin(w, s, p, f->tname, f->dtype, f->ndim, f->shape, lo,
                           lo + n, &per)) != GKV_OK)
        return rc;
    if (per > n)
        per = n;
    if ((buf = gkv__malloc((size_t)per * f->row_bytes)) == NULL)
        return pw__fail(w, GKV_ENOMEM, "out of memory gathering '%s'",
                        f->tname);
    for (uint64_t a = 0; a < n && rc == GKV_OK; a += per) {
        uint64_t b = n - a < per ? n : a + per;
        for (uint64_t k = a; k < b; k++)
            memcpy(buf + (k - a) * f->row_bytes,
                   f->rows + (size_t)ids[k] * f->row_bytes, f->row_bytes);
        rc = tensor_slice(w, s, p, f->tname, lo + a, lo + b, buf, f->row_bytes);
    }
    gkv__free(buf);
    return rc;
}

/* The CSC (and edge features) of edge type et in partition p. */
static gkv_err
write_csc(struct pw *w, gkv_store *s, int p, int et)
{
    const gkv_etype_info *ei = &w->einfo[et];
    int d = ei->dst_ntype, need_oeid = 0;
    int64_t a = nlo(w, d, p), b = nlo(w, d, p + 1);
    const int64_t *ptr = w->eptr[et];          /* ptr[v] = start of v */
    int64_t elo = ptr[a], m = ptr[b] - elo;
    int64_t *indptr = NULL, *indices = NULL, *oeid = NULL;
    float *wt = NULL;
    struct scan_job jobs[64];
    char name[GKV_NAME_MAX + 1];
    int T = w->nthreads;
    gkv_coo c;
    gkv_err rc = GKV_OK;

    if (b <= a)
        return GKV_OK;                          /* owns no node of type d */
    gkv_graph_edges(w->g, et, &c);
    for (size_t f = 0; f < w->nfeats; f++)
        need_oeid |= w->feats[f].f->is_edge && w->feats[f].type == et;
    if ((indptr = gkv__malloc((size_t)(b - a + 1) * sizeof *indptr)) == NULL ||
        (indices = pw__scratch(&w->s_idx, &w->s_idx_cap, (size_t)m,
                               sizeof *indices)) == NULL ||
        (ei->weighted && (wt = pw__scratch(&w->s_w, &w->s_w_cap, (size_t)m,
                                           sizeof *wt)) == NULL) ||
        (need_oeid && (oeid = pw__scratch(&w->s_oeid, &w->s_oeid_cap,
                                          (size_t)m, sizeof *oeid)) == NULL)) {
        rc = pw__fail(w, GKV_ENOMEM, "partition %d: out of memory for the CSC "
                      "of '%s' (%lld edges)", p, ei->canonical, (long long)m);
        goto out;
    }
    for (int64_t v = a; v <= b; v++)
        indptr[v - a] = ptr[v] - elo;
    if (m > 0) {
        if (c.n < (int64_t)T * 65536)
            T = 1;
        for (int i = 0; i < T; i++) {
            jobs[i].w = w;
            jobs[i].et = et;
            jobs[i].lo = slice_lo(c.n, i, T);
            jobs[i].hi = slice_lo(c.n, i + 1, T);
            jobs[i].elo = elo;
            jobs[i].m = m;
            jobs[i].indices = indices;
            jobs[i].oeid = oeid;
            jobs[i].wt = wt;
            jobs[i].slo = nlo(w, ei->src_ntype, p);
            jobs[i].shi = nlo(w, ei->src_ntype, p + 1);
        }
        graph__parallel(scan_part, jobs, sizeof jobs[0], T);
        w->edge_cut += m;
        for (int i = 0; i < T; i++)
            w->edge_cut -= jobs[i].inner;
    }
    snprintf(name, sizeof name, "csc/%s/indptr", ei->canonical);
    if ((rc = put_tensor(w, s, p, name, GKV_I64, 0, NULL, 0,
                         (uint64_t)(b - a + 1), indptr)) != GKV_OK)
        goto out;
    snprintf(name, sizeof name, "csc/%s/indices", ei->canonical);
    if ((rc = put_tensor(w, s, p, name, GKV_I64, 0, NULL, (uint64_t)elo,
                         (uint64_t)(elo + m), indices)) != GKV_OK)
        goto out;
    if (wt != NULL) {
        snprintf(name, sizeof name, "csc/%s/weight", ei->canonical);
        if ((rc = put_tensor(w, s, p, name, GKV_F32, 0, NULL, (uint64_t)elo,
                             (uint64_t)(elo + m), wt)) != GKV_OK)
            goto out;
    }
    for (size_t f = 0; f < w->nfeats && rc == GKV_OK; f++)
        if (w->feats[f].f->is_edge && w->feats[f].type == et)
            rc = put_feat(w, s, p, &w->feats[f], (uint64_t)elo, (uint64_t)m,
                          oeid, 0);
out:
    gkv__free(indptr);
    return rc;
}

struct csr_item {
    int64_t eid, dst;
    float w;
};

static int
csr_cmp(const void *x, const void *y)
{
    const struct csr_item *a = x, *b = y;

    return (a->eid > b->eid) - (a->eid < b->eid);
}

/* The CSR of the out-edges of the source nodes partition p owns. */
static gkv_err
write_csr(struct pw *w, gkv_store *s, int p, int et)
{
    const gkv_etype_info *ei = &w->einfo[et];
    int st = ei->src_ntype, dt = ei->dst_ntype;
    int64_t a = nlo(w, st, p), b = nlo(w, st, p + 1), n = b - a, m;
    const uint16_t *so = w->owner[st];
    const int64_t *sid = w->newid[st], *did = w->newid[dt], *emap = w->emap[et];
    int64_t *indptr = NULL, *cur = NULL, *idx = NULL, *eid = NULL;
    struct csr_item *it = NULL;
    float *wt = NULL;
    char name[GKV_NAME_MAX + 1];
    gkv_coo c;
    gkv_err rc = GKV_OK;

    if (n <= 0)
        return GKV_OK;
    gkv_graph_edges(w->g, et, &c);
    if ((indptr = gkv__calloc((size_t)n + 1, sizeof *indptr)) == NULL ||
        (cur = gkv__malloc((size_t)n * sizeof *cur)) == NULL)
        goto nomem;
    for (int64_t i = 0; i < c.n; i++)
        if (so[c.src[i]] == p)
            indptr[nid(sid, c.src[i]) - a + 1]++;
    for (int64_t v = 0; v < n; v++)
        indptr[v + 1] += indptr[v];
    m = indptr[n];
    memcpy(cur, indptr, (size_t)n * sizeof *cur);
    if ((it = gkv__malloc(m ? (size_t)m * sizeof *it : 1)) == NULL)
        goto nomem;
    for (int64_t i = 0; i < c.n; i++)
        if (so[c.src[i]] == p) {
            struct csr_item *x = &it[cur[nid(sid, c.src[i]) - a]++];
            x->eid = emap[i];
            x->dst = nid(did, c.dst[i]);
            x->w = c.w != NULL ? c.w[i] : 0.0f;
        }
    gkv__free(cur);
    cur = NULL;
    for (int64_t v = 0; v < n; v++) {
        int64_t lo = indptr[v], len = indptr[v + 1] - lo;
        int sorted = 1;
        for (int64_t k = 1; k < len && sorted; k++)
            sorted = it[lo + k - 1].eid < it[lo + k].eid;
        if (!sorted)
            qsort(it + lo, (size_t)len, sizeof *it, csr_cmp);
    }
    if ((idx = gkv__malloc(m ? (size_t)m * sizeof *idx : 1)) == NULL ||
        (eid = gkv__malloc(m ? (size_t)m * sizeof *eid : 1)) == NULL ||
        (ei->weighted && (wt = gkv__malloc(m ? (size_t)m * sizeof *wt : 1)) == NULL))
        goto nomem;
    for (int64_t k = 0; k < m; k++) {
        idx[k] = it[k].dst;
        eid[k] = it[k].eid;
        if (wt != NULL)
            wt[k] = it[k].w;
    }
    gkv__free(it);
    it = NULL;
    snprintf(name, sizeof name, "csr/%s/indptr", ei->canonical);
    if ((rc = put_tensor(w, s, p, name, GKV_I64, 0, NULL, 0, (uint64_t)n + 1,
                         indptr)) != GKV_OK)
        goto out;
    snprintf(name, sizeof name, "csr/%s/indices", ei->canonical);
    if ((rc = put_tensor(w, s, p, name, GKV_I64, 0, NULL, 0, (uint64_t)m,
                         idx)) != GKV_OK)
        goto out;
    snprintf(name, sizeof name, "csr/%s/eids", ei->canonical);
    if ((rc = put_tensor(w, s, p, name, GKV_I64, 0, NULL, 0, (uint64_t)m,
                         eid)) != GKV_OK)
        goto out;
    if (wt != NULL) {
        snprintf(name, sizeof name, "csr/%s/weight", ei->canonical);
        rc = put_tensor(w, s, p, name, GKV_F32, 0, NULL, 0, (uint64_t)m, wt);
    }
    goto out;
nomem:
    rc = pw__fail(w, GKV_ENOMEM, "partition %d: out of memory for the CSR of "
                  "'%s'", p, ei->canonical);
out:
    gkv__free(indptr);
    gkv__free(cur);
    gkv__free(it);
    gkv__free(idx);
    gkv__free(eid);
    gkv__free(wt);
    return rc;
}

/* Node features of partition p. */
static gkv_err
write_node_feats(struct pw *w, gkv_store *s, int p)
{
    gkv_err rc = GKV_OK;

    for (int t = 0; t < w->nnt && rc == GKV_OK; t++) {
        int64_t a = nlo(w, t, p), n = nlo(w, t, p + 1) - a, k = 0;
        int64_t *ids = NULL;
        int any = 0;

        for (size_t f = 0; f < w->nfeats; f++)
            any |= !w->feats[f].f->is_edge && w->feats[f].type == t;
        if (!any || n == 0)
            continue;
        if (w->newid[t] != NULL) {
            /* the original IDs of the nodes p owns, in new-ID order */
            if ((ids = gkv__malloc((size_t)n * sizeof *ids)) == NULL)
                return pw__fail(w, GKV_ENOMEM, "out of memory");
            for (int64_t v = 0; v < w->ncount[t]; v++)
                if (w->owner[t][v] == p)
                    ids[k++] = v;
        }
        for (size_t f = 0; f < w->nfeats && rc == GKV_OK; f++)
            if (!w->feats[f].f->is_edge && w->feats[f].type == t)
                rc = put_feat(w, s, p, &w->feats[f], (uint64_t)a, (uint64_t)n,
                              ids, a);
        gkv__free(ids);
    }
    return rc;
}

/* Bytes of partition p's tensors, for the map size and the progress. */
uint64_t
pw__part_bytes(const struct pw *w, int p)
{
    uint64_t by = 0;

    for (int et = 0; et < w->net; et++) {
        const gkv_etype_info *ei = &w->einfo[et];
        int d = ei->dst_ntype, s = ei->src_ntype;
        int64_t a = nlo(w, d, p), b = nlo(w, d, p + 1);
        uint64_t m = (uint64_t)(w->eptr[et][b] - w->eptr[et][a]);
        if (b > a)
            by += (uint64_t)(b - a + 1) * 8 + m * (8 + (ei->weighted ? 4 : 0));
        for (size_t f = 0; f < w->nfeats; f++)
            if (w->feats[f].f->is_edge && w->feats[f].type == et)
                by += m * w->feats[f].row_bytes;
        if (w->sp->flags & GKV_PART_CSR) {
            int64_t sa = nlo(w, s, p), sb = nlo(w, s, p + 1);
            uint64_t mo = (uint64_t)w->ocnt[(size_t)et * (size_t)w->P + (size_t)p];
            if (sb > sa)
                by += (uint64_t)(sb - sa + 1) * 8 +
                      mo * (16 + (ei->weighted ? 4 : 0));
        }
    }
    for (size_t f = 0; f < w->nfeats; f++)
        if (!w->feats[f].f->is_edge) {
            int t = w->feats[f].type;
            by += (uint64_t)(nlo(w, t, p + 1) - nlo(w, t, p)) *
                  w->feats[f].row_bytes;
        }
    return by;
}

gkv_err
pw__write_partition(struct pw *w, int p)
{
    gkv_open_opts o;
    gkv_store *s = NULL;
    char *path = NULL;
    gkv_err rc;

    if ((rc = pw__part_path(w, p, &path)) != GKV_OK)
        return rc;
    memset(&o, 0, sizeof o);
    /* room for everything at once: no map growth (which redoes a write) */
    o.map_size = pw__part_bytes(w, p) / 2 * 3 + (64u << 20);
    if ((rc = gkv_store_open(&s, path, GKV_CREATE | GKV_NOSYNC, &o)) != GKV_OK) {
        rc = pw__fail(w, rc, "partition %d: creating store '%s': %s", p, path,
                      gkv_store_errmsg(NULL));
        goto out;
    }
    for (int et = 0; et < w->net && rc == GKV_OK; et++)
        rc = write_csc(w, s, p, et);
    if (rc == GKV_OK)
        rc = write_node_feats(w, s, p);
    for (int et = 0; et < w->net && rc == GKV_OK &&
         (w->sp->flags & GKV_PART_CSR); et++)
        rc = write_csr(w, s, p, et);
out:
    gkv_store_close(s);
    gkv__free(path);
    return rc;
}
