/* client_batch.c - the batch family: SAMPLE_BATCH. A whole mini-batch in
 * one request (gkv_client_sample_batch) to the server owning the most
 * seeds, which samples every hop and gathers the rows (server_batch.c);
 * the reply decoded into the client's arena (client_arena.c), where it
 * lives until the next sampling call. Also the timeout a server sets on
 * its peer client. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include "base/base.h"
#include "net/gkv_net.h"
#include "net/wire.h"
#include "net/client_int.h"

/* One call: the request, and where the reply goes. */
struct bcall {
    net_batch_enc enc;
    net_tref *tref;                /* the request's tensors */
    int nnt, net, dir;
    const gkv_batch_spec *spec;
    gkv_batch_out *out;
};

static void
penc_batch(net_wr *w, const struct part *p)
{
    const struct bcall *bc = p->arg;

    net__enc_batch_req(w, &bc->enc);
}

/* A column of n IDs (u32, or i64 when wide) into the arena as int64;
 * with lim > 0 each must be below lim, else -1. NULL: out of memory. */
static int64_t *
col_take(gkv_client *c, const unsigned char *p, size_t n, int wide,
         uint64_t lim, int *bad)
{
    int64_t *d = net__arena_alloc(c, n * 8);

    if (d == NULL)
        return NULL;
    if (wide) {
        if (n > 0)
            memcpy(d, p, n * 8);
    } else {
        for (size_t i = 0; i < n; i++) {
            uint32_t v;
            memcpy(&v, p + 4 * i, 4);
            d[i] = v;
        }
    }
    for (size_t i = 0; lim > 0 && i < n; i++)
        if ((uint64_t)d[i] >= lim)
            *bad = 1;
    return d;
}

/* Block i of the reply into out->blocks[i] (arena memory); the local IDs
 * checked against the node lists. */
static gkv_err
block_take(gkv_client *c, struct part *p, const net_batch_rep *rep, int i)
{
    struct bcall *bc = p->arg;
    gkv_block_nodes *bn = net__arena_alloc(c, (size_t)bc->nnt * sizeof *bn);
    gkv_sample_edges *be = net__arena_alloc(c, (size_t)bc->net * sizeof *be);
    int bad = 0;

    if (bn == NULL || be == NULL)
        return net__fail(GKV_ENOMEM, "out of memory for a batch");
    for (int t = 0; t < bc->nnt; t++) {
        const net_bnodes *x = &rep->nodes[(size_t)i * (size_t)bc->nnt + t];

        bn[t].num_src = (size_t)x->num_src;
        bn[t].num_dst = (size_t)x->num_dst;
        if ((bn[t].ids = col_take(c, x->ids, bn[t].num_src, x->wide != 0, 0,
                                  &bad)) == NULL)
            return net__fail(GKV_ENOMEM, "out of memory for a batch");
    }
    for (int e = 0; e < bc->net; e++) {
        const net_bedges *x = &rep->edges[(size_t)i * (size_t)bc->net + e];
        size_t n = (size_t)x->n;
        gkv_etype_info ei;
        int nt, ct;

        gkv_pbook_etype_info(c->book, e, &ei);
        nt = bc->dir == GKV_DIR_IN ? ei.src_ntype : ei.dst_ntype;
        ct = bc->dir == GKV_DIR_IN ? ei.dst_ntype : ei.src_ntype;
        be[e].n = n;
        be[e].src = col_take(c, x->src, n, 0, bn[nt].num_src, &bad);
        be[e].dst = col_take(c, x->dst, n, 0, bn[ct].num_dst, &bad);
        be[e].eid = col_take(c, x->eid, n, x->wide != 0, 0, &bad);
        if (be[e].src == NULL || be[e].dst == NULL || be[e].eid == NULL)
            return net__fail(GKV_ENOMEM, "out of memory for a batch");
        /* (a limit of 0 is none: an empty list takes no edge) */
        if (n > 0 && (bn[nt].num_src == 0 || bn[ct].num_dst == 0))
            bad = 1;
    }
    if (bad)
        return net__cfail(p->cn, GKV_EPROTO, "sample_batch reply: block %d "
                          "has an edge whose local ID is outside its node "
                          "list", i);
    bc->out->blocks[i].num_ntypes = bc->nnt;
    bc->out->blocks[i].num_etypes = bc->net;
    bc->out->blocks[i].nodes = bn;
    bc->out->blocks[i].edges = be;
    return GKV_OK;
}

/* The blocks chain: block i's destination nodes are block i + 1's source
 * nodes (their IDs, in order), and the last block's are the seeds sent;
 * a server's batch that does not is refused before it reaches the user. */
static gkv_err
blocks_chain(struct part *p)
{
    struct bcall *bc = p->arg;
    const gkv_block *blk = bc->out->blocks;
    int nl = bc->spec->nlayers;

    for (int i = 0; i < nl; i++)
        for (int t = 0; t < bc->nnt; t++) {
            const gkv_block_nodes *x = &blk[i].nodes[t];
            const int64_t *want;
            size_t n;

            if (i + 1 < nl) {
                n = blk[i + 1].nodes[t].num_src;
                want = blk[i + 1].nodes[t].ids;
            } else {
                n = bc->enc.nseeds[t];
                want = bc->enc.seeds[t];
            }
            if (x->num_dst != n || x->num_dst > x->num_src ||
                (n > 0 && memcmp(x->ids, want, n * 8) != 0))
                return net__cfail(p->cn, GKV_EPROTO, "sample_batch reply: "
                                  "block %d's destination nodes of type %d "
                                  "are not %s", i, t, i + 1 < nl ?
                                  "the next block's source nodes" :
                                  "the seeds");
        }
    return GKV_OK;
}

/* The rows of entry k (rep->rows[k]: 'want' of them) into the arena. */
static gkv_err
rows_take(gkv_client *c, struct part *p, const net_rows *x, size_t want,
          const void **dst, size_t *bytes)
{
    size_t len = (size_t)(x->n * x->row_bytes);
    void *d;

    if (x->n != want)
        return net__cfail(p->cn, GKV_EPROTO, "sample_batch reply: %llu rows "
                          "where %zu were asked", (unsigned long long)x->n,
                          want);
    if ((d = net__arena_alloc(c, len)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory for %zu bytes of rows",
                         len);
    if (len > 0)
        memcpy(d, x->p, len);
    *dst = d;
    *bytes = len;
    return GKV_OK;
}

static gkv_err
done_batch(gkv_client *c, struct part *p, net_rd *rd)
{
    struct bcall *bc = p->arg;
    const gkv_batch_spec *sp = bc->spec;
    gkv_batch_out *out = bc->out;
    net_batch_rep rep;
    size_t k = 0;
    gkv_err rc = GKV_OK;
    int d = net__dec_batch_rep(rd, &rep);

    if (d == NET_DEC_NOMEM)
        return net__fail(GKV_ENOMEM, "out of memory for a batch reply of %zu "
                         "bytes", rd->len);
    if (d != 0)
        return net__cfail(p->cn, GKV_EPROTO, "malformed sample_batch reply: "
                          "%s", rd->why);
    if (rep.nlayers != (uint32_t)sp->nlayers ||
        rep.nnt != (uint32_t)bc->nnt || rep.net != (uint32_t)bc->net ||
        rep.nfeats != (uint32_t)sp->nfeats ||
        rep.has_label != (sp->label != NULL) ||
        rep.nefeats != (uint32_t)sp->nefeats) {
        rc = net__cfail(p->cn, GKV_EPROTO, "sample_batch reply of %u layers, "
                        "%u node types, %u edge types and %u + %u + %u "
                        "tensors does not answer the request", rep.nlayers,
                        rep.nnt, rep.net, rep.nfeats, rep.has_label,
                        rep.nefeats);
        goto out;
    }
    for (int i = 0; i < sp->nlayers && rc == GKV_OK; i++)
        rc = block_take(c, p, &rep, i);
    if (rc == GKV_OK)
        rc = blocks_chain(p);
    for (int f = 0; f < sp->nfeats && rc == GKV_OK; f++)
        rc = rows_take(c, p, &rep.rows[k++],
                       out->blocks[0].nodes[sp->feats[f].type].num_src,
                       &out->feat[f], &out->feat_bytes[f]);
    if (sp->label != NULL && rc == GKV_OK)
        rc = rows_take(c, p, &rep.rows[k++], sp->nseeds[sp->label->type],
                       &out->label, &out->label_bytes);
    for (int f = 0; f < sp->nefeats && rc == GKV_OK; f++)
        for (int i = 0; i < sp->nlayers && rc == GKV_OK; i++) {
            size_t at = (size_t)f * (size_t)sp->nlayers + (size_t)i;
            rc = rows_take(c, p, &rep.rows[k++],
                           out->blocks[i].edges[sp->efeats[f].type].n,
                           &out->efeat[at], &out->efeat_bytes[at]);
        }
out:
    net__batch_rep_free(&rep);
    return rc;
}

static const struct part_ops batch_ops = {
    .type = NET_SAMPLE_BATCH, .enc = penc_batch, .done = done_batch,
};

/* Tensors ts[0 .. n) of the spec ('what': "feats", ...), of node types
 * (or edge types when 'edge') below 'ntypes', into tr. */
static gkv_err
trefs_check(const gkv_typed_tensor *ts, int n, const char *what, int ntypes,
            int edge, net_tref *tr)
{
    if (n < 0 || (n > 0 && ts == NULL))
        return net__fail(GKV_EINVAL, "sample_batch: %s: %d tensors%s", what,
                         n, n > 0 ? " and no array" : "");
    for (int i = 0; i < n; i++) {
        size_t len = ts[i].name != NULL ? strlen(ts[i].name) : 0;

        if (len == 0 || len > GKV_NAME_MAX)
            return net__fail(GKV_EINVAL, "sample_batch: %s[%d]: %s", what,
                             i, len == 0 ? "no tensor name" :
                             "a name longer than a tensor's may be");
        if (ts[i].type < 0 || ts[i].type >= ntypes)
            return net__fail(GKV_EINVAL, "sample_batch: %s[%d] ('%s'): %s "
                             "type %d, and the graph has %d", what, i,
                             ts[i].name, edge ? "edge" : "node", ts[i].type,
                             ntypes);
        tr[i].type = ts[i].type;
        tr[i].name = ts[i].name;
    }
    return GKV_OK;
}

/* The checks of a spec that need no server, and its tensors into bc. */
static gkv_err
spec_check(gkv_client *c, const gkv_batch_spec *sp, const gkv_batch_out *out,
           struct bcall *bc)
{
    const gkv_sample_opts *o = sp->opts;
    size_t nt;
    gkv_err rc;

    if (sp->nlayers < 1 || (unsigned)sp->nlayers > NET_BATCH_LAYERS_MAX)
        return net__fail(GKV_EINVAL, "sample_batch: nlayers %d: 1 to %u",
                         sp->nlayers, NET_BATCH_LAYERS_MAX);
    if ((rc = net__sample_args(c, "sample_batch", sp->seeds, sp->nseeds,
                               sp->fanouts, sp->nfan, sp->nlayers,
                               o)) != GKV_OK)
        return rc;
    if (o != NULL && (o->edge_w != NULL || o->exclude != NULL ||
                      o->edge_w_feat != NULL))
        return net__fail(GKV_EINVAL, "sample_batch: opts->%s is given; a "
                         "batch sampled on the servers takes seed, dir and "
                         "flags only (sample edge weights and exclusions "
                         "with gkv_client_sample_blocks)",
                         o->edge_w != NULL ? "edge_w" : o->exclude != NULL ?
                         "exclude" : "edge_w_feat");
    if (sp->nfeats < 0 || sp->nefeats < 0 ||
        (unsigned)sp->nfeats > NET_BATCH_TENSORS_MAX ||
        (unsigned)sp->nefeats > NET_BATCH_TENSORS_MAX)
        return net__fail(GKV_EINVAL, "sample_batch: nfeats %d, nefeats %d: "
                         "each is 0 to %u", sp->nfeats, sp->nefeats,
                         NET_BATCH_TENSORS_MAX);
    if (out->blocks == NULL ||
        (sp->nfeats > 0 && (out->feat == NULL || out->feat_bytes == NULL)) ||
        (sp->nefeats > 0 && (out->efeat == NULL || out->efeat_bytes == NULL)))
        return net__fail(GKV_EINVAL, "sample_batch: out lacks an array "
                         "(blocks, feat, feat_bytes, efeat or efeat_bytes)");
    nt = (size_t)sp->nfeats + 1 + (size_t)sp->nefeats;
    if ((bc->tref = gkv__calloc(nt, sizeof *bc->tref)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    if ((rc = trefs_check(sp->feats, sp->nfeats, "feats", bc->nnt, 0,
                          bc->tref)) != GKV_OK ||
        (rc = trefs_check(sp->label, sp->label != NULL, "label", bc->nnt, 0,
                          bc->tref + sp->nfeats)) != GKV_OK ||
        (rc = trefs_check(sp->efeats, sp->nefeats, "efeats", bc->net, 1,
                          bc->tref + sp->nfeats + 1)) != GKV_OK)
        return rc;
    return GKV_OK;
}

/* The server to ask: one of the machine owning the most seeds (ties: the
 * lowest), its servers taken in turn. */
static gkv_err
batch_server(gkv_client *c, const int64_t *const *seeds, const size_t *ns,
             int nnt, struct conn **cn)
{
    size_t *cnt, nmax = 0, best = 0;
    int32_t *own = NULL;
    gkv_err rc = GKV_OK;

    for (int t = 0; t < nnt; t++)
        nmax = ns[t] > nmax ? ns[t] : nmax;
    if ((cnt = gkv__calloc(c->nmach + 1, sizeof *cnt)) == NULL ||
        (own = gkv__malloc(nmax * sizeof *own + 4)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    for (int t = 0; t < nnt && rc == GKV_OK; t++) {
        if (ns[t] == 0)
            continue;
        if ((rc = gkv_pbook_node_owner(c->book, t, seeds[t], ns[t],
                                       own)) != GKV_OK) {
            rc = net__fail(rc, "sample_batch: seeds of node type %d '%s': %s",
                           t, gkv_pbook_ntype_name(c->book, t),
                           gkv_pbook_errmsg(c->book));
            break;
        }
        for (size_t i = 0; i < ns[t]; i++)
            if (own[i] >= 0 && (size_t)own[i] < c->nmach)
                cnt[own[i]]++;
    }
    for (size_t m = 1; m < c->nmach; m++)
        if (cnt[m] > cnt[best])
            best = m;
    *cn = &c->cn[best * c->nserv + c->rr++ % c->nserv];
out:
    gkv__free(cnt);
    gkv__free(own);
    return rc;
}

gkv_err
gkv_client_sample_batch(gkv_client *c, const gkv_batch_spec *spec,
                        gkv_batch_out *out)
{
    static const gkv_sample_opts zero;
    const int64_t *const *seeds;
    const gkv_sample_opts *opts;
    gkv_sample_opts obuf;
    struct bcall bc;
    struct part part;
    void *own = NULL;
    uint64_t dl;
    gkv_err rc;

    net__clear();
    if (c == NULL || spec == NULL || out == NULL)
        return net__fail(GKV_EINVAL, "sample_batch: no client, spec or out");
    memset(&bc, 0, sizeof bc);
    memset(&part, 0, sizeof part);
    pthread_mutex_lock(&c->mu);
    if ((rc = net__need_book(c, "sample_batch")) != GKV_OK)
        goto out;
    bc.nnt = gkv_pbook_num_ntypes(c->book);
    bc.net = gkv_pbook_num_etypes(c->book);
    if (spec->nlayers > 0 && out->blocks != NULL &&
        (unsigned)spec->nlayers <= NET_BATCH_LAYERS_MAX)
        memset(out->blocks, 0, (size_t)spec->nlayers * sizeof *out->blocks);
    if ((rc = spec_check(c, spec, out, &bc)) != GKV_OK)
        goto out;
    seeds = spec->seeds;
    opts = spec->opts;
    if ((rc = net__inputs_own(c, &seeds, spec->nseeds, &opts, &obuf,
                              &own)) != GKV_OK)
        goto out;
    net__arena_reset(c);
    if (opts == NULL)
        opts = &zero;
    bc.dir = opts->dir;
    bc.spec = spec;
    bc.out = out;
    bc.enc.nlayers = (uint32_t)spec->nlayers;
    bc.enc.dir = (uint32_t)opts->dir;
    bc.enc.flags = opts->flags;
    bc.enc.nnt = (uint32_t)bc.nnt;
    bc.enc.net = (uint32_t)bc.net;
    bc.enc.nfan = (uint32_t)spec->nfan;
    bc.enc.seed = opts->seed;
    bc.enc.timeout_ms = (uint32_t)c->timeout_ms;
    bc.enc.max_reply = c->max_msg;
    bc.enc.fanout = spec->fanouts;
    bc.enc.seeds = seeds;
    bc.enc.nseeds = spec->nseeds;
    bc.enc.feats = bc.tref;
    bc.enc.nfeats = (uint32_t)spec->nfeats;
    bc.enc.label = spec->label != NULL ? &bc.tref[spec->nfeats] : NULL;
    bc.enc.efeats = bc.tref + spec->nfeats + 1;
    bc.enc.nefeats = (uint32_t)spec->nefeats;
    if ((rc = batch_server(c, seeds, spec->nseeds, bc.nnt,
                           &part.cn)) != GKV_OK)
        goto out;
    part.ops = &batch_ops;
    part.arg = &bc;
    dl = net__deadline((uint64_t)c->timeout_ms);
    /* GKV_EBUSY: the server's batch queue was full and it did nothing;
     * asked again with backoff while the call has time */
    for (int ms = 10;; ms = ms < 640 ? 2 * ms : ms) {
        rc = net__exchange(c, &part, 1, dl);
        if (rc != GKV_EBUSY || net__left_ms(dl) <= ms)
            break;
        nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L},
                  NULL);
        bc.enc.timeout_ms = (uint32_t)net__left_ms(dl);
    }
out:
    if (rc != GKV_OK && spec->nlayers > 0 && out->blocks != NULL &&
        (unsigned)spec->nlayers <= NET_BATCH_LAYERS_MAX)
        memset(out->blocks, 0, (size_t)spec->nlayers * sizeof *out->blocks);
    pthread_mutex_unlock(&c->mu);
    gkv__free(bc.tref);
    gkv__free(own);
    return rc;
}

void
net__client_timeout(gkv_client *c, int ms)
{
    pthread_mutex_lock(&c->mu);
    c->timeout_ms = ms > 0 ? ms : 1;
    c->call_ms = c->timeout_ms;
    pthread_mutex_unlock(&c->mu);
}
