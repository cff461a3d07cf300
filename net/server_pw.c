/* server_pw.c - the edge-weight cache: edge features converted to
 * sampling weights, for SAMPLE requests that name them (server_sample.c).
 *
 * Locks: pw.mu guards the list and each entry's reference count; each
 * entry's rwlock guards its contents, held shared while a request samples
 * with it and exclusive while one refreshes it. Order: a request's
 * snapshot is begun before any entry is taken, and entries are taken in
 * edge-type order, so no lock waits on a map resize that waits on it.
 * The cache asks kv what changed through its public gkv_tensor_changed().
 */
#include <stdio.h>
#include <string.h>
#include "net/server_int.h"

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
    bad = gkv_sample_weights_from(tmp != NULL ? (const void *)tmp : (const void *)dst,
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
void
srv__pw_release(gkv_server *s, struct pw **held, int net_)
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
 * its lock held shared until srv__pw_release(). Edge types whose partition
 * range is empty need no tensor (they have nothing to sample). */
gkv_err
srv__pw_take(gkv_server *s, srv_req *r, const net_sample_req *q,
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
        srv__pw_release(s, held, net_);
    return rc;
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
