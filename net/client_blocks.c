/* client_blocks.c - multi-layer blocks through the servers
 * (gkv_client_sample_blocks): one hop per layer, the neighbours relabelled
 * as the replies are merged. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include "base/base.h"
#include "net/gkv_net.h"
#include "net/client_int.h"

/* The relabelling markers of sample_blocks: per node type, 4 bytes per
 * node (local ID + 1, 0 = not in the block), allocated on the first call;
 * every marker set is cleared again before the call returns. */
static gkv_err
markers_get(gkv_client *c, int nnt)
{
    int32_t **mk;

    if (c->mk != NULL)
        return GKV_OK;
    if ((mk = gkv__calloc((size_t)nnt, sizeof *mk)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    for (int t = 0; t < nnt; t++) {
        int64_t n = gkv_pbook_num_nodes(c->book, t);
        if ((mk[t] = gkv__calloc((size_t)n + 1, sizeof *mk[t])) == NULL) {
            /* c->mk is set only when whole: a later call would take a
             * half-built table for a ready one */
            for (int u = 0; u < t; u++)
                gkv__free(mk[u]);
            gkv__free(mk);
            return net__fail(GKV_ENOMEM, "sample_blocks: out of memory for "
                             "the relabelling markers (%lld nodes of type %d)",
                             (long long)n, t);
        }
    }
    c->mk = mk;
    c->nmk = nnt;
    return GKV_OK;
}

/* Checks that seeds s[0 .. n) of node type t are nodes of that type,
 * each given once (the type's markers, clear before, are clear after). */
static gkv_err
seeds_check(gkv_client *c, int t, const int64_t *s, size_t n)
{
    int32_t *mk = c->mk[t];
    gkv_err rc = GKV_OK;
    size_t i;

    for (i = 0; i < n; i++) {
        int64_t v = s[i];
        if (v < 0 || v >= gkv_pbook_num_nodes(c->book, t)) {
            rc = net__fail(GKV_ERANGE, "sample_blocks: seeds[%d][%zu] = "
                           "%lld is not a node of type %d '%s' (%lld "
                           "nodes)", t, i, (long long)v, t,
                           gkv_pbook_ntype_name(c->book, t),
                           (long long)gkv_pbook_num_nodes(c->book, t));
            break;
        }
        if (mk[v] != 0) {
            rc = net__fail(GKV_EINVAL, "sample_blocks: seeds[%d][%zu] = "
                           "%lld is given twice (first at index %d)", t, i,
                           (long long)v, mk[v] - 1);
            break;
        }
        mk[v] = (int32_t)i + 1;
    }
    while (i-- > 0)
        mk[s[i]] = 0;
    return rc;
}

/* Block *b (arena memory): the hop at layer hi from the destination
 * nodes dst[t][0 .. ndst[t]), each neighbour given its local ID as the
 * replies are merged. On GKV_OK dst and ndst hold the block's source
 * nodes, the next hop's destination nodes. */
static gkv_err
block_hop(gkv_client *c, const int64_t **dst, size_t *ndst, const int *fan,
          int nfan, int hi, const gkv_sample_opts *o, gkv_block *b)
{
    int nnt = gkv_pbook_num_ntypes(c->book);
    int net_ = gkv_pbook_num_etypes(c->book);
    gkv_block_nodes *bn;
    struct relab rl;
    int64_t **ids;
    size_t *nsrc;
    gkv_err rc;

    bn = net__arena_alloc(c, (size_t)nnt * sizeof *bn);
    rl.be = net__arena_alloc(c, (size_t)net_ * sizeof *rl.be);
    ids = net__arena_alloc(c, (size_t)nnt * sizeof *ids);
    nsrc = net__arena_alloc(c, (size_t)nnt * sizeof *nsrc);
    if (bn == NULL || rl.be == NULL || ids == NULL || nsrc == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    memset(nsrc, 0, (size_t)nnt * sizeof *nsrc);
    memset(ids, 0, (size_t)nnt * sizeof *ids);
    memset(rl.be, 0, (size_t)net_ * sizeof *rl.be);
    rl.mk = c->mk;
    rl.ids = ids;
    rl.nsrc = nsrc;
    rc = net__sample_hop(c, dst, ndst, fan, nfan, hi, o, &rl, NULL);
    /* every marker set is on a node list */
    for (int t = 0; t < nnt; t++) {
        int32_t *mk = c->mk[t];
        for (size_t i = 0; i < nsrc[t]; i++)
            mk[ids[t][i]] = 0;
    }
    if (rc != GKV_OK)
        return rc;
    for (int t = 0; t < nnt; t++) {
        bn[t].ids = ids[t];
        bn[t].num_dst = ndst[t];
        bn[t].num_src = nsrc[t];
        dst[t] = ids[t];
        ndst[t] = nsrc[t];
    }
    b->num_ntypes = nnt;
    b->num_etypes = net_;
    b->nodes = bn;
    b->edges = rl.be;
    return GKV_OK;
}

/* gkv_client_sample_blocks with c->mu held, blocks[0 .. nlayers) zeroed
 * (the edge batch calls it inside its own call). */
gkv_err
net__blocks_locked(gkv_client *c, const int64_t *const *seeds,
                   const size_t *nseeds, const int *fanouts, int nfan,
                   int nlayers, const gkv_sample_opts *opts, gkv_block *blocks)
{
    static const gkv_sample_opts zero;
    const gkv_sample_opts *o;
    gkv_sample_opts obuf;
    const int64_t **dst = NULL;
    size_t *ndst = NULL;
    void *own = NULL;
    int nnt = 0;
    gkv_err rc;

    if ((rc = net__sample_args(c, "sample_blocks", seeds, nseeds, fanouts,
                               nfan, nlayers, opts)) != GKV_OK ||
        (rc = net__inputs_own(c, &seeds, nseeds, &opts, &obuf,
                              &own)) != GKV_OK)
        goto out;
    net__arena_reset(c);
    o = opts != NULL ? opts : &zero;
    nnt = gkv_pbook_num_ntypes(c->book);
    if ((rc = markers_get(c, nnt)) != GKV_OK)
        goto out;
    if ((dst = gkv__calloc((size_t)nnt, sizeof *dst)) == NULL ||
        (ndst = gkv__calloc((size_t)nnt, sizeof *ndst)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    /* the seeds must be distinct per type (then every hop's destination
     * nodes are: the previous block's source nodes) */
    for (int t = 0; t < nnt && rc == GKV_OK; t++) {
        rc = seeds_check(c, t, seeds[t], nseeds[t]);
        dst[t] = seeds[t];
        ndst[t] = nseeds[t];
    }
    if (rc != GKV_OK)
        goto out;
    /* block nlayers - 1 first: its hop (layer 0) starts from the seeds */
    for (int hi = 0; hi < nlayers; hi++) {
        int bi = nlayers - 1 - hi;

        if ((rc = block_hop(c, dst, ndst, fanouts + (size_t)bi *
                            (size_t)nfan, nfan, hi, o, &blocks[bi])) != GKV_OK)
            goto out;
    }
out:
    if (rc != GKV_OK)
        memset(blocks, 0, (size_t)nlayers * sizeof *blocks);
    gkv__free(dst);
    gkv__free(ndst);
    gkv__free(own);
    return rc;
}

gkv_err
gkv_client_sample_blocks(gkv_client *c, const int64_t *const *seeds,
                         const size_t *nseeds, const int *fanouts, int nfan,
                         int nlayers, const gkv_sample_opts *opts,
                         gkv_block *blocks)
{
    gkv_err rc;

    net__clear();
    if (c == NULL || blocks == NULL)
        return net__fail(GKV_EINVAL, "sample_blocks: no client or no blocks");
    if (nlayers < 1)
        return net__fail(GKV_EINVAL, "sample_blocks: nlayers %d: at least "
                         "one layer", nlayers);
    memset(blocks, 0, (size_t)nlayers * sizeof *blocks);
    pthread_mutex_lock(&c->mu);
    rc = net__blocks_locked(c, seeds, nseeds, fanouts, nfan, nlayers, opts,
                            blocks);
    pthread_mutex_unlock(&c->mu);
    return rc;
}
