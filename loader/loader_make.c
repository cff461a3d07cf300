/* loader_make.c - making one batch, in each of the three places, and the
 * batch's memory.
 *
 * A batch is three kinds of allocation: its head (the gkv_batch, the
 * blocks' structs and the pointer and size arrays), one buffer of every
 * ID array (seeds, then per block its node lists and its edges' src, dst
 * and eid, then with edge seeds the positive and negative pairs), and one
 * buffer per tensor (each feature, the label, each efeat x layer),
 * page-locked with GKV_LOADER_PINNED. The head records what to free, so
 * gkv_batch_release needs no loader. The blocks (and an edge batch's
 * pairs) are sampled into the sampler's or client's memory and copied
 * into the ID buffer; the rows are then read straight into their
 * buffers by those copied IDs (LOCAL: the store, CLIENT:
 * gkv_client_pull). SERVER: the client writes them straight into tensor
 * buffers made for the batch as it reads the reply and the pulls
 * (gkv_batch_out.rows_alloc), which the batch then takes over: no copy
 * after. */
#include <stdlib.h>
#include <string.h>
#include "loader/loader_int.h"

typedef struct loader_batch {
    gkv_batch  pub;              /* first: a gkv_batch * is this */
    int        pinned;
    int        nbufs;
    void     **bufs;             /* [nbufs] tensor buffers */
    int64_t   *ids;              /* the ID buffer */
} loader_batch;

static void *
buf_alloc(int pinned, size_t n)
{
#ifdef GKV_HAVE_CUDA
    if (pinned) {
        void *p = NULL;

        if (cudaHostAlloc == NULL ||
            cudaHostAlloc(&p, n ? n : 1, 0 /* cudaHostAllocDefault */) != 0)
            return NULL;
        return p;
    }
#else
    (void)pinned;
#endif
    return gkv__malloc(n);
}

static void
buf_free(int pinned, void *p)
{
#ifdef GKV_HAVE_CUDA
    if (pinned) {
        if (p != NULL && cudaFreeHost != NULL)
            (void)cudaFreeHost(p);
        return;
    }
#else
    (void)pinned;
#endif
    gkv__free(p);
}

void
gkv_batch_release(gkv_batch *b)
{
    loader_batch *lb = (loader_batch *)b;

    if (lb == NULL)
        return;
    for (int i = 0; lb->bufs != NULL && i < lb->nbufs; i++)
        buf_free(lb->pinned, lb->bufs[i]);
    gkv__free(lb->ids);
    gkv__free(lb);
}

/* SERVER: the tensor buffers made while the client reads the batch
 * (rows_alloc), in the batch's order (feats, label, efeats f-major);
 * batch_new takes them over. */
struct given {
    int pinned, nf, hl;
    size_t nbufs;
    void **buf;                      /* [nbufs] */
};

static void *
given_alloc(void *arg, int kind, size_t index, size_t bytes)
{
    struct given *g = arg;
    size_t k = kind == GKV_BATCH_FEAT ? index :
               kind == GKV_BATCH_LABEL ? (size_t)g->nf :
               (size_t)g->nf + (size_t)g->hl + index;

    if (k >= g->nbufs || g->buf[k] != NULL)
        return NULL;
    return g->buf[k] = buf_alloc(g->pinned, bytes);
}

/* Tensor buffer number lb->nbufs of 'bytes': given[that] when there is
 * one (taken over), else a new one. */
static void *
buf_next(loader_batch *lb, void **given, size_t bytes)
{
    void *p;

    if (given != NULL && given[lb->nbufs] != NULL) {
        p = given[lb->nbufs];
        given[lb->nbufs] = NULL;
    } else {
        p = buf_alloc(lb->pinned, bytes);
    }
    return lb->bufs[lb->nbufs++] = p;
}

/* Copies src[0 .. n) to ids + *at, moving *at past it; returns where. */
static const int64_t *
ids_put(int64_t *ids, size_t *at, const int64_t *src, size_t n)
{
    int64_t *d = ids + *at;

    if (n > 0)
        memcpy(d, src, n * sizeof *d);
    *at += n;
    return d;
}

/* The head of a batch for blocks like 'bl' (and the pairs of 'eb', with
 * edge seeds), its ID buffer holding the
 * seeds and a copy of the blocks, and its tensor buffers (given's when
 * not NULL: see struct given). */
static gkv_err
batch_new(gkv_loader *l, const int64_t *seeds, size_t n, const gkv_block *bl,
          const gkv_edge_batch *eb, void **given, uint64_t epoch,
          uint64_t index, uint64_t seed, loader_batch **out)
{
    int nl = l->o.nlayers, nt = l->num_ntypes, ne = l->num_etypes;
    int nf = l->o.nfeats, nef = l->o.nefeats;
    int nbufs = nf + (l->label.name != NULL) + nef * nl;
    size_t head, nids = n, at;
    loader_batch *lb;
    gkv_block *blocks;
    gkv_block_nodes *nodes;
    gkv_sample_edges *edges;
    const void **feat, **efeat;
    size_t *feat_bytes, *efeat_bytes;
    char *p;

    *out = NULL;
    for (int i = 0; i < nl; i++) {
        for (int t = 0; t < nt; t++)
            nids += bl[i].nodes[t].num_src;
        for (int e = 0; e < ne; e++)
            nids += 3 * bl[i].edges[e].n;
    }
    if (eb != NULL)
        nids += 2 * (eb->num_pos + eb->num_neg);
    head = sizeof *lb + (size_t)nl * sizeof *blocks +
           (size_t)nl * (size_t)nt * sizeof *nodes +
           (size_t)nl * (size_t)ne * sizeof *edges +
           (size_t)(nf + nef * nl) * (sizeof (void *) + sizeof (size_t)) +
           (size_t)nbufs * sizeof (void *);
    if ((p = gkv__calloc(1, head)) == NULL)
        return gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory");
    lb = (loader_batch *)p;
    p += sizeof *lb;
    blocks = (gkv_block *)p;          p += (size_t)nl * sizeof *blocks;
    nodes = (gkv_block_nodes *)p;     p += (size_t)nl * nt * sizeof *nodes;
    edges = (gkv_sample_edges *)p;    p += (size_t)nl * ne * sizeof *edges;
    feat = (const void **)p;          p += (size_t)nf * sizeof (void *);
    efeat = (const void **)p;         p += (size_t)nef * nl * sizeof (void *);
    lb->bufs = (void **)p;            p += (size_t)nbufs * sizeof (void *);
    feat_bytes = (size_t *)p;         p += (size_t)nf * sizeof (size_t);
    efeat_bytes = (size_t *)p;
    lb->pinned = l->pinned;
    if ((lb->ids = gkv__malloc((nids + 1) * sizeof (int64_t))) == NULL) {
        gkv_batch_release(&lb->pub);
        return gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory");
    }
    memcpy(lb->ids, seeds, n * sizeof (int64_t));
    at = n;
    for (int i = 0; i < nl; i++) {
        blocks[i].num_ntypes = nt;
        blocks[i].num_etypes = ne;
        blocks[i].nodes = &nodes[(size_t)i * nt];
        blocks[i].edges = &edges[(size_t)i * ne];
        for (int t = 0; t < nt; t++) {
            gkv_block_nodes *d = &nodes[(size_t)i * nt + t];
            const gkv_block_nodes *s = &bl[i].nodes[t];

            d->num_src = s->num_src;
            d->num_dst = s->num_dst;
            d->ids = lb->ids + at;
            if (s->num_src > 0)
                memcpy(lb->ids + at, s->ids, s->num_src * sizeof (int64_t));
            at += s->num_src;
        }
        for (int e = 0; e < ne; e++) {
            gkv_sample_edges *d = &edges[(size_t)i * ne + e];
            const gkv_sample_edges *s = &bl[i].edges[e];
            size_t m = s->n;

            d->n = m;
            d->src = lb->ids + at;
            d->dst = lb->ids + at + m;
            d->eid = lb->ids + at + 2 * m;
            if (m > 0) {
                memcpy(lb->ids + at, s->src, m * sizeof (int64_t));
                memcpy(lb->ids + at + m, s->dst, m * sizeof (int64_t));
                memcpy(lb->ids + at + 2 * m, s->eid, m * sizeof (int64_t));
            }
            at += 3 * m;
        }
    }
    if (eb != NULL) {          /* the pairs, after the blocks */
        lb->pub.pos_src = ids_put(lb->ids, &at, eb->pos_src, eb->num_pos);
        lb->pub.pos_dst = ids_put(lb->ids, &at, eb->pos_dst, eb->num_pos);
        lb->pub.neg_src = ids_put(lb->ids, &at, eb->neg_src, eb->num_neg);
        lb->pub.neg_dst = ids_put(lb->ids, &at, eb->neg_dst, eb->num_neg);
        lb->pub.num_pos = eb->num_pos;
        lb->pub.num_neg = eb->num_neg;
    }
    lb->pub.epoch = epoch;
    lb->pub.index = index;
    lb->pub.sample_seed = seed;
    lb->pub.num_ntypes = nt;
    lb->pub.num_etypes = ne;
    lb->pub.nlayers = nl;
    lb->pub.seeds = lb->ids;
    lb->pub.nseeds = n;
    lb->pub.seed_ntype = l->o.edge_seeds ? -1 : l->o.seed_ntype;
    lb->pub.blocks = blocks;
    lb->pub.feat = (const void *const *)feat;
    lb->pub.feat_bytes = feat_bytes;
    lb->pub.nfeats = nf;
    lb->pub.efeat = (const void *const *)efeat;
    lb->pub.efeat_bytes = efeat_bytes;
    lb->pub.nefeats = nef;
    /* the tensor buffers: features, label, efeats */
    for (int f = 0; f < nf; f++) {
        size_t bytes = blocks[0].nodes[l->feats[f].type].num_src *
                       l->feats[f].row_bytes;

        feat_bytes[f] = bytes;
        if ((feat[f] = buf_next(lb, given, bytes)) == NULL)
            goto nomem;
    }
    if (l->label.name != NULL) {
        lb->pub.label_bytes = n * l->label.row_bytes;
        if ((lb->pub.label = buf_next(lb, given, lb->pub.label_bytes)) ==
            NULL)
            goto nomem;
    }
    for (int f = 0; f < nef; f++)
        for (int i = 0; i < nl; i++) {
            size_t k = (size_t)f * nl + i;
            size_t bytes = blocks[i].edges[l->efeats[f].type].n *
                           l->efeats[f].row_bytes;

            efeat_bytes[k] = bytes;
            if ((efeat[k] = buf_next(lb, given, bytes)) == NULL)
                goto nomem;
        }
    *out = lb;
    return GKV_OK;
nomem:
    gkv_batch_release(&lb->pub);
    return gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory%s",
                     l->pinned ? " (page-locked)" : "");
}

/* Reads rows ids[0 .. n) of tensor t into dst (LOCAL: the store through
 * tx; CLIENT: a pull). */
static gkv_err
rows_read(gkv_loader *l, loader_worker *w, gkv_txn *tx,
          const loader_tensor *t, const int64_t *ids, size_t n, void *dst)
{
    gkv_err rc;

    if (n == 0)
        return GKV_OK;
    if (l->where == GKV_LOADER_LOCAL)
        rc = gkv_tensor_pull(l->store, tx, t->name, (const uint64_t *)ids, n,
                             dst, n * t->row_bytes);
    else
        rc = gkv_client_pull(w->c, t->name, (const uint64_t *)ids, n, dst,
                             n * t->row_bytes);
    if (rc != GKV_OK)
        return gkv__fail(NULL, rc, "rows of '%s': %s", t->name,
                         gkv_errmsg());
    return GKV_OK;
}

/* LOCAL and CLIENT: the rows, read by the batch's own IDs. */
static gkv_err
batch_read(gkv_loader *l, loader_worker *w, loader_batch *lb)
{
    const gkv_batch *b = &lb->pub;
    gkv_txn *tx = NULL;
    gkv_err rc = GKV_OK;

    if (l->o.nfeats + l->o.nefeats == 0 && l->label.name == NULL)
        return GKV_OK;
    if (l->where == GKV_LOADER_LOCAL &&
        (rc = gkv_txn_begin(l->store, &tx)) != GKV_OK)
        return gkv__fail(NULL, rc, "loader: %s", gkv_errmsg());
    for (int f = 0; rc == GKV_OK && f < l->o.nfeats; f++) {
        const gkv_block_nodes *in = &b->blocks[0].nodes[l->feats[f].type];

        rc = rows_read(l, w, tx, &l->feats[f], in->ids, in->num_src,
                       (void *)b->feat[f]);
    }
    if (rc == GKV_OK && l->label.name != NULL)
        rc = rows_read(l, w, tx, &l->label, b->seeds, b->nseeds,
                       (void *)b->label);
    for (int f = 0; rc == GKV_OK && f < l->o.nefeats; f++)
        for (int i = 0; rc == GKV_OK && i < b->nlayers; i++) {
            const gkv_sample_edges *e =
                &b->blocks[i].edges[l->efeats[f].type];

            rc = rows_read(l, w, tx, &l->efeats[f], e->eid, e->n,
                           (void *)b->efeat[(size_t)f * b->nlayers + i]);
        }
    gkv_txn_end(tx);
    return rc;
}

/* SERVER: the rows the client wrote into the batch's buffers (their
 * sizes checked against the blocks'). */
static gkv_err
batch_took(const gkv_loader *l, loader_batch *lb, const gkv_batch_out *r)
{
    const gkv_batch *b = &lb->pub;
    int nl = b->nlayers;
    const char *name = NULL;
    size_t got = 0, want = 0;

    for (int f = 0; f < b->nfeats; f++) {
        name = l->feats[f].name;
        got = r->feat_bytes[f];
        want = b->feat_bytes[f];
        if (got != want || r->feat[f] != b->feat[f])
            goto bad;
    }
    if (b->label != NULL) {
        name = l->label.name;
        got = r->label_bytes;
        want = b->label_bytes;
        if (got != want || r->label != b->label)
            goto bad;
    }
    for (size_t k = 0; k < (size_t)b->nefeats * nl; k++) {
        name = l->efeats[k / (size_t)nl].name;
        got = r->efeat_bytes[k];
        want = b->efeat_bytes[k];
        if (got != want || r->efeat[k] != b->efeat[k])
            goto bad;
    }
    return GKV_OK;
bad:
    return gkv__fail(NULL, GKV_EPROTO, "loader: the server's batch has %zu "
                     "bytes of rows of '%s', and its blocks imply %zu (or "
                     "they are not in the batch's own buffers)",
                     got, name, want);
}

gkv_err
loader__make(gkv_loader *l, loader_worker *w, uint64_t epoch, uint64_t index,
             const int64_t *seeds, size_t n, gkv_batch **out)
{
    int nl = l->o.nlayers, nt = l->num_ntypes;
    uint64_t seed = gkv_loader_batch_seed(l->o.sample_seed, epoch, index);
    gkv_sample_opts so = {0};
    gkv_block *bl = NULL;
    const int64_t **sv = NULL;
    size_t *sn = NULL;
    loader_batch *lb = NULL;
    gkv_batch_out r = {0};
    gkv_edge_batch eb = {0};
    struct given g = {0};
    gkv_err rc;

    *out = NULL;
    so.seed = seed;
    so.dir = l->o.dir;
    so.flags = l->o.sample_flags;
    if (l->where == GKV_LOADER_LOCAL && l->wfeat != NULL) {
        so.edge_w = (const float *const *)l->ew;    /* the same values */
        so.edge_w_len = l->ewlen;
    } else {
        so.edge_w_feat = (const char *const *)l->wfeat;
    }
    bl = gkv__calloc((size_t)nl, sizeof *bl);
    sv = gkv__calloc((size_t)nt, sizeof *sv);
    sn = gkv__calloc((size_t)nt, sizeof *sn);
    if (bl == NULL || sv == NULL || sn == NULL) {
        rc = gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory");
        goto out;
    }
    sv[l->o.seed_ntype] = seeds;
    sn[l->o.seed_ntype] = n;
    if (l->where == GKV_LOADER_SERVER) {
        gkv_batch_spec sp = {0};
        gkv_typed_tensor *ft = NULL, *eft = NULL, lab;
        int nf = l->o.nfeats, nef = l->o.nefeats;

        ft = gkv__calloc((size_t)nf + 1, sizeof *ft);
        eft = gkv__calloc((size_t)nef + 1, sizeof *eft);
        r.feat = gkv__calloc((size_t)nf + 1, sizeof *r.feat);
        r.feat_bytes = gkv__calloc((size_t)nf + 1, sizeof *r.feat_bytes);
        r.efeat = gkv__calloc((size_t)nef * nl + 1, sizeof *r.efeat);
        r.efeat_bytes = gkv__calloc((size_t)nef * nl + 1,
                                    sizeof *r.efeat_bytes);
        g.pinned = l->pinned;
        g.nf = nf;
        g.hl = l->label.name != NULL;
        g.nbufs = (size_t)nf + (size_t)g.hl + (size_t)nef * (size_t)nl;
        g.buf = gkv__calloc(g.nbufs + 1, sizeof *g.buf);
        r.rows_alloc = given_alloc;
        r.rows_arg = &g;
        if (ft == NULL || eft == NULL || r.feat == NULL || g.buf == NULL ||
            r.feat_bytes == NULL || r.efeat == NULL || r.efeat_bytes == NULL) {
            gkv__free(ft);
            gkv__free(eft);
            rc = gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory");
            goto out;
        }
        for (int f = 0; f < nf; f++) {
            ft[f].type = l->feats[f].type;
            ft[f].name = l->feats[f].name;
        }
        for (int f = 0; f < nef; f++) {
            eft[f].type = l->efeats[f].type;
            eft[f].name = l->efeats[f].name;
        }
        lab.type = l->label.type;
        lab.name = l->label.name;
        sp.seeds = sv;
        sp.nseeds = sn;
        sp.fanouts = l->fanouts;
        sp.nfan = l->o.nfan;
        sp.nlayers = nl;
        sp.opts = &so;
        sp.feats = ft;
        sp.nfeats = nf;
        sp.label = l->label.name != NULL ? &lab : NULL;
        sp.efeats = eft;
        sp.nefeats = nef;
        r.blocks = bl;
        rc = gkv_client_sample_batch(w->c, &sp, &r);
        gkv__free(ft);
        gkv__free(eft);
    } else if (l->o.edge_seeds) {
        gkv_edge_batch_spec es = {0};

        es.etype = l->o.seed_etype;
        es.eids = seeds;
        es.n = n;
        es.num_neg = l->o.num_neg;
        es.exclude = l->o.exclude;
        es.reverse_etype = l->o.reverse_etype;
        if (l->where == GKV_LOADER_CLIENT)
            rc = gkv_client_sample_edge_batch(w->c, &es, l->fanouts,
                                              l->o.nfan, nl, &so, &eb, bl);
        else
            rc = gkv_sample_edge_batch(w->smp, &es, l->fanouts, l->o.nfan,
                                       nl, &so, &eb, bl);
    } else if (l->where == GKV_LOADER_CLIENT) {
        rc = gkv_client_sample_blocks(w->c, sv, sn, l->fanouts, l->o.nfan,
                                      nl, &so, bl);
    } else {
        rc = gkv_sample_blocks(w->smp, sv, sn, l->fanouts, l->o.nfan, nl,
                               &so, bl);
    }
    if (rc != GKV_OK)
        goto out;
    if ((rc = batch_new(l, seeds, n, bl, l->o.edge_seeds ? &eb : NULL,
                        g.buf, epoch, index, seed, &lb)) != GKV_OK)
        goto out;
    if (l->where == GKV_LOADER_SERVER)
        rc = batch_took(l, lb, &r);
    else
        rc = batch_read(l, w, lb);
    if (rc != GKV_OK)
        goto out;
    *out = &lb->pub;
    lb = NULL;
out:
    gkv_batch_release(lb ? &lb->pub : NULL);
    for (size_t k = 0; g.buf != NULL && k < g.nbufs; k++)
        if (g.buf[k] != NULL)       /* not taken over: an error */
            buf_free(g.pinned, g.buf[k]);
    gkv__free(g.buf);
    gkv__free((void *)r.feat);
    gkv__free(r.feat_bytes);
    gkv__free((void *)r.efeat);
    gkv__free(r.efeat_bytes);
    gkv__free(bl);
    gkv__free((void *)sv);
    gkv__free(sn);
    return rc;
}
