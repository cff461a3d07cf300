/* client_batch.c - the batch family: SAMPLE_BATCH. A whole mini-batch in
 * one request (gkv_client_sample_batch) to the server owning the most
 * seeds, which samples every hop (server_batch.c) and replies with the
 * blocks; the client then pulls the rows straight from the machines
 * holding them, all in one exchange, into place (with GKV_BATCH_RELAY
 * the server gathers them, pulling other machines' from its peers, and
 * replies with all). The blocks are decoded into the client's arena
 * (client_arena.c), where they live until the next sampling call; the
 * rows into the arena too, or into the caller's memory (rows_alloc). Also
 * the timeout a server sets on its peer client. */
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
    const int64_t *const *seeds;   /* as sent */
    gkv_batch_out *out;
    uint32_t nrows;                /* entries of rows */
    int pull;                      /* NET_BATCH_NO_ROWS: the client pulls */
    struct rowjob *job;            /* [nrows] with pull: the rows */
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

/* Entry k of the rows (the feats, the label, the efeats f-major): its
 * tensor's index in bc->tref, its IDs, and where its result goes. */
static void
entry_of(const struct bcall *bc, uint32_t k, int *kind, size_t *index,
         uint32_t *ti, const int64_t **ids, size_t *n, const void ***dst,
         size_t **bytes)
{
    const gkv_batch_spec *sp = bc->spec;
    gkv_batch_out *out = bc->out;
    uint32_t nf = (uint32_t)sp->nfeats, hl = sp->label != NULL;

    if (k < nf) {
        const gkv_block_nodes *x = &out->blocks[0].nodes[sp->feats[k].type];
        *kind = GKV_BATCH_FEAT;
        *index = k;
        *ti = k;
        *ids = x->ids;
        *n = x->num_src;
        *dst = &out->feat[k];
        *bytes = &out->feat_bytes[k];
    } else if (k < nf + hl) {
        *kind = GKV_BATCH_LABEL;
        *index = 0;
        *ti = k;
        *ids = bc->seeds[sp->label->type];
        *n = sp->nseeds[sp->label->type];
        *dst = &out->label;
        *bytes = &out->label_bytes;
    } else {
        uint32_t x = k - nf - hl, f = x / (uint32_t)sp->nlayers;
        const gkv_sample_edges *e =
            &out->blocks[x % (uint32_t)sp->nlayers].edges[sp->efeats[f].type];
        *kind = GKV_BATCH_EFEAT;
        *index = x;
        *ti = nf + hl + f;
        *ids = e->eid;
        *n = e->n;
        *dst = &out->efeat[x];
        *bytes = &out->efeat_bytes[x];
    }
}

/* 'len' bytes for entry k's rows: the caller's (rows_alloc) or the
 * arena's. */
static gkv_err
rows_dst(gkv_client *c, const struct bcall *bc, int kind, size_t index,
         size_t len, unsigned char **d)
{
    gkv_batch_out *out = bc->out;

    if (out->rows_alloc != NULL)
        *d = out->rows_alloc(out->rows_arg, kind, index, len);
    else
        *d = net__arena_alloc(c, len);
    if (*d == NULL)
        return net__fail(GKV_ENOMEM, "out of memory for %zu bytes of rows%s",
                         len, out->rows_alloc != NULL ?
                         " (rows_alloc returned NULL)" : "");
    return GKV_OK;
}

/* Entry k of the reply (x: all its rows) into place. */
static gkv_err
rows_take(gkv_client *c, struct part *p, const net_rows *x, uint32_t k)
{
    struct bcall *bc = p->arg;
    const int64_t *ids;
    const void **dst;
    size_t *bytes, want, index, len = (size_t)(x->n * x->row_bytes);
    uint32_t ti;
    unsigned char *d;
    int kind;
    gkv_err rc;

    entry_of(bc, k, &kind, &index, &ti, &ids, &want, &dst, &bytes);
    if (x->n != want)
        return net__cfail(p->cn, GKV_EPROTO, "sample_batch reply: %llu rows "
                          "where %zu were asked", (unsigned long long)x->n,
                          want);
    if ((rc = rows_dst(c, bc, kind, index, len, &d)) != GKV_OK)
        return rc;
    if (len > 0)
        memcpy(d, x->p, len);
    *dst = d;
    *bytes = len;
    return GKV_OK;
}

/* Entry k of the reply (x: its row size, no rows): its memory, and its
 * pull from the owners set up in bc->job[k]. */
static gkv_err
rows_pull(gkv_client *c, struct part *p, const net_rows *x, uint32_t k)
{
    struct bcall *bc = p->arg;
    struct rowjob *j = &bc->job[k];
    const int64_t *ids;
    const void **dst;
    size_t *bytes, n, index, rb;
    uint32_t ti;
    unsigned char *d;
    int kind;
    gkv_err rc;

    entry_of(bc, k, &kind, &index, &ti, &ids, &n, &dst, &bytes);
    if (x->n != 0)
        return net__cfail(p->cn, GKV_EPROTO, "sample_batch reply: %llu rows "
                          "of tensor '%s' where none were asked",
                          (unsigned long long)x->n, j->name);
    if (j->rt.sp == NULL)
        return net__fail(GKV_ENOTFOUND, "sample_batch: tensor '%s': this "
                         "client knows no server holding it, and the server "
                         "asked does", bc->tref[ti].name);
    rb = (size_t)j->rt.t.row_bytes;
    if (x->row_bytes != rb) {
        c->schema_stale = 1;
        return net__cfail(p->cn, GKV_ESHAPE, "sample_batch: tensor '%s' has "
                          "%llu-byte rows on this server, %zu-byte in this "
                          "client's schema (another client replaced it?); "
                          "the schema is fetched again on the next call",
                          j->name, (unsigned long long)x->row_bytes, rb);
    }
    if ((rc = rows_dst(c, bc, kind, index, n * rb, &d)) != GKV_OK)
        return rc;
    *dst = d;
    *bytes = n * rb;
    j->ids = (const uint64_t *)ids;
    j->n = n;
    j->dst = d;
    return n > 0 ? net__rowjob_split(c, j) : GKV_OK;
}

static gkv_err
done_batch(gkv_client *c, struct part *p, net_rd *rd)
{
    struct bcall *bc = p->arg;
    const gkv_batch_spec *sp = bc->spec;
    net_batch_rep rep;
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
    for (uint32_t k = 0; k < bc->nrows && rc == GKV_OK; k++)
        rc = bc->pull ? rows_pull(c, p, &rep.rows[k], k) :
                        rows_take(c, p, &rep.rows[k], k);
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
    if (sp->flags & ~GKV_BATCH_RELAY)
        return net__fail(GKV_EINVAL, "sample_batch: flags 0x%x have unknown "
                         "bits (GKV_BATCH_RELAY is 0x%x)", sp->flags,
                         GKV_BATCH_RELAY);
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

/* With bc->pull: the route of each entry's tensor, fetched now (the reply
 * is read inside the exchange, which cannot fetch). One that no server is
 * known to hold stays without spans: the server asked names it. */
static gkv_err
routes_get(gkv_client *c, struct bcall *bc, uint64_t deadline)
{
    const gkv_batch_spec *sp = bc->spec;
    uint32_t nf = (uint32_t)sp->nfeats, hl = sp->label != NULL;
    uint32_t nt = nf + hl + (uint32_t)sp->nefeats;

    for (uint32_t i = 0; i < nt; i++) {
        const struct route *r;
        gkv_err rc = net__route_fresh(c, bc->tref[i].name, deadline, &r);

        if (rc != GKV_OK && rc != GKV_ENOTFOUND)
            return rc;
    }
    if ((bc->job = gkv__calloc((size_t)bc->nrows + 1, sizeof *bc->job)) ==
        NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    /* copied once all are fetched: a later fetch may have dropped an
     * earlier one, and a hand-shake in the exchange drops them all */
    for (uint32_t k = 0; k < bc->nrows; k++) {
        uint32_t ti = k < nf + hl ? k :
                      nf + hl + (k - nf - hl) / (uint32_t)sp->nlayers;
        gkv_err rc;

        bc->job[k].name = bc->tref[ti].name;
        if ((rc = net__rowjob_route(c, &bc->job[k])) != GKV_OK)
            return rc;
    }
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
    uint64_t deadline;
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
    deadline = net__deadline((uint64_t)c->timeout_ms);
    if (opts == NULL)
        opts = &zero;
    bc.dir = opts->dir;
    bc.spec = spec;
    bc.seeds = seeds;
    bc.out = out;
    bc.nrows = (uint32_t)spec->nfeats + (spec->label != NULL) +
               (uint32_t)spec->nefeats * (uint32_t)spec->nlayers;
    bc.pull = !(spec->flags & GKV_BATCH_RELAY);
    bc.enc.nlayers = (uint32_t)spec->nlayers;
    bc.enc.dir = (uint32_t)opts->dir;
    bc.enc.flags = opts->flags | (bc.pull ? NET_BATCH_NO_ROWS : 0);
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
    if (bc.pull && (rc = routes_get(c, &bc, deadline)) != GKV_OK)
        goto out;
    part.ops = &batch_ops;
    part.arg = &bc;
    /* GKV_EBUSY: the server's batch queue was full and it did nothing;
     * asked again with backoff while the call has time */
    for (int ms = 10;;) {
        rc = net__exchange(c, &part, 1, deadline);
        if (rc != GKV_EBUSY || !net__busy_again(&ms, deadline))
            break;
        bc.enc.timeout_ms = (uint32_t)net__left_ms(deadline);
    }
    if (rc == GKV_OK && bc.pull)
        rc = net__rowjob_pull(c, bc.job, bc.nrows, deadline);
out:
    if (rc != GKV_OK && spec->nlayers > 0 && out->blocks != NULL &&
        (unsigned)spec->nlayers <= NET_BATCH_LAYERS_MAX)
        memset(out->blocks, 0, (size_t)spec->nlayers * sizeof *out->blocks);
    pthread_mutex_unlock(&c->mu);
    for (uint32_t k = 0; bc.job != NULL && k < bc.nrows; k++)
        net__rowjob_free(&bc.job[k]);
    gkv__free(bc.job);
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
