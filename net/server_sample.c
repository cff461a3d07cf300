/* server_sample.c - sampling: SAMPLE (one hop on the partition's
 * sgraph) and EDGE_BATCH (reserved).
 *
 * Locks: the handlers run with no lock held (the core's rule) and only
 * when the server serves a partition (SRV_PART). Each worker samples with
 * its own sampler, s->graph.samp[r->worker]. Weights named by edge
 * features come from the edge-weight cache (server_pw.c), whose entries
 * a request holds shared while it samples.
 */
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include "net/server_int.h"
#include "graph/graph_seam.h"   /* graph__sample_hop, graph__eb_*, graph__wpos */

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

/* ---- weights by position (NET_SAMPLE_F_WPOS) ---------------------------- */

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
            return srv__fail(r, GKV_EINVAL, "sample: %zu weight counts for "
                             "edge type '%s', and the request has %zu seeds "
                             "of its type", nc,
                             gkv_pbook_etype_name(s->graph.book, e), want);
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
    srv__pw_release(s, h->held, h->net);
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
        (h->out = gkv__calloc(net_ + 1, sizeof *h->out)) == NULL)
        return srv__fail(r, GKV_ENOMEM, "sample: out of memory");
    if (q->has_ex &&
        ((h->ex = gkv__calloc(net_ + 1, sizeof *h->ex)) == NULL ||
         (h->nex = gkv__calloc(net_ + 1, sizeof *h->nex)) == NULL))
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
    if (srv__pw_take(s, r, &h->q, h->fan, h->held, h->ew, h->ewlen,
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
    srv__pw_release(s, h->held, h->net);
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

const srv_op srv__sample_ops[] = {
    {NET_SAMPLE, SRV_SESSION | SRV_PART, op_sample, NULL},
    {NET_EDGE_BATCH, SRV_SESSION, op_edge_batch, NULL},
    {0, 0, NULL, NULL},
};
