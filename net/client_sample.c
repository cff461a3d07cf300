/* client_sample.c - the sampling family: SAMPLE. One hop through the
 * servers (net__hop_once: the seeds routed by the partition book, cut into
 * pieces that fit a message, the replies merged seed by seed in request
 * order, relabelled into a block when asked), and sampled neighbours.
 * Weights by position are in client_weights.c (net__sample_hop), blocks
 * in client_blocks.c, edge mini-batches in client_edge_batch.c.
 *
 * The results of a sampling call live in the client's arena
 * (client_arena.c) until the next sampling call (c->mu held throughout).
 */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/base.h"
#include "graph/graph_seam.h"   /* graph__wpos */
#include "net/gkv_net.h"
#include "net/wire.h"
#include "net/client_int.h"

/* ---- sampling ---- */

struct spet {                  /* one edge type of a SAMPLE reply (arena) */
    size_t n;                  /* edges */
    uint32_t wide;             /* NET_SAMPLE_WIDE_* */
    const uint32_t *cnt;       /* per seed of the centre type, as sent */
    const void *nbr, *eid;     /* n x (u32 or i64) */
};

struct spiece {                /* one SAMPLE message: seeds of one machine */
    net_sample_enc enc;
    int64_t **seeds;           /* [nnt] this slice's seeds (gathered) */
    size_t *nseeds;            /* [nnt] */
    const size_t **pos;        /* [nnt] their positions in the request */
    size_t *ctr;               /* [net] the centre type's seed count */
    struct spet *et;           /* [net] the reply */
    int net;
    /* weights by position (out-edges by an edge feature): [net] */
    size_t *nwc, *nw;
    uint32_t **wc;
    float **w;
};

static void
penc_sample(net_wr *w, const struct part *p)
{
    const struct spiece *sp = p->arg;

    net__enc_sample_req(w, &sp->enc);
}

/* Copies one column of n IDs (u32 or i64 on the wire) into the arena. */
static const void *
col_copy(gkv_client *c, const unsigned char *p, size_t n, int wide)
{
    size_t b = n * (wide ? 8 : 4);
    void *d = net__arena_alloc(c, b);

    if (d != NULL && b > 0)
        memcpy(d, p, b);
    return d;
}

static gkv_err
done_sample(gkv_client *c, struct part *p, net_rd *rd)
{
    struct spiece *sp = p->arg;
    net_sample_rep rep;
    int d = net__dec_sample_rep(rd, &rep);

    if (d == NET_DEC_NOMEM)     /* ours, not the server's */
        return net__fail(GKV_ENOMEM, "out of memory for a sample reply of "
                         "%zu bytes", rd->len);
    if (d != 0)
        return net__cfail(p->cn, GKV_EPROTO, "malformed sample reply: %s",
                          rd->why);
    if (rep.net != (uint32_t)sp->net) {
        net__sample_rep_free(&rep);
        return net__cfail(p->cn, GKV_EPROTO, "sample reply for %u edge types, "
                          "the graph has %d", rep.net, sp->net);
    }
    for (int e = 0; e < sp->net; e++) {
        const net_sample_et *x = &rep.e[e];
        struct spet *o = &sp->et[e];
        size_t n = (size_t)x->n;

        if (x->nc != sp->ctr[e]) {
            net__sample_rep_free(&rep);
            return net__cfail(p->cn, GKV_EPROTO, "sample reply: %llu counts "
                              "for edge type %d, and %zu seeds were sent",
                              (unsigned long long)x->nc, e, sp->ctr[e]);
        }
        o->n = n;
        o->wide = x->wide;
        o->cnt = col_copy(c, x->cnt, (size_t)x->nc, 0);
        o->nbr = col_copy(c, x->nbr, n, (x->wide & NET_SAMPLE_WIDE_NBR) != 0);
        o->eid = col_copy(c, x->eid, n, (x->wide & NET_SAMPLE_WIDE_EID) != 0);
        if (o->cnt == NULL || o->nbr == NULL || o->eid == NULL) {
            net__sample_rep_free(&rep);
            return net__fail(GKV_ENOMEM, "out of memory for %zu edges", n);
        }
    }
    net__sample_rep_free(&rep);
    return GKV_OK;
}

static const struct part_ops sample_ops = {
    .type = NET_SAMPLE, .enc = penc_sample, .done = done_sample,
};

/* dst[0 .. k) = column[at .. at + k) as int64. */
static void
col_widen(int64_t *dst, const void *col, int wide, size_t at, size_t k)
{
    if (wide) {
        memcpy(dst, (const int64_t *)col + at, k * 8);
    } else {
        const uint32_t *s = (const uint32_t *)col + at;
        for (size_t i = 0; i < k; i++)
            dst[i] = (int64_t)s[i];
    }
}

/* out's three columns for n edges, in the arena (*ap: src, then dst, then
 * eid). */
static gkv_err
edges_alloc(gkv_client *c, gkv_sample_edges *out, size_t n, int64_t **ap)
{
    int64_t *a = net__arena_alloc(c, 3 * n * 8);

    *ap = a;
    if (a == NULL)
        return net__fail(GKV_ENOMEM, "out of memory for %zu edges", n);
    out->src = a;
    out->dst = a + n;
    out->eid = a + 2 * n;
    out->n = n;
    return GKV_OK;
}

/* The block's node lists, room for every neighbour the replies hold;
 * the destination nodes (the hop's seeds) first, marked. */
static gkv_err
relab_begin(gkv_client *c, struct relab *rl, const int64_t *const *seeds,
            const size_t *nseeds, const struct spiece *sp, size_t np, int dir)
{
    int nnt = gkv_pbook_num_ntypes(c->book), net_ = gkv_pbook_num_etypes(c->book);

    for (int t = 0; t < nnt; t++) {
        size_t room = nseeds[t];
        for (int e = 0; e < net_; e++) {
            gkv_etype_info ei;
            gkv_pbook_etype_info(c->book, e, &ei);
            if ((dir == GKV_DIR_IN ? ei.src_ntype : ei.dst_ntype) == t)
                for (size_t k = 0; k < np; k++)
                    room += sp[k].et[e].n;
        }
        if (room > INT32_MAX - 1)
            return net__fail(GKV_EINVAL, "sample_blocks: %zu nodes of type "
                             "%d in one block: too many", room, t);
        if ((rl->ids[t] = net__arena_alloc(c, room * 8)) == NULL)
            return net__fail(GKV_ENOMEM, "out of memory");
    }
    for (int t = 0; t < nnt; t++) {
        int32_t *mk = rl->mk[t];
        for (size_t i = 0; i < nseeds[t]; i++) {
            mk[seeds[t][i]] = (int32_t)i + 1;
            rl->ids[t][i] = seeds[t][i];
        }
        rl->nsrc[t] = nseeds[t];
    }
    return GKV_OK;
}

#define RL_PF 16               /* marker prefetch distance, edges */

/* Edge type e of the block: seed i (destination i) has cnt[i] edges at
 * off[i] in piece which[i]; each neighbour gets its local ID, a new one
 * in order of first appearance. */
static gkv_err
relab_etype(gkv_client *c, struct relab *rl, int e, int dir,
            const struct spiece *sp, size_t ns, const uint32_t *which,
            const size_t *off, const size_t *cnt)
{
    gkv_etype_info ei;
    int nt;
    int64_t nn, *a, *nids;
    int32_t *mk;
    size_t total = 0, k;

    gkv_pbook_etype_info(c->book, e, &ei);
    nt = dir == GKV_DIR_IN ? ei.src_ntype : ei.dst_ntype;
    nn = gkv_pbook_num_nodes(c->book, nt);
    for (size_t i = 0; i < ns; i++)
        total += cnt[i];
    if ((a = net__arena_alloc(c, 3 * total * 8)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory for %zu edges", total);
    mk = rl->mk[nt];
    nids = rl->ids[nt];
    k = rl->nsrc[nt];
    /* the neighbours and edge IDs in block order (neighbours checked),
     * then their local IDs: the markers are random accesses, prefetched
     * RL_PF edges ahead */
    for (size_t i = 0, j = 0; i < ns; i++) {
        const struct spet *x = &sp[which[i]].et[e];

        col_widen(a + j, x->nbr, (x->wide & NET_SAMPLE_WIDE_NBR) != 0,
                  off[i], cnt[i]);
        col_widen(a + 2 * total + j, x->eid,
                  (x->wide & NET_SAMPLE_WIDE_EID) != 0, off[i], cnt[i]);
        for (size_t q = 0; q < cnt[i]; q++, j++) {
            if (a[j] < 0 || a[j] >= nn)
                return net__fail(GKV_EPROTO, "sample_blocks: a server sent "
                                 "neighbour %lld for edge type %d, and node "
                                 "type %d has %lld nodes", (long long)a[j], e,
                                 nt, (long long)nn);
            a[total + j] = (int64_t)i;
        }
    }
    for (size_t j = 0; j < total; j++) {
        int64_t v = a[j];
        int32_t l;

        if (j + RL_PF < total)
            __builtin_prefetch(&mk[a[j + RL_PF]], 1);
        if ((l = mk[v]) == 0) {
            nids[k] = v;
            l = (int32_t)++k;
            mk[v] = l;
        }
        a[j] = l - 1;
    }
    rl->nsrc[nt] = k;
    rl->be[e].src = a;
    rl->be[e].dst = a + total;
    rl->be[e].eid = a + 2 * total;
    rl->be[e].n = total;
    return GKV_OK;
}

/* Checks the arguments of a sampling call. */
gkv_err
net__sample_args(gkv_client *c, const char *what, const int64_t *const *seeds,
                 const size_t *nseeds, const int *fan, int nfan, int nlayers,
                 const gkv_sample_opts *o)
{
    int nnt, net_;
    gkv_err rc;

    if ((rc = net__need_book(c, what)) != GKV_OK)
        return rc;
    nnt = gkv_pbook_num_ntypes(c->book);
    net_ = gkv_pbook_num_etypes(c->book);
    if (seeds == NULL || nseeds == NULL || fan == NULL)
        return net__fail(GKV_EINVAL, "%s: seeds, nseeds or fanouts is NULL",
                         what);
    for (int t = 0; t < nnt; t++)
        if (nseeds[t] > 0 && seeds[t] == NULL)
            return net__fail(GKV_EINVAL, "%s: seeds[%d] is NULL with "
                             "nseeds[%d] = %zu", what, t, t, nseeds[t]);
    if (nfan != 1 && nfan != net_)
        return net__fail(GKV_EINVAL, "%s: nfan %d is neither 1 nor the number "
                         "of edge types (%d)", what, nfan, net_);
    for (int i = 0; i < nlayers * nfan; i++)
        if (fan[i] < -1)
            return net__fail(GKV_EINVAL, "%s: fanout[%d] = %d: a fanout is -1 "
                             "(all) or >= 0", what, i, fan[i]);
    if (o != NULL) {
        if (o->dir != GKV_DIR_IN && o->dir != GKV_DIR_OUT)
            return net__fail(GKV_EINVAL, "%s: direction %d", what, o->dir);
        if (o->flags & ~(GKV_SAMPLE_REPLACE | GKV_SAMPLE_WEIGHTED))
            return net__fail(GKV_EINVAL, "%s: flags 0x%x have unknown bits",
                             what, o->flags);
        /* the rules of in-process sampling (graph/sample.c, graph__opts_prep):
         * GKV_SAMPLE_WEIGHTED with an edge_w array of any entries */
        if ((o->flags & GKV_SAMPLE_WEIGHTED) && o->edge_w != NULL)
            return net__fail(GKV_EINVAL, "%s: GKV_SAMPLE_WEIGHTED and "
                             "edge_w are both given; choose one source of "
                             "weights", what);
        if (o->edge_w != NULL && o->edge_w_len == NULL)
            return net__fail(GKV_EINVAL, "%s: edge_w is given without "
                             "edge_w_len", what);
        for (int e = 0; o->edge_w != NULL && e < net_; e++) {
            if (o->edge_w[e] == NULL)
                continue;
            if (o->edge_w_len[e] < 0)
                return net__fail(GKV_EINVAL, "%s: edge_w_len[%d] = %lld is "
                                 "negative", what, e,
                                 (long long)o->edge_w_len[e]);
            if (o->edge_w_lo != NULL && o->edge_w_lo[e] < 0)
                return net__fail(GKV_EINVAL, "%s: edge_w_lo[%d] = %lld is "
                                 "negative", what, e,
                                 (long long)o->edge_w_lo[e]);
            if (o->edge_w_feat != NULL && o->edge_w_feat[e] != NULL)
                return net__fail(GKV_EINVAL, "%s: edge type %d has both an "
                                 "edge_w array and edge_w_feat ('%s'); "
                                 "choose one source of weights", what, e,
                                 o->edge_w_feat[e]);
        }
        for (int e = 0; o->edge_w_feat != NULL && e < net_; e++) {
            const char *fn = o->edge_w_feat[e], *canon, *why;
            if (fn == NULL)
                continue;
            canon = gkv_pbook_etype_name(c->book, e);
            if ((why = net__feat_name_bad(fn, strlen(fn))) != NULL)
                return net__fail(GKV_EINVAL, "%s: edge_w_feat[%d] ('%.300s', "
                                 "%zu bytes) has %s: a feature name is 1 to "
                                 "%d bytes of printable ASCII without spaces "
                                 "or '#'", what, e, fn, strlen(fn), why,
                                 GKV_NAME_MAX);
            if (strlen("edge//") + strlen(canon) + strlen(fn) > GKV_NAME_MAX)
                return net__fail(GKV_EINVAL, "%s: edge_w_feat[%d]: tensor "
                                 "'edge/%s/%.300s' would be longer than a "
                                 "tensor name may be (%d bytes)", what, e,
                                 canon, fn, GKV_NAME_MAX);
            if (o->flags & GKV_SAMPLE_WEIGHTED)
                return net__fail(GKV_EINVAL, "%s: edge_w_feat[%d] ('%s') "
                                 "and GKV_SAMPLE_WEIGHTED both give weights; "
                                 "choose one source of weights", what, e, fn);
        }
        /* as in-process: exclude_n alone, or exclude[e] NULL with
         * exclude_n[e] > 0, excludes nothing (net__ex_count) */
        if (o->exclude != NULL && o->exclude_n == NULL)
            return net__fail(GKV_EINVAL, "%s: exclude is given without "
                             "exclude_n", what);
    }
    return GKV_OK;
}

/* The pieces a hop sends to a machine with cnt seeds: net__gpieces(), times
 * mult after answers that would not fit (at most one a seed). */
static size_t
hop_pieces(gkv_client *c, size_t cnt, size_t mult)
{
    size_t k = net__gpieces(c, cnt, GMAX_IDS);

    return k > cnt / mult ? cnt : k * mult;
}

/* After a failed exchange of a hop's pieces: 1 when some failed only
 * because their answer would exceed a server's message limit (NET_F_SPLIT)
 * and their machine's seeds can still be cut finer (mult[m] doubled);
 * 0 when the error stands. */
static int
hop_split(gkv_client *c, const struct part *parts, size_t np,
          const size_t *mtot, size_t *mult)
{
    int more = 0;

    for (size_t i = 0; i < np; i++) {
        size_t m = (size_t)(parts[i].cn - c->cn) / c->nserv;
        if (parts[i].rc == GKV_OK)
            continue;
        if (!(parts[i].rflags & NET_F_SPLIT) ||
            hop_pieces(c, mtot[m], mult[m]) >= mtot[m])
            return 0;
    }
    for (size_t m = 0; m < c->nmach; m++)
        for (size_t i = 0; i < np; i++)
            if (parts[i].rc != GKV_OK &&
                (size_t)(parts[i].cn - c->cn) / c->nserv == m) {
                mult[m] *= 2;
                more = 1;
                break;
            }
    return more;
}

static void
pieces_free(struct spiece *sp, size_t np, int nnt)
{
    for (size_t k = 0; sp != NULL && k < np; k++) {
        for (int t = 0; sp[k].seeds != NULL && t < nnt; t++)
            gkv__free(sp[k].seeds[t]);
        gkv__free(sp[k].seeds);
        gkv__free(sp[k].nseeds);
        gkv__free((void *)sp[k].pos);
        gkv__free(sp[k].ctr);
        gkv__free(sp[k].et);
        /* piece_wpos allocates nwc, nw, wc and w in turn and may stop
         * after any of them */
        for (int e = 0; sp[k].wc != NULL && e < sp[k].net; e++)
            gkv__free(sp[k].wc[e]);
        for (int e = 0; sp[k].w != NULL && e < sp[k].net; e++)
            gkv__free(sp[k].w[e]);
        gkv__free(sp[k].nwc);
        gkv__free(sp[k].nw);
        gkv__free(sp[k].wc);
        gkv__free(sp[k].w);
    }
}

/* Drops a hop's pieces and parts, to cut its seeds again. */
static void
pieces_reset(struct spiece **sp, struct part **parts, size_t *np, int nnt)
{
    pieces_free(*sp, *np, nnt);
    gkv__free(*sp);
    gkv__free(*parts);
    *sp = NULL;
    *parts = NULL;
    *np = 0;
}

/* A hop's seeds of each of the nnt types, each once in order of first
 * appearance: seeds_in itself when 'known' distinct (or empty), else a
 * copy in useeds[t] with smap[t] mapping each input to its place (both
 * the caller's to free). */
gkv_err
net__seeds_distinct(int nnt, int known, const int64_t *const *seeds_in,
                    const size_t *nseeds_in, const int64_t **seeds,
                    size_t *nseeds, int64_t **useeds, size_t **smap)
{
    gkv_err rc;

    for (int t = 0; t < nnt; t++) {
        if (known || nseeds_in[t] == 0) {
            seeds[t] = seeds_in[t];
            nseeds[t] = nseeds_in[t];
        } else if ((rc = net__dedup(seeds_in[t], nseeds_in[t], &useeds[t],
                                    &nseeds[t], &smap[t])) != GKV_OK) {
            return rc;
        } else {
            seeds[t] = useeds[t];
        }
    }
    return GKV_OK;
}

/* The payload bytes of SAMPLE request e: the encoder's measuring pass,
 * so that no copy of its layout can drift from it. */
static size_t
sample_req_bytes(const net_sample_enc *e)
{
    net_wr m = {0};

    net__enc_sample_req(&m, e);
    return m.off;
}

/* Piece s's weights by position (NET_SAMPLE_F_WPOS) from wp, indexed by
 * the hop's distinct seeds: per edge type with weights, the counts and
 * weights of the piece's seeds of the centre type. */
static gkv_err
piece_wpos(gkv_client *c, struct spiece *s, const graph__wpos *wp, int dir)
{
    int net_ = s->net;

    if ((s->nwc = gkv__calloc((size_t)net_, sizeof *s->nwc)) == NULL ||
        (s->nw = gkv__calloc((size_t)net_, sizeof *s->nw)) == NULL ||
        (s->wc = gkv__calloc((size_t)net_, sizeof *s->wc)) == NULL ||
        (s->w = gkv__calloc((size_t)net_, sizeof *s->w)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    for (int e = 0; e < net_; e++) {
        gkv_etype_info ei;
        int ct;
        size_t nc, tot = 0;

        if (wp[e].off == NULL)
            continue;
        gkv_pbook_etype_info(c->book, e, &ei);
        ct = dir == GKV_DIR_IN ? ei.dst_ntype : ei.src_ntype;
        nc = s->nseeds[ct];
        for (size_t q = 0; q < nc; q++) {
            size_t i = s->pos[ct][q];
            tot += (size_t)(wp[e].off[i + 1] - wp[e].off[i]);
        }
        if ((s->wc[e] = gkv__malloc(4 * nc + 4)) == NULL ||
            (s->w[e] = gkv__malloc(4 * tot + 4)) == NULL)
            return net__fail(GKV_ENOMEM, "out of memory");
        s->nwc[e] = nc;
        s->nw[e] = tot;
        tot = 0;
        for (size_t q = 0; q < nc; q++) {
            size_t i = s->pos[ct][q];
            int64_t a = wp[e].off[i], k = wp[e].off[i + 1] - a;
            s->wc[e][q] = (uint32_t)k;
            memcpy(s->w[e] + tot, wp[e].w + a, (size_t)k * 4);
            tot += (size_t)k;
        }
    }
    s->enc.flags |= NET_SAMPLE_F_WPOS;
    s->enc.nwc = s->nwc;
    s->enc.nw = s->nw;
    s->enc.wc = (const uint32_t *const *)s->wc;
    s->enc.w = (const float *const *)s->w;
    return GKV_OK;
}

/* The fields of a hop's SAMPLE requests that every piece shares (all but
 * the seeds and the weights by position). */
static void
sample_enc_init(net_sample_enc *x, const gkv_sample_opts *o, int layer,
                int nnt, int net_, int nfan, const int *fan)
{
    memset(x, 0, sizeof *x);
    x->layer = (uint32_t)layer;
    x->dir = (uint32_t)o->dir;
    x->flags = o->flags;
    x->nnt = (uint32_t)nnt;
    x->net = (uint32_t)net_;
    x->nfan = (uint32_t)nfan;
    x->seed = o->seed;
    x->fanout = fan;
    x->ex = o->exclude;
    x->nex = o->exclude_n;
    for (int e = 0; o->edge_w_feat != NULL && e < net_; e++)
        if (o->edge_w_feat[e] != NULL) {
            x->flags |= NET_SAMPLE_F_FEAT;
            x->feat = o->edge_w_feat;
        }
}

/* Whether the part of a SAMPLE request every piece to machine m carries
 * (the options and the exclusions, sent in full with each piece) fits the
 * message limit 'cap' of m's servers; GKV_EINVAL, naming its size, when
 * no cut of the seeds could make a piece fit. */
static gkv_err
sample_fixed_fits(const gkv_sample_opts *o, int layer, int nnt, int net_,
                  int nfan, const int *fan, size_t m, size_t cap)
{
    net_sample_enc x;
    size_t *zero = gkv__calloc((size_t)nnt + 1, sizeof *zero), nex = 0, b;

    if (zero == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    sample_enc_init(&x, o, layer, nnt, net_, nfan, fan);
    x.nseeds = zero;            /* no seeds: what every piece carries */
    b = sample_req_bytes(&x);
    gkv__free(zero);
    if (b <= cap)
        return GKV_OK;
    for (int e = 0; e < net_; e++)
        nex += net__ex_count(o, e);
    return net__fail(GKV_EINVAL, "sample: the %zu excluded edges (%zu "
                     "bytes) go whole with every request, which takes %zu "
                     "bytes before any seed, and a request to machine %zu "
                     "may carry %zu (the lower of its servers' --max-msg "
                     "and the client's max_msg, less room for headers): "
                     "exclude fewer edges per call, or raise the limit",
                     nex, 8 * nex, b, m, cap);
}

/* ---- one hop ---- */

/* One hop's state (net__hop_once): its distinct seeds, where they go, and the
 * pieces (SAMPLE messages) of the current cut. */
struct hop {
    int nnt, net_;
    size_t nm;                     /* machines */
    const gkv_sample_opts *o;
    const int *fan;
    int nfan, layer;
    const graph__wpos *wp;         /* NULL, or weights by position */
    /* each seed once (the answer is copied to its repeats): seeds[t] is
     * seeds_in[t] or useeds[t], and smap[t] maps each input to its place
     * (NULL: the identity) */
    const int64_t **seeds;
    int64_t **useeds;
    size_t *nseeds, **smap;
    /* machine m's seeds of type t: count[t * nm + m] of them, at
     * pos[t][start[t * nm + m] ..) */
    size_t *count, *start, **pos;
    size_t *mtot;                  /* [nm] its seeds of all types */
    size_t *mult;                  /* [nm] its share cut this much finer */
    size_t nall;                   /* the most seeds of one type */
    size_t nex;                    /* excluded edges, all types */
    struct spiece *sp;             /* the pieces of the current cut */
    struct part *parts;            /* their parts */
    size_t np;
};

static void
hop_free(struct hop *h)
{
    pieces_free(h->sp, h->np, h->nnt);
    gkv__free(h->mult);
    for (int t = 0; h->pos != NULL && t < h->nnt; t++)
        gkv__free(h->pos[t]);
    /* useeds and smap are allocated one after the other: either may be
     * missing */
    for (int t = 0; h->useeds != NULL && t < h->nnt; t++)
        gkv__free(h->useeds[t]);
    for (int t = 0; h->smap != NULL && t < h->nnt; t++)
        gkv__free(h->smap[t]);
    gkv__free(h->useeds);
    gkv__free((void *)h->seeds);
    gkv__free(h->nseeds);
    gkv__free(h->smap);
    gkv__free(h->pos);
    gkv__free(h->sp);
    gkv__free(h->parts);
    gkv__free(h->count);
    gkv__free(h->start);
    gkv__free(h->mtot);
}

/* The hop's distinct seeds ('known': the caller says they are). */
static gkv_err
hop_seeds(struct hop *h, const int64_t *const *seeds_in,
          const size_t *nseeds_in, int known)
{
    size_t nt = (size_t)h->nnt;

    if ((h->seeds = gkv__calloc(nt, sizeof *h->seeds)) == NULL ||
        (h->useeds = gkv__calloc(nt, sizeof *h->useeds)) == NULL ||
        (h->nseeds = gkv__calloc(nt, sizeof *h->nseeds)) == NULL ||
        (h->smap = gkv__calloc(nt, sizeof *h->smap)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    return net__seeds_distinct(h->nnt, known, seeds_in, nseeds_in, h->seeds,
                               h->nseeds, h->useeds, h->smap);
}

/* Which machine owns each distinct seed; fails when the exclusions alone
 * are more than a machine's servers take. */
static gkv_err
hop_route(gkv_client *c, struct hop *h)
{
    size_t nm = h->nm, nt = (size_t)h->nnt;
    gkv_err rc;

    if ((h->count = gkv__calloc(nt * nm, sizeof *h->count)) == NULL ||
        (h->start = gkv__calloc(nt * nm, sizeof *h->start)) == NULL ||
        (h->pos = gkv__calloc(nt, sizeof *h->pos)) == NULL ||
        (h->mtot = gkv__calloc(nm, sizeof *h->mtot)) == NULL ||
        (h->mult = gkv__calloc(nm, sizeof *h->mult)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    for (size_t m = 0; m < nm; m++)
        h->mult[m] = 1;
    for (int t = 0; t < h->nnt; t++) {
        char what[64];
        if (h->nseeds[t] == 0)
            continue;
        snprintf(what, sizeof what, "sample: seeds of node type %d", t);
        if ((rc = net__graph_route(c, what, t, 0, h->seeds[t], h->nseeds[t],
                                   h->count + (size_t)t * nm,
                                   h->start + (size_t)t * nm,
                                   &h->pos[t])) != GKV_OK)
            return rc;
        for (size_t m = 0; m < nm; m++)
            h->mtot[m] += h->count[(size_t)t * nm + m];
        if (h->nseeds[t] > h->nall)
            h->nall = h->nseeds[t];
    }
    for (int e = 0; e < h->net_; e++)
        h->nex += net__ex_count(h->o, e);
    /* the exclusions go whole with every piece: when they alone are more
     * than a server takes, no cut of the seeds helps (and the request
     * would be dropped unanswered, a timeout) */
    for (size_t m = 0; m < nm; m++)
        if (h->mtot[m] > 0 &&
            (rc = sample_fixed_fits(h->o, h->layer, h->nnt, h->net_, h->nfan,
                                    h->fan, m, net__part_cap(c, m,
                                                             UINT64_MAX)))
            != GKV_OK)
            return rc;
    return GKV_OK;
}

/* Piece j of the k pieces of machine m's seeds, at h->sp[h->np] (counted
 * at once, so that hop_free frees what it holds): its seeds of each type
 * and its request; *out NULL when it has no seeds (it is not kept). */
static gkv_err
piece_fill(gkv_client *c, struct hop *h, size_t m, size_t j, size_t k,
           struct spiece **out)
{
    struct spiece *s = &h->sp[h->np++];
    size_t nt = (size_t)h->nnt, ne = (size_t)h->net_, any = 0;
    const gkv_sample_opts *o = h->o;

    *out = NULL;
    s->net = h->net_;
    if ((s->seeds = gkv__calloc(nt, sizeof *s->seeds)) == NULL ||
        (s->nseeds = gkv__calloc(nt, sizeof *s->nseeds)) == NULL ||
        (s->pos = gkv__calloc(nt, sizeof *s->pos)) == NULL ||
        (s->ctr = gkv__calloc(ne, sizeof *s->ctr)) == NULL ||
        (s->et = gkv__calloc(ne, sizeof *s->et)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    for (size_t t = 0; t < nt; t++) {
        size_t ct = h->count[t * h->nm + m];
        size_t a = ct * j / k, b = ct * (j + 1) / k;
        const size_t *ps = h->pos[t] != NULL ?
            h->pos[t] + h->start[t * h->nm + m] + a : NULL;

        if (a == b)
            continue;
        if ((s->seeds[t] = gkv__malloc((b - a) * 8)) == NULL)
            return net__fail(GKV_ENOMEM, "out of memory");
        for (size_t q = 0; q < b - a; q++)
            s->seeds[t][q] = h->seeds[t][ps[q]];
        s->nseeds[t] = b - a;
        s->pos[t] = ps;
        any += b - a;
    }
    if (any == 0) {
        pieces_free(s, 1, h->nnt);
        memset(s, 0, sizeof *s);
        h->np--;
        return GKV_OK;
    }
    for (int e = 0; e < h->net_; e++) {
        gkv_etype_info ei;
        gkv_pbook_etype_info(c->book, e, &ei);
        s->ctr[e] = s->nseeds[o->dir == GKV_DIR_IN ? ei.dst_ntype :
                              ei.src_ntype];
    }
    sample_enc_init(&s->enc, o, h->layer, h->nnt, h->net_, h->nfan, h->fan);
    s->enc.seeds = (const int64_t *const *)s->seeds;
    s->enc.nseeds = s->nseeds;
    *out = s;
    return h->wp != NULL ? piece_wpos(c, s, h->wp, o->dir) : GKV_OK;
}

/* Cuts each machine's seeds into hop_pieces() pieces, a part each. *again:
 * a piece was more than a message to its server carries, so its machine's
 * seeds are now cut finer (mult) and the pieces dropped: call again. */
static gkv_err
hop_cut(gkv_client *c, struct hop *h, int *again)
{
    size_t maxp = 0;
    gkv_err rc;

    *again = 0;
    h->np = 0;
    for (size_t m = 0; m < h->nm; m++)
        if (h->mtot[m] > 0)
            maxp += hop_pieces(c, h->mtot[m], h->mult[m]);
    if ((h->sp = gkv__calloc(maxp + 1, sizeof *h->sp)) == NULL ||
        (h->parts = gkv__calloc(maxp + 1, sizeof *h->parts)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    for (size_t m = 0; m < h->nm; m++) {
        size_t k, base, cap;

        if (h->mtot[m] == 0)
            continue;
        k = hop_pieces(c, h->mtot[m], h->mult[m]);
        base = c->rr++;
        cap = net__part_cap(c, m, UINT64_MAX);
        for (size_t j = 0; j < k; j++) {
            struct spiece *s;
            struct part *p;
            size_t bytes;

            if ((rc = piece_fill(c, h, m, j, k, &s)) != GKV_OK)
                return rc;
            if (s == NULL)
                continue;
            if ((bytes = sample_req_bytes(&s->enc)) > cap) {
                /* more seeds (or their weights) than a message to the
                 * server carries, beside the exclusions every piece
                 * repeats: nanomsg would drop it unanswered. Cut this
                 * machine's seeds finer, while they can be. */
                if (hop_pieces(c, h->mtot[m], h->mult[m]) >= h->mtot[m])
                    return net__fail(GKV_EINVAL, "sample: a request of "
                                     "one seed (of each node type)%s takes "
                                     "%zu bytes with the options and %zu "
                                     "excluded edges, and a request to "
                                     "machine %zu may carry %zu bytes",
                                     h->wp == NULL ? "" :
                                     h->o->dir == GKV_DIR_IN ?
                                     " and the weights of its in-edges" :
                                     " and the weights of its out-edges",
                                     bytes, h->nex, m, cap);
                h->mult[m] *= 2;
                pieces_reset(&h->sp, &h->parts, &h->np, h->nnt);
                *again = 1;
                return GKV_OK;
            }
            p = &h->parts[h->np - 1];
            p->cn = &c->cn[m * c->nserv + (base + j) % c->nserv];
            p->ops = &sample_ops;
            p->arg = s;
        }
    }
    return GKV_OK;
}

/* Where each distinct seed of the centre type ct has its edges of type
 * e in the replies: cnt[i] edges at off[i] in piece which[i]. */
static void
hop_where(const struct hop *h, int e, int ct, size_t *cnt, size_t *off,
          uint32_t *which)
{
    for (size_t k = 0; k < h->np; k++) {
        const struct spiece *s = &h->sp[k];
        size_t at = 0;

        for (size_t j = 0; j < s->nseeds[ct]; j++) {
            size_t i = s->pos[ct][j];
            which[i] = (uint32_t)k;
            off[i] = at;
            cnt[i] = s->et[e].cnt[j];
            at += cnt[i];
        }
    }
}

/* Edge type e of a hop without relabelling into *out (arena): the edges
 * of seeds_in[0 .. ns) (centre type ct), seed by seed in the request's
 * order, repeats included. */
static gkv_err
hop_edges(gkv_client *c, const struct hop *h, int e, int ct,
          const int64_t *seeds_in, size_t ns, const size_t *cnt,
          const size_t *off, const uint32_t *which, gkv_sample_edges *out)
{
    const size_t *smap = h->smap[ct];
    size_t total = 0;
    int64_t *ea;
    gkv_err rc;

    for (size_t i = 0; i < ns; i++)
        total += cnt[smap != NULL ? smap[i] : i];
    if ((rc = edges_alloc(c, out, total, &ea)) != GKV_OK)
        return rc;
    for (size_t i = 0, at = 0; i < ns; i++) {
        size_t u = smap != NULL ? smap[i] : i;
        const struct spet *x = &h->sp[which[u]].et[e];
        int64_t *cc = h->o->dir == GKV_DIR_IN ? ea + total : ea;
        int64_t *nb = h->o->dir == GKV_DIR_IN ? ea : ea + total;

        for (size_t q = 0; q < cnt[u]; q++)
            cc[at + q] = seeds_in[i];
        col_widen(nb + at, x->nbr, (x->wide & NET_SAMPLE_WIDE_NBR) != 0,
                  off[u], cnt[u]);
        col_widen(ea + 2 * total + at, x->eid,
                  (x->wide & NET_SAMPLE_WIDE_EID) != 0, off[u], cnt[u]);
        at += cnt[u];
    }
    return GKV_OK;
}

/* The replies merged: per edge type, seed by seed in the request's
 * order, into out, or with rl relabelled into its block. */
static gkv_err
hop_merge(gkv_client *c, const struct hop *h, const int64_t *const *seeds_in,
          const size_t *nseeds_in, struct relab *rl, gkv_sample_edges *out)
{
    size_t *cnt = NULL, *off = NULL;
    uint32_t *which = NULL;
    int dir = h->o->dir;
    gkv_err rc = GKV_OK;

    if ((cnt = gkv__malloc(h->nall * sizeof *cnt + 8)) == NULL ||
        (off = gkv__malloc(h->nall * sizeof *off + 8)) == NULL ||
        (which = gkv__malloc(h->nall * sizeof *which + 8)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    if (rl != NULL && (rc = relab_begin(c, rl, h->seeds, h->nseeds, h->sp,
                                        h->np, dir)) != GKV_OK)
        goto out;
    for (int e = 0; e < h->net_; e++) {
        gkv_etype_info ei;
        int ct;

        gkv_pbook_etype_info(c->book, e, &ei);
        ct = dir == GKV_DIR_IN ? ei.dst_ntype : ei.src_ntype;
        hop_where(h, e, ct, cnt, off, which);
        if (rl != NULL)
            rc = relab_etype(c, rl, e, dir, h->sp, nseeds_in[ct], which, off,
                             cnt);
        else
            rc = hop_edges(c, h, e, ct, seeds_in[ct], nseeds_in[ct], cnt,
                           off, which, &out[e]);
        if (rc != GKV_OK)
            goto out;
    }
out:
    gkv__free(cnt);
    gkv__free(off);
    gkv__free(which);
    return rc;
}

/* One hop through the servers. Without rl: the edges into out[0 .. net)
 * (arena memory), repeated seeds asked once. With rl (the seeds distinct,
 * out unused): relabelled into rl's block. wp: NULL, or per edge type
 * weights by position, indexed by the hop's distinct seeds (in order of
 * first appearance), sent with each piece. */
gkv_err
net__hop_once(gkv_client *c, const int64_t *const *seeds_in,
              const size_t *nseeds_in, const int *fan, int nfan, int layer,
              const gkv_sample_opts *o, struct relab *rl,
              gkv_sample_edges *out, const graph__wpos *wp)
{
    static const gkv_sample_opts zero;
    struct hop h;
    int again;
    gkv_err rc;

    memset(&h, 0, sizeof h);
    h.nnt = gkv_pbook_num_ntypes(c->book);
    h.net_ = gkv_pbook_num_etypes(c->book);
    h.nm = c->nmach;
    h.o = o != NULL ? o : &zero;
    h.fan = fan;
    h.nfan = nfan;
    h.layer = layer;
    h.wp = wp;
    if (rl == NULL)
        memset(out, 0, (size_t)h.net_ * sizeof *out);
    if ((rc = hop_seeds(&h, seeds_in, nseeds_in, rl != NULL)) != GKV_OK ||
        (rc = hop_route(c, &h)) != GKV_OK)
        goto out;
    for (;;) {
        if ((rc = hop_cut(c, &h, &again)) != GKV_OK)
            goto out;
        if (again)
            continue;
        rc = net__exchange(c, h.parts, h.np,
                           net__deadline((uint64_t)c->timeout_ms));
        if (rc == GKV_OK || !hop_split(c, h.parts, h.np, h.mtot, h.mult))
            break;
        /* a server's answer would exceed its message limit: the same
         * hop in more, smaller pieces (a seed's picks do not depend on
         * the other seeds of its request) */
        pieces_reset(&h.sp, &h.parts, &h.np, h.nnt);
        net__clear();
    }
    if (rc == GKV_OK)
        rc = hop_merge(c, &h, seeds_in, nseeds_in, rl, out);
out:
    hop_free(&h);
    if (rc != GKV_OK && rl == NULL)
        memset(out, 0, (size_t)h.net_ * sizeof *out);
    return rc;
}

gkv_err
gkv_client_sample_neighbors(gkv_client *c, const int64_t *const *seeds,
                            const size_t *nseeds, const int *fanout, int nfan,
                            int layer, const gkv_sample_opts *opts,
                            gkv_sample_edges *out)
{
    gkv_sample_opts obuf;
    void *own = NULL;
    gkv_err rc;

    net__clear();
    if (c == NULL || out == NULL)
        return net__fail(GKV_EINVAL, "sample_neighbors: no client or no out");
    pthread_mutex_lock(&c->mu);
    /* as in-process: out is cleared on any failure, the checks' too */
    if (c->book != NULL)
        memset(out, 0, (size_t)gkv_pbook_num_etypes(c->book) * sizeof *out);
    if ((rc = net__sample_args(c, "sample_neighbors", seeds, nseeds, fanout,
                               nfan, 1, opts)) == GKV_OK && layer < 0)
        rc = net__fail(GKV_EINVAL, "sample_neighbors: layer %d", layer);
    if (rc == GKV_OK &&
        (rc = net__inputs_own(c, &seeds, nseeds, &opts, &obuf,
                              &own)) == GKV_OK) {
        net__arena_reset(c);
        rc = net__sample_hop(c, seeds, nseeds, fanout, nfan, layer, opts, NULL,
                             out);
    }
    gkv__free(own);
    pthread_mutex_unlock(&c->mu);
    return rc;
}
