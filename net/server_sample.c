/* server_sample.c - sampling: SAMPLE (one hop on the partition's
 * sgraph), EDGE_BATCH (reserved), and the edge-weight cache that SAMPLE
 * uses for weights named by edge features.
 *
 * Locks: the handlers run with no lock held (the core's rule) and only
 * when the server serves a partition (SRV_PART). Each worker samples with
 * its own sampler, s->graph.samp[r->worker]. The cache: pw.mu guards its
 * list and each entry's reference count; each entry's rwlock guards its
 * contents, held shared while a request samples with it and exclusive
 * while one refreshes it. Order: a request's snapshot is begun before
 * any entry is taken, and entries are taken in edge-type order.
 */
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include "server_int.h"
#include "graph_int.h"   /* graph__sample_hop */

/* ---- SAMPLE: the reply and its bound ------------------------------------ */

struct sample_arg {
    const net_sample_renc_et *e;
    int net;
};

static void
enc_sample(net_wr *w, const void *a)
{
    const struct sample_arg *sa = a;

    net__enc_sample_rep(w, (uint32_t)sa->net, sa->e);
}

/* The wire form of one edge type of a hop: per-seed counts (the edges
 * come grouped by centre node, in the seeds' order) and which columns
 * need 64 bits. -1 when the edges do not follow the seeds. */
static int
sample_pack(const gkv_sample_edges *x, int dir, const int64_t *seeds,
            size_t ns, const int64_t *c64, int wide, uint32_t *cnt,
            net_sample_renc_et *o)
{
    const int64_t *ctr = dir == GKV_DIR_IN ? x->dst : x->src;
    const int64_t *nbr = dir == GKV_DIR_IN ? x->src : x->dst;
    uint64_t big = 0;
    size_t e = 0;

    /* the sampler's counts, not runs of equal seeds: a seed sent twice in
     * a row has two runs that touch */
    for (size_t j = 0; j < ns; j++) {
        if (c64[j] < 0 || (uint64_t)c64[j] > UINT32_MAX ||
            (uint64_t)c64[j] > x->n - e)
            return -1;
        cnt[j] = (uint32_t)c64[j];
        for (size_t t = e; t < e + cnt[j]; t++)
            if (ctr[t] != seeds[j])
                return -1;
        e += cnt[j];
    }
    if (e != x->n)
        return -1;
    o->n = x->n;
    o->nc = ns;
    o->cnt = cnt;
    o->nbr = nbr;
    o->eid = x->eid;
    o->wide = wide ? NET_SAMPLE_WIDE_NBR | NET_SAMPLE_WIDE_EID : 0;
    for (size_t i = 0; i < x->n; i++)
        big |= (uint64_t)nbr[i];
    if (big > UINT32_MAX)
        o->wide |= NET_SAMPLE_WIDE_NBR;
    big = 0;
    for (size_t i = 0; i < x->n; i++)
        big |= (uint64_t)x->eid[i];
    if (big > UINT32_MAX)
        o->wide |= NET_SAMPLE_WIDE_EID;
    return 0;
}

/* An upper bound of the edges one hop returns, from the seeds' degrees
 * (*bound stops growing once past 'lim'). A seed may repeat and a fanout
 * with replacement may be far above the degree, so without it a small
 * request could make the sampler allocate without bound. Exact for an
 * unweighted hop without exclusions; weights and exclusions only lower
 * the count. */
static gkv_err
sample_bound(gkv_server *s, const net_sample_req *q, const int *fan,
             const int64_t *const *seeds, const size_t *ns, size_t lim,
             size_t *bound)
{
    int nnt = gkv_pbook_num_ntypes(s->graph.book);
    int net_ = gkv_pbook_num_etypes(s->graph.book);
    size_t nmax = 0, b = 0;
    int64_t *deg;
    gkv_err rc = GKV_OK;

    for (int t = 0; t < nnt; t++)
        nmax = ns[t] > nmax ? ns[t] : nmax;
    if ((deg = gkv__malloc(nmax * sizeof *deg + 8)) == NULL)
        return GKV_ENOMEM;
    for (int e = 0; e < net_ && b <= lim; e++) {
        int k = fan[q->nfan == 1 ? 0 : e], ct;
        gkv_etype_info ei;

        if (k == 0)
            continue;
        gkv_pbook_etype_info(s->graph.book, e, &ei);
        ct = q->dir == GKV_DIR_IN ? ei.dst_ntype : ei.src_ntype;
        rc = q->dir == GKV_DIR_IN ?
            gkv_part_in_degrees(s->graph.part, e, seeds[ct], ns[ct], deg) :
            gkv_part_out_degrees(s->graph.part, e, seeds[ct], ns[ct], deg);
        if (rc != GKV_OK)
            break;
        for (size_t i = 0; i < ns[ct] && b <= lim; i++) {
            size_t d = (size_t)deg[i];
            b += k < 0 ? d : (q->flags & GKV_SAMPLE_REPLACE) ?
                (d > 0 ? (size_t)k : 0) : (d < (size_t)k ? d : (size_t)k);
        }
    }
    gkv__free(deg);
    *bound = b;
    return rc;
}

/* ---- edge features as sampling weights (SAMPLE, NET_SAMPLE_F_FEAT) ----
 *
 * A request may name, per edge type, an edge feature whose values are the
 * weights (DGL's prob= / mask=): the tensor "edge/<canonical>/<feat>" of
 * the partition's store, rows [elo, ehi) the edges this partition owns. The
 * server keeps one entry per (edge type, feature) asked for: the owned
 * rows as floats (4 bytes an owned edge) and, per chunk of the tensor that
 * holds owned rows, its stamp (gkv_tensor_changed: a mark of the snapshot
 * it was read at). An entry is current for every snapshot up to the
 * mark's version. A request whose snapshot is newer (something was
 * committed since, anywhere in the store, by any process) reads the
 * tensor's record and asks kv which of those chunks changed (one lookup a
 * chunk, no rows), and converts again only those, or everything when the tensor
 * was replaced (its id differs) or its range, dtype or chunking did: a push
 * to the feature is seen by the next sample. Requests hold an entry's lock
 * shared while they sample; a refresh holds it exclusive. Entries are
 * taken in edge-type order and a request's snapshot is begun before any,
 * so no lock waits on a map resize that waits on it. A feature the server
 * keeps in write-back mode (--writeback) is read from its RAM copy on every
 * request, uncached (the store lags its pushes). */
struct pw {
    struct pw *pw_next;              /* pw.list list (under pw.mu) */
    unsigned pw_refs;                /* requests using it (under pw.mu) */
    int pw_etype;
    char pw_name[GKV_NAME_MAX + 1];  /* "edge/<canonical>/<feat>" */
    int pw_private;                  /* write-back: this request's only */
    pthread_rwlock_t pw_lock;        /* guards what follows */
    int pw_ok;                       /* filled and consistent */
    gkv_tensor_desc pw_d;            /* the tensor it was read from */
    int64_t pw_lo, pw_n;             /* owned edges [lo, lo + n) */
    float *pw_w;                     /* [n] the weights */
    uint64_t pw_c0, pw_nc;           /* chunks c0 .. c0 + nc hold them */
    uint64_t *pw_mark;               /* [1 + nc] gkv_tensor_changed's mark:
                                      * current up to version pw_mark[0] */
    uint8_t *pw_chg;                 /* [nc] a refresh's: chunk changed */
    int64_t *pw_bad;                 /* [nc] first edge in the chunk whose
                                      * weight is negative, NaN or
                                      * infinite; -1 if none */
    int64_t pw_first_bad;            /* the least of them, or -1 */
};

static void
pw_drop(struct pw *p)
{
    gkv__free(p->pw_w);
    gkv__free(p->pw_mark);
    gkv__free(p->pw_chg);
    gkv__free(p->pw_bad);
    p->pw_w = NULL;
    p->pw_mark = NULL;
    p->pw_chg = NULL;
    p->pw_bad = NULL;
    p->pw_ok = 0;
}

static void
pw_free(struct pw *p)
{
    if (p == NULL)
        return;
    pw_drop(p);
    pthread_rwlock_destroy(&p->pw_lock);
    gkv__free(p);
}

static struct pw *
pw_new(int etype, const char *name)
{
    struct pw *p = gkv__calloc(1, sizeof *p);

    if (p == NULL)
        return NULL;
    if (pthread_rwlock_init(&p->pw_lock, NULL) != 0) {
        gkv__free(p);
        return NULL;
    }
    p->pw_etype = etype;
    snprintf(p->pw_name, sizeof p->pw_name, "%s", name);
    return p;
}

/* *d, the feature's tensor in tx (NULL: now), checked as weights of the
 * owned edges [lo, hi): one element a row, every owned edge a row, a
 * dtype and chunking kv knows. GKV_OK, or r failed. */
static gkv_err
pw_desc(gkv_server *s, srv_req *r, const struct pw *p, gkv_txn *tx,
        int64_t lo, int64_t hi, gkv_tensor_desc *d)
{
    int part = gkv_part_id(s->graph.part);
    gkv_err rc;

    rc = gkv_tensor_info(s->store, tx, p->pw_name, d);
    if (rc == GKV_ENOTFOUND)
        return srv__fail(r, rc, "sample: edge feature of edge type '%s': no "
                         "tensor '%s' in partition %d's store (server %s)",
                         gkv_pbook_etype_name(s->graph.book, p->pw_etype),
                         p->pw_name, part, s->log.tag);
    if (rc != GKV_OK)
        return srv__fail(r, rc, "sample: edge feature '%s' on partition %d: "
                         "%s", p->pw_name, part, gkv_store_errmsg(s->store));
    if (d->row_elems != 1)
        return srv__fail(r, GKV_EINVAL, "sample: edge feature '%s' on "
                         "partition %d has rows of %llu elements; a sampling "
                         "weight needs one per edge (row shape () or (1))",
                         p->pw_name, part, (unsigned long long)d->row_elems);
    if (d->lo > (uint64_t)lo || d->hi < (uint64_t)hi)
        return srv__fail(r, GKV_EINVAL, "sample: edge feature '%s' on "
                         "partition %d holds edges [%llu, %llu), and the "
                         "partition owns [%lld, %lld) of its edge type",
                         p->pw_name, part, (unsigned long long)d->lo,
                         (unsigned long long)d->hi, (long long)lo,
                         (long long)hi);
    if (gkv_dtype_size(d->dtype) == 0 || d->chunk_rows == 0)
        return srv__fail(r, GKV_ECORRUPT, "sample: edge feature '%s' on "
                         "partition %d: dtype %d, %u rows a chunk", p->pw_name,
                         part, (int)d->dtype, d->chunk_rows);
    return GKV_OK;
}

/* Empties p and sizes it for the owned edges [lo, hi) of tensor d, its
 * mark zero (every chunk then counts as changed). GKV_OK, or r failed. */
static gkv_err
pw_alloc(srv_req *r, struct pw *p, const gkv_tensor_desc *d, int64_t lo,
         int64_t hi)
{
    size_t n = (size_t)(hi - lo);
    uint64_t c1;

    pw_drop(p);
    p->pw_lo = lo;
    p->pw_n = hi - lo;
    p->pw_c0 = ((uint64_t)lo - d->lo) / d->chunk_rows;
    c1 = ((uint64_t)hi - 1 - d->lo) / d->chunk_rows + 1;
    p->pw_nc = c1 - p->pw_c0;
    if ((p->pw_w = gkv__malloc(n * sizeof *p->pw_w)) == NULL ||
        (p->pw_mark = gkv__calloc(p->pw_nc + 1, sizeof *p->pw_mark)) == NULL ||
        (p->pw_chg = gkv__calloc(p->pw_nc, 1)) == NULL ||
        (p->pw_bad = gkv__calloc(p->pw_nc, sizeof *p->pw_bad)) == NULL)
        return srv__fail(r, GKV_ENOMEM, "sample: out of memory for the %zu "
                         "weights of edge feature '%s'", n, p->pw_name);
    return GKV_OK;
}

/* Converts chunk i of p's (its owned rows) into weights, read through tx
 * (NULL: the RAM copy); 'tmp' holds a chunk's rows when the dtype is not
 * f32 (NULL: read in place). GKV_OK, or r failed. */
static gkv_err
pw_convert(gkv_server *s, srv_req *r, struct pw *p, gkv_txn *tx,
           const gkv_tensor_desc *d, uint64_t i, unsigned char *tmp)
{
    uint64_t c = p->pw_c0 + i;
    uint64_t a = d->lo + c * d->chunk_rows, b = a + d->chunk_rows;
    uint64_t lo = (uint64_t)p->pw_lo, hi = lo + (uint64_t)p->pw_n;
    float *dst;
    int64_t bad;
    gkv_err rc;

    a = a > lo ? a : lo;
    b = b > d->hi ? d->hi : b;
    b = b < hi ? b : hi;
    dst = p->pw_w + (a - lo);
    rc = gkv_tensor_read(s->store, tx, p->pw_name, a, b,
                         tmp != NULL ? (void *)tmp : (void *)dst,
                         (size_t)(b - a) * d->row_bytes);
    if (rc != GKV_OK)
        return srv__fail(r, rc, "sample: edge feature '%s' on partition %d: "
                         "rows [%llu, %llu): %s", p->pw_name,
                         gkv_part_id(s->graph.part), (unsigned long long)a,
                         (unsigned long long)b, gkv_store_errmsg(s->store));
    bad = net__w_convert(tmp != NULL ? (const void *)tmp : (const void *)dst,
                         d->dtype, (size_t)(b - a), dst);
    p->pw_bad[i] = bad < 0 ? -1 : (int64_t)a + bad;
    return GKV_OK;
}

/* Brings p up to the snapshot tx for the owned edges [lo, hi), reading
 * through tx (NULL: the write-back RAM copy, every chunk). Caller holds
 * p's lock exclusive. On error p is emptied and the request's message
 * set. */
static gkv_err
pw_refresh(gkv_server *s, srv_req *r, struct pw *p, gkv_txn *tx,
           int64_t lo, int64_t hi)
{
    gkv_tensor_desc d;
    unsigned char *tmp = NULL;
    gkv_err rc;

    if (pw_desc(s, r, p, tx, lo, hi, &d) != GKV_OK)
        goto fail;
    /* all of it again when the tensor was replaced (its id differs) or
     * its range, dtype or chunking did, or the owned edges */
    if ((tx == NULL || !p->pw_ok || d.id != p->pw_d.id ||
         d.dtype != p->pw_d.dtype || d.lo != p->pw_d.lo ||
         d.hi != p->pw_d.hi || d.chunk_rows != p->pw_d.chunk_rows ||
         lo != p->pw_lo || hi - lo != p->pw_n) &&
        pw_alloc(r, p, &d, lo, hi) != GKV_OK)
        goto fail;
    p->pw_ok = 0;
    if (d.dtype != GKV_F32 &&
        (tmp = gkv__malloc((size_t)d.chunk_rows * d.row_bytes)) == NULL) {
        srv__fail(r, GKV_ENOMEM, "sample: out of memory");
        goto fail;
    }
    /* which chunks to convert: those kv says changed (all of them after
     * pw_alloc, whose mark is zero), or every one from RAM */
    if (tx == NULL)
        memset(p->pw_chg, 1, (size_t)p->pw_nc);
    else if ((rc = gkv_tensor_changed(tx, p->pw_name, p->pw_c0,
                                      (size_t)p->pw_nc, p->pw_mark,
                                      p->pw_chg, NULL)) != GKV_OK) {
        srv__fail(r, rc, "sample: edge feature '%s' on partition %d: %s",
                  p->pw_name, gkv_part_id(s->graph.part),
                  gkv_store_errmsg(s->store));
        goto fail;
    }
    p->pw_first_bad = -1;
    for (uint64_t i = 0; i < p->pw_nc; i++) {
        if (p->pw_chg[i] && pw_convert(s, r, p, tx, &d, i, tmp) != GKV_OK)
            goto fail;
        if (p->pw_bad[i] >= 0 && p->pw_first_bad < 0)
            p->pw_first_bad = p->pw_bad[i];
    }
    gkv__free(tmp);
    p->pw_d = d;
    p->pw_ok = 1;
    return GKV_OK;
fail:
    gkv__free(tmp);
    pw_drop(p);
    return r->status;
}

/* The entry of (etype, name), made if missing, with a reference the
 * caller gives back with pw_unref(); NULL with *rc GKV_ENOTFOUND when it
 * is missing and snapshot tx has no such tensor (only features that exist
 * get entries), or GKV_ENOMEM. Making one also frees the unused entries
 * whose tensor is gone from tx (deleted since): a server that serves job
 * after job keeps the weights of the features that exist, not of every
 * name ever sampled by. */
static struct pw *
pw_find(gkv_server *s, gkv_txn *tx, int etype, const char *name, gkv_err *rc)
{
    struct pw *p, **pp;
    gkv_tensor_desc d;

    *rc = GKV_ENOMEM;
    pthread_mutex_lock(&s->pw.mu);
    for (p = s->pw.list; p != NULL; p = p->pw_next)
        if (p->pw_etype == etype && strcmp(p->pw_name, name) == 0)
            break;
    if (p == NULL &&
        gkv_tensor_info(s->store, tx, name, &d) == GKV_ENOTFOUND) {
        pthread_mutex_unlock(&s->pw.mu);
        *rc = GKV_ENOTFOUND;
        return NULL;
    }
    if (p == NULL) {
        for (pp = &s->pw.list; *pp != NULL;) {
            struct pw *q = *pp;
            if (q->pw_refs == 0 &&
                gkv_tensor_info(s->store, tx, q->pw_name, &d) ==
                GKV_ENOTFOUND) {
                *pp = q->pw_next;
                pw_free(q);
            } else {
                pp = &q->pw_next;
            }
        }
        if ((p = pw_new(etype, name)) != NULL) {
            p->pw_next = s->pw.list;
            s->pw.list = p;
        }
    }
    if (p != NULL) {
        p->pw_refs++;
        *rc = GKV_OK;
    }
    pthread_mutex_unlock(&s->pw.mu);
    return p;
}

static void
pw_unref(gkv_server *s, struct pw *p)
{
    pthread_mutex_lock(&s->pw.mu);
    p->pw_refs--;
    pthread_mutex_unlock(&s->pw.mu);
}

/* Lets go of the entries pw_take() gave (held[e] NULL after). */
static void
pw_release(gkv_server *s, struct pw **held, int net_)
{
    for (int e = 0; held != NULL && e < net_; e++) {
        if (held[e] == NULL)
            continue;
        if (held[e]->pw_private) {
            pw_free(held[e]);
        } else {
            pthread_rwlock_unlock(&held[e]->pw_lock);
            pw_unref(s, held[e]);
        }
        held[e] = NULL;
    }
}

/* The tensor that holds edge type e's feature q->feat[e] ("edge/<canonical>
 * /<feat>", in name[GKV_NAME_MAX + 2]) and the edges this partition owns
 * of that type, [*lo, *hi). GKV_OK, or r failed. */
static gkv_err
pw_where(gkv_server *s, srv_req *r, const net_sample_req *q, int e,
         char *name, int64_t *lo, int64_t *hi)
{
    const char *canon = gkv_pbook_etype_name(s->graph.book, e);
    gkv_err rc;

    if ((size_t)snprintf(name, GKV_NAME_MAX + 2, "edge/%s/%s", canon,
                         q->feat[e]) > GKV_NAME_MAX)
        return srv__fail(r, GKV_EINVAL, "sample: edge feature '%s' of edge "
                         "type '%s': 'edge/%s/%s' is longer than a tensor "
                         "name may be (%d bytes)", q->feat[e], canon, canon,
                         q->feat[e], GKV_NAME_MAX);
    if ((rc = gkv_pbook_edge_range(s->graph.book, e,
                                   gkv_part_id(s->graph.part), lo, hi))
        != GKV_OK)
        return srv__fail(r, rc, "sample: edge type %d: %s", e,
                         gkv_pbook_errmsg(s->graph.book));
    return GKV_OK;
}

/* The cache's entry for (e, name), current as of snapshot tx (version
 * txv), with its lock held shared: refreshed first, under the lock held
 * exclusive, when a commit came since. GKV_OK with *out, or r failed. */
static gkv_err
pw_shared(gkv_server *s, srv_req *r, gkv_txn *tx, uint64_t txv, int e,
          const char *name, int64_t lo, int64_t hi, struct pw **out)
{
    struct pw *p;
    gkv_err rc;

    if ((p = pw_find(s, tx, e, name, &rc)) == NULL) {
        if (rc == GKV_ENOTFOUND)
            return srv__fail(r, rc, "sample: edge feature of edge type '%s': "
                             "no tensor '%s' in partition %d's store (server "
                             "%s)", gkv_pbook_etype_name(s->graph.book, e),
                             name, gkv_part_id(s->graph.part), s->log.tag);
        return srv__fail(r, rc, "sample: out of memory");
    }
    for (;;) {
        pthread_rwlock_rdlock(&p->pw_lock);
        if (p->pw_ok && p->pw_mark[0] >= txv)
            break;
        pthread_rwlock_unlock(&p->pw_lock);
        pthread_rwlock_wrlock(&p->pw_lock);
        rc = GKV_OK;
        if (!(p->pw_ok && p->pw_mark[0] >= txv))
            rc = pw_refresh(s, r, p, tx, lo, hi);
        pthread_rwlock_unlock(&p->pw_lock);
        if (rc != GKV_OK) {
            pw_unref(s, p);
            return rc;
        }
    }
    *out = p;
    return GKV_OK;
}

/* For every edge type the request samples with a feature: its weights in
 * ew[e] (ewlen[e] of them, from edge ewlo[e]) and its entry in held[e],
 * its lock held shared until pw_release(). Edge types whose partition
 * range is empty need no tensor (they have nothing to sample). */
static gkv_err
pw_take(gkv_server *s, srv_req *r, const net_sample_req *q,
        const int *fan, struct pw **held, const float **ew, int64_t *ewlen,
        int64_t *ewlo)
{
    int net_ = gkv_pbook_num_etypes(s->graph.book);
    int part = gkv_part_id(s->graph.part);
    gkv_txn *tx = NULL;
    uint64_t txv = 0;
    gkv_err rc = GKV_OK;

    /* two passes: write-back features first (their reads begin snapshots
     * of their own), then one snapshot for the cached ones */
    for (int pass = 0; pass < 2 && rc == GKV_OK; pass++) {
        for (int e = 0; e < net_ && rc == GKV_OK; e++) {
            char name[GKV_NAME_MAX + 2];
            int64_t lo, hi;
            struct pw *p = NULL;

            if (q->feat[e] == NULL || fan[q->nfan == 1 ? 0 : e] == 0)
                continue;
            if ((rc = pw_where(s, r, q, e, name, &lo, &hi)) != GKV_OK)
                break;
            if (hi <= lo || srv__wb_match(s, name) != (pass == 0))
                continue;
            if (pass == 0) {
                if ((p = pw_new(e, name)) == NULL) {
                    rc = srv__fail(r, GKV_ENOMEM, "sample: out of memory");
                    break;
                }
                p->pw_private = 1;
                held[e] = p;
                rc = pw_refresh(s, r, p, NULL, lo, hi);
            } else if (tx == NULL &&
                       (rc = gkv_txn_begin(s->store, &tx)) != GKV_OK) {
                srv__fail(r, rc, "sample: partition %d's store: %s", part,
                          gkv_store_errmsg(s->store));
            } else if (txv == 0 &&
                       /* tx's version: a zero mark brought up to tx */
                       (rc = gkv_tensor_changed(tx, NULL, 0, 0, &txv, NULL,
                                                NULL)) != GKV_OK) {
                srv__fail(r, rc, "sample: partition %d's store: %s", part,
                          gkv_store_errmsg(s->store));
            } else if ((rc = pw_shared(s, r, tx, txv, e, name, lo, hi,
                                       &p)) == GKV_OK) {
                held[e] = p;
            }
            if (rc != GKV_OK)
                break;
            if (p->pw_first_bad >= 0) {
                rc = srv__fail(r, GKV_EINVAL, "sample on partition %d: edge "
                               "feature '%s': edge %lld has weight %g; "
                               "sampling weights must be finite and >= 0",
                               part, name, (long long)p->pw_first_bad,
                               (double)p->pw_w[p->pw_first_bad - p->pw_lo]);
                break;
            }
            ew[e] = p->pw_w;
            ewlen[e] = p->pw_n;
            ewlo[e] = p->pw_lo;
        }
    }
    gkv_txn_end(tx);
    if (rc != GKV_OK)
        pw_release(s, held, net_);
    return rc;
}

/* The weights by position of a SAMPLE request (NET_SAMPLE_F_WPOS) as the
 * sampler takes them: per edge type with counts, the offsets of each
 * seed's weights and the weights, aligned. *wpo and the 2 x net buffers
 * in *bufs are the caller's to free, also on error. */
static gkv_err
wpos_take(gkv_server *s, srv_req *r, const net_sample_req *q,
          const size_t *ns, graph__wpos **wpo, void ***bufs)
{
    int net_ = gkv_pbook_num_etypes(s->graph.book);
    graph__wpos *wp;
    void **b;

    /* (+ 1: never a request for 0 bytes) */
    *wpo = wp = gkv__calloc((size_t)net_ + 1, sizeof *wp);
    *bufs = b = gkv__calloc(2 * (size_t)net_ + 1, sizeof *b);
    if (wp == NULL || b == NULL)
        return srv__fail(r, GKV_ENOMEM, "sample: out of memory");
    for (int e = 0; e < net_; e++) {
        gkv_etype_info ei;
        size_t nc = (size_t)q->nwc[e], want;
        int64_t *off;

        if (nc == 0)
            continue;
        gkv_pbook_etype_info(s->graph.book, e, &ei);
        want = ns[q->dir == GKV_DIR_IN ? ei.dst_ntype : ei.src_ntype];
        if (nc != want)
            return srv__fail(r, GKV_EINVAL, "sample: %zu weight counts for edge "
                             "type '%s', and the request has %zu seeds of its "
                             "type", nc, gkv_pbook_etype_name(s->graph.book, e),
                             want);
        if ((off = gkv__malloc((nc + 1) * sizeof *off)) == NULL)
            return srv__fail(r, GKV_ENOMEM, "sample: out of memory");
        b[2 * e] = off;
        off[0] = 0;
        for (size_t i = 0; i < nc; i++) {
            uint32_t k;
            memcpy(&k, q->wc[e] + 4 * i, 4);
            off[i + 1] = off[i] + (int64_t)k;
        }
        wp[e].off = off;
        if ((wp[e].w = srv__bytes_aligned(q->w[e], (size_t)q->nw[e] * 4,
                                          &b[2 * e + 1])) == NULL)
            return srv__fail(r, GKV_ENOMEM, "sample: out of memory");
    }
    return GKV_OK;
}

/* ---- SAMPLE, step by step ----------------------------------------------- */

/* One SAMPLE request on its way through op_sample's steps: what was
 * decoded and checked, and what the sampler was given and gave. Every
 * pointer is the request's, freed by hop_free(). */
struct hop {
    net_sample_req q;
    int nnt, net, part;              /* the graph's types; this partition */
    int nfeat;                       /* edge types weighed by a feature */
    int *fan;                        /* [q.nfan] */
    const int64_t **seeds;           /* [nnt] seeds by node type, aligned */
    size_t *ns, total;               /* [nnt] their counts; the sum */
    const int64_t **ex;              /* [net] exclusions (q.has_ex) */
    size_t *nex;
    uint64_t **tmp;                  /* [ntmp] aligned copies */
    size_t ntmp;
    size_t ncnt;                     /* counts in the reply (a seed's per
                                      * edge type of its node type) */
    size_t need;                     /* reply bytes besides the edges */
    gkv_sample_opts o;
    struct pw **held;                /* [net] edge-weight cache entries */
    const float **ew;                /* [net] their weights */
    int64_t *ewlen, *ewlo;
    graph__wpos *wp;                 /* weights by position (F_WPOS) */
    void **wbuf;
    int64_t *c64, **cv;              /* the sampler's counts, cv[e] */
    gkv_sample_edges *out;           /* [net] the sampled edges */
};

static void
hop_free(gkv_server *s, struct hop *h)
{
    for (size_t i = 0; h->tmp != NULL && i < h->ntmp; i++)
        gkv__free(h->tmp[i]);
    gkv__free(h->tmp);
    gkv__free(h->fan);
    gkv__free(h->seeds);
    gkv__free(h->ns);
    gkv__free(h->ex);
    gkv__free(h->nex);
    gkv__free(h->out);
    gkv__free(h->c64);
    gkv__free(h->cv);
    pw_release(s, h->held, h->net);
    gkv__free(h->held);
    gkv__free((void *)h->ew);
    gkv__free(h->ewlen);
    gkv__free(h->ewlo);
    for (int e = 0; h->wbuf != NULL && e < 2 * h->net; e++)
        gkv__free(h->wbuf[e]);
    gkv__free(h->wbuf);
    gkv__free(h->wp);
    net__sample_req_free(&h->q);
}

/* The request against the graph: its types, direction, flags and
 * sources of weights agree. GKV_OK, or r failed. */
static gkv_err
hop_check(gkv_server *s, srv_req *r, struct hop *h)
{
    const net_sample_req *q = &h->q;

    if (q->nnt != (uint32_t)h->nnt || q->net != (uint32_t)h->net)
        return srv__fail(r, GKV_EINVAL, "sample: the request has %u node "
                         "types and %u edge types; the graph has %d and %d",
                         q->nnt, q->net, h->nnt, h->net);
    if (q->dir != GKV_DIR_IN && q->dir != GKV_DIR_OUT)
        return srv__fail(r, GKV_EINVAL, "sample: direction %u is neither in "
                         "(0) nor out (1)", q->dir);
    if (q->flags & ~(GKV_SAMPLE_REPLACE | GKV_SAMPLE_WEIGHTED |
                     NET_SAMPLE_F_FEAT | NET_SAMPLE_F_WPOS))
        return srv__fail(r, GKV_EINVAL, "sample: flags 0x%x have unknown "
                         "bits", q->flags);
    for (int e = 0; q->feat != NULL && e < h->net; e++)
        h->nfeat += q->feat[e] != NULL;
    if (h->nfeat > 0 && (q->flags & GKV_SAMPLE_WEIGHTED))
        return srv__fail(r, GKV_EINVAL, "sample: weights from edge features "
                         "(edge_w_feat) and the stored weights "
                         "(GKV_SAMPLE_WEIGHTED) are both asked for; choose "
                         "one source of weights");
    if (h->nfeat > 0 && q->dir != GKV_DIR_IN)
        return srv__fail(r, GKV_ENOTSUP, "sample: edge-feature names "
                         "(edge_w_feat) come with in-edge sampling "
                         "(GKV_DIR_IN) only: a node's out-edges include "
                         "edges other partitions own, whose feature rows "
                         "this partition does not hold, so for out-edges "
                         "the client sends the weights");
    if ((q->flags & NET_SAMPLE_F_WPOS) &&
        (q->flags & (NET_SAMPLE_F_FEAT | GKV_SAMPLE_WEIGHTED)))
        return srv__fail(r, GKV_EINVAL, "sample: weights sent with the seeds "
                         "and %s are both asked for; choose one source of "
                         "weights", (q->flags & NET_SAMPLE_F_FEAT) ?
                         "edge-feature names" :
                         "the stored weights (GKV_SAMPLE_WEIGHTED)");
    if (q->layer > INT_MAX)
        return srv__fail(r, GKV_EINVAL, "sample: layer %u", q->layer);
    if (q->nfan != 1 && q->nfan != (uint32_t)h->net)
        return srv__fail(r, GKV_EINVAL, "sample: %u fanouts; give 1 (for "
                         "every edge type) or one per edge type (%d)",
                         q->nfan, h->net);
    if (q->dir == GKV_DIR_OUT && !gkv_pbook_has_csr(s->graph.book))
        return srv__fail(r, GKV_ENOTSUP, "sample: out-edge sampling needs "
                         "the CSR, and this graph was partitioned without "
                         "it (gkv-partition --csr)");
    return GKV_OK;
}

/* The fanouts, seeds and exclusions, aligned. GKV_OK, or r failed. */
static gkv_err
hop_inputs(srv_req *r, struct hop *h)
{
    const net_sample_req *q = &h->q;
    size_t nnt = (size_t)h->nnt, net_ = (size_t)h->net;

    /* (+ 1: never a request for 0 bytes) */
    if ((h->fan = gkv__calloc(q->nfan + 1, sizeof *h->fan)) == NULL ||
        (h->seeds = gkv__calloc(nnt + 1, sizeof *h->seeds)) == NULL ||
        (h->ns = gkv__calloc(nnt + 1, sizeof *h->ns)) == NULL ||
        (h->tmp = gkv__calloc(nnt + net_ + 1, sizeof *h->tmp)) == NULL ||
        (h->out = gkv__calloc(net_ + 1, sizeof *h->out)) == NULL ||
        (q->has_ex && ((h->ex = gkv__calloc(net_ + 1, sizeof *h->ex)) == NULL ||
                       (h->nex = gkv__calloc(net_ + 1, sizeof *h->nex)) == NULL)))
        return srv__fail(r, GKV_ENOMEM, "sample: out of memory");
    h->ntmp = nnt + net_;
    for (uint32_t i = 0; i < q->nfan; i++) {
        int32_t v;
        memcpy(&v, q->fanout + 4 * i, 4);
        if (v < -1)
            return srv__fail(r, GKV_EINVAL, "sample: fanout[%u] = %d: a "
                             "fanout is -1 (all) or >= 0", i, v);
        h->fan[i] = v;
    }
    for (size_t t = 0; t < nnt; t++) {
        h->ns[t] = (size_t)q->nseeds[t];
        h->total += h->ns[t];
        if ((h->seeds[t] = (const int64_t *)srv__ids_aligned(q->seeds[t],
                                           h->ns[t], &h->tmp[t])) == NULL)
            return srv__fail(r, GKV_ENOMEM, "sample: out of memory");
    }
    for (size_t e = 0; q->has_ex && e < net_; e++) {
        h->nex[e] = (size_t)q->nex[e];
        if ((h->ex[e] = (const int64_t *)srv__ids_aligned(q->ex[e], h->nex[e],
                                                &h->tmp[nnt + e])) == NULL)
            return srv__fail(r, GKV_ENOMEM, "sample: out of memory");
    }
    return GKV_OK;
}

/* Every seed must be this partition's: names the owner of one that is
 * not. GKV_OK, or r failed. */
static gkv_err
hop_own(gkv_server *s, srv_req *r, const struct hop *h)
{
    int32_t *own;
    gkv_err rc = GKV_OK;

    if ((own = gkv__malloc(h->total * sizeof *own + 4)) == NULL)
        return srv__fail(r, GKV_ENOMEM, "sample: out of memory");
    for (int t = 0; t < h->nnt && rc == GKV_OK; t++) {
        if (h->ns[t] == 0)
            continue;
        if ((rc = gkv_pbook_node_owner(s->graph.book, t, h->seeds[t],
                                       h->ns[t], own)) != GKV_OK) {
            srv__fail(r, rc, "sample: seeds of node type '%s': %s",
                      gkv_pbook_ntype_name(s->graph.book, t),
                      gkv_pbook_errmsg(s->graph.book));
            break;
        }
        for (size_t i = 0; i < h->ns[t]; i++)
            if (own[i] != h->part) {
                rc = srv__fail(r, GKV_ERANGE, "sample: seed %lld of node "
                               "type '%s' (seeds[%d][%zu]) is owned by "
                               "partition %d, not by partition %d (this "
                               "server's)", (long long)h->seeds[t][i],
                               gkv_pbook_ntype_name(s->graph.book, t), t, i,
                               own[i], h->part);
                break;
            }
    }
    gkv__free(own);
    return rc;
}

/* The seeds' centre node type for edge type e. */
static int
hop_ctype(const gkv_server *s, const struct hop *h, int e)
{
    gkv_etype_info ei;

    gkv_pbook_etype_info(s->graph.book, e, &ei);
    return h->q.dir == GKV_DIR_IN ? ei.dst_ntype : ei.src_ntype;
}

/* Bounds the reply before the sampler allocates the edges: at most 16
 * bytes an edge, 4 a count, 48 an edge type (its fields and padding).
 * Too large is GKV_EINVAL with NET_F_SPLIT (the client splits the seeds).
 * GKV_OK, or r failed. */
static gkv_err
hop_bound(gkv_server *s, srv_req *r, struct hop *h)
{
    size_t bound, lim;
    gkv_err rc;

    for (int e = 0; e < h->net; e++)
        h->ncnt += h->ns[hop_ctype(s, h, e)];
    h->need = 64 + 48 * (size_t)h->net + 4 * h->ncnt;
    if (h->need > s->io.max_msg) {
        r->rflags |= NET_F_SPLIT;
        return srv__fail(r, GKV_EINVAL, "sample: %zu seeds are more than this "
                         "server's %llu-byte message limit; send fewer seeds",
                         h->total, (unsigned long long)s->io.max_msg);
    }
    lim = (s->io.max_msg - h->need) / 16;
    if ((rc = sample_bound(s, &h->q, h->fan, h->seeds, h->ns, lim,
                           &bound)) != GKV_OK)
        return srv__fail(r, rc, "sample on partition %d: %s", h->part,
                         rc == GKV_ENOMEM ? "out of memory" :
                         gkv_part_errmsg(s->graph.part));
    if (bound > lim) {
        r->rflags |= NET_F_SPLIT;
        return srv__fail(r, GKV_EINVAL, "sample: the seeds could get more "
                         "than %zu edges, more than this server's %llu-byte "
                         "message limit; send fewer seeds or smaller "
                         "fanouts", lim, (unsigned long long)s->io.max_msg);
    }
    return GKV_OK;
}

/* The sampler's options, with the request's weights: by position
 * (F_WPOS) or from edge features (the cache's entries, held shared until
 * hop_free or pw_release). GKV_OK, or r failed. */
static gkv_err
hop_options(gkv_server *s, srv_req *r, struct hop *h)
{
    size_t net_ = (size_t)h->net;

    memset(&h->o, 0, sizeof h->o);
    h->o.seed = h->q.seed;
    h->o.dir = (int)h->q.dir;
    h->o.flags = h->q.flags & ~(NET_SAMPLE_F_FEAT | NET_SAMPLE_F_WPOS);
    h->o.exclude = h->ex;
    h->o.exclude_n = h->nex;
    if ((h->q.flags & NET_SAMPLE_F_WPOS) &&
        wpos_take(s, r, &h->q, h->ns, &h->wp, &h->wbuf) != GKV_OK)
        return r->status;
    if (h->nfeat == 0)
        return GKV_OK;
    /* (+ 1: never a request for 0 bytes) */
    if ((h->held = gkv__calloc(net_ + 1, sizeof *h->held)) == NULL ||
        (h->ew = gkv__calloc(net_ + 1, sizeof *h->ew)) == NULL ||
        (h->ewlen = gkv__calloc(net_ + 1, sizeof *h->ewlen)) == NULL ||
        (h->ewlo = gkv__calloc(net_ + 1, sizeof *h->ewlo)) == NULL)
        return srv__fail(r, GKV_ENOMEM, "sample: out of memory");
    if (pw_take(s, r, &h->q, h->fan, h->held, h->ew, h->ewlen,
                h->ewlo) != GKV_OK)
        return r->status;
    h->o.edge_w = h->ew;
    h->o.edge_w_len = h->ewlen;
    h->o.edge_w_lo = h->ewlo;
    return GKV_OK;
}

/* The hop, with worker r->worker's own sampler; each seed's count of
 * picks per edge type in h->cv. GKV_OK, or r failed. */
static gkv_err
hop_run(gkv_server *s, srv_req *r, struct hop *h)
{
    gkv_sampler *sp;
    size_t at = 0;
    gkv_err rc;

    if (r->worker >= s->io.nthreads)
        return srv__fail(r, GKV_EINVAL, "sample: not on a worker thread");
    if ((h->c64 = gkv__malloc(h->ncnt * sizeof *h->c64 + 8)) == NULL ||
        (h->cv = gkv__calloc((size_t)h->net + 1, sizeof *h->cv)) == NULL)
        return srv__fail(r, GKV_ENOMEM, "sample: out of memory");
    for (int e = 0; e < h->net; e++) {
        h->cv[e] = h->c64 + at;
        at += h->ns[hop_ctype(s, h, e)];
    }
    sp = s->graph.samp[r->worker];
    rc = graph__sample_hop(sp, h->seeds, h->ns, h->fan, (int)h->q.nfan,
                           (int)h->q.layer, &h->o, h->wp, h->cv, h->out);
    pw_release(s, h->held, h->net);
    if (rc != GKV_OK)
        return srv__fail(r, rc, "sample on partition %d: %s", h->part,
                         gkv_sampler_errmsg(sp));
    return GKV_OK;
}

/* The reply: per edge type the seeds' counts and the edges, checked
 * against the message limit again (hop_bound's is an upper bound). */
static void
hop_reply(gkv_server *s, srv_req *r, const struct hop *h)
{
    net_sample_renc_et *pk = NULL;
    struct sample_arg sa;
    uint32_t *cnt = NULL;
    size_t total = 0;

    for (int e = 0; e < h->net; e++)
        total += h->out[e].n;
    if (h->need > s->io.max_msg || total > (s->io.max_msg - h->need) / 16) {
        r->rflags |= NET_F_SPLIT;
        srv__fail(r, GKV_EINVAL, "sample: %zu edges are more than this "
                  "server's %llu-byte message limit; send fewer seeds", total,
                  (unsigned long long)s->io.max_msg);
        return;
    }
    if ((pk = gkv__calloc((size_t)h->net + 1, sizeof *pk)) == NULL ||
        (cnt = gkv__malloc(h->ncnt * sizeof *cnt + 4)) == NULL) {
        srv__fail(r, GKV_ENOMEM, "sample: out of memory");
        goto out;
    }
    for (int e = 0; e < h->net; e++) {
        int ct = hop_ctype(s, h, e);
        /* the u32 counts sit where the sampler's do */
        if (sample_pack(&h->out[e], (int)h->q.dir, h->seeds[ct], h->ns[ct],
                        h->cv[e], s->conf.wide_ids, cnt + (h->cv[e] - h->c64),
                        &pk[e]) != 0) {
            srv__fail(r, GKV_EINVAL, "sample on partition %d: the edges of "
                      "edge type '%s' do not follow the seeds", h->part,
                      gkv_pbook_etype_name(s->graph.book, e));
            goto out;
        }
    }
    sa.e = pk;
    sa.net = h->net;
    if (srv__reply_build(r, enc_sample, &sa) == GKV_OK) {
        atomic_fetch_add_explicit(&s->stats.samples, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&s->stats.sample_edges, total,
                                  memory_order_relaxed);
    }
out:
    gkv__free(pk);
    gkv__free(cnt);
}

/* SAMPLE: one hop of neighbour sampling on the partition's sgraph, with
 * the worker's own sampler. Every seed must be a node this partition
 * owns. */
static void
op_sample(gkv_server *s, srv_req *r)
{
    struct hop h;
    net_rd rd;

    memset(&h, 0, sizeof h);
    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_sample_req(&rd, &h.q) != 0) {
        srv__fail(r, GKV_EPROTO, "sample: %s", rd.why);
        return;
    }
    h.nnt = gkv_pbook_num_ntypes(s->graph.book);
    h.net = gkv_pbook_num_etypes(s->graph.book);
    h.part = gkv_part_id(s->graph.part);
    if (hop_check(s, r, &h) == GKV_OK && hop_inputs(r, &h) == GKV_OK &&
        hop_own(s, r, &h) == GKV_OK && hop_bound(s, r, &h) == GKV_OK &&
        hop_options(s, r, &h) == GKV_OK && hop_run(s, r, &h) == GKV_OK)
        hop_reply(s, r, &h);
    hop_free(s, &h);
}

/* Type 38 is reserved for edge mini-batches served whole; this protocol
 * version answers GKV_ENOTSUP (doc/PROTOCOL.md). A trainer builds them
 * from find_edges and sample_blocks, or in-process with
 * gkv_sample_edge_batch on a partition. */
static void
op_edge_batch(gkv_server *s, srv_req *r)
{
    (void)s;
    srv__fail(r, GKV_ENOTSUP, "edge_batch (type %d) is reserved and not "
              "implemented by this server", NET_EDGE_BATCH);
}

void
srv__pw_free_all(gkv_server *s)
{
    while (s->pw.list != NULL) {
        struct pw *p = s->pw.list;
        s->pw.list = p->pw_next;
        pw_free(p);
    }
}

const srv_op srv__sample_ops[] = {
    {NET_SAMPLE, SRV_SESSION | SRV_PART, op_sample, NULL},
    {NET_EDGE_BATCH, SRV_SESSION, op_edge_batch, NULL},
    {0, 0, NULL, NULL},
};
