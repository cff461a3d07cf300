/* blocks.c - multi-layer blocks (gkv_sample_blocks): the hops of a block
 * sample from the seeds outwards, each hop's frontier the node list of the
 * block above it, relabelled into local IDs. */
#include "graph/sample_int.h"

/* The hops of a block sample. The seeds are in s->lay[nlayers - 1]'s lists
 * (num_dst = num_src) and labelled in the markers. Resets the markers. */
gkv_err
graph__blocks_run(gkv_sampler *s, const int *fan, int nfan, int nlayers,
                  gkv_block *blocks)
{
    struct run *R = &s->R;
    struct blay *L = NULL;
    gkv_err rc = GKV_OK;

    R->relabel = 1;
    for (int h = 0; h < nlayers; h++) {
        int bi = nlayers - 1 - h;
        L = &s->lay[bi];
        if (h > 0) {
            const struct blay *P = &s->lay[bi + 1];
            for (int t = 0; t < s->nnt; t++) {
                size_t n = P->nodes[t].num_src;
                if (graph__grow(&L->ids[t], &L->idcap[t], n,
                                sizeof *L->ids[t])) {
                    L = &s->lay[bi + 1];
                    rc = s_fail(s, GKV_ENOMEM, "out of memory for block %d "
                                "(%zu nodes)", bi, n);
                    goto out;
                }
                if (n > 0)
                    memcpy(L->ids[t], P->ids[t], n * sizeof *L->ids[t]);
            }
            for (int t = 0; t < s->nnt; t++)
                L->nodes[t].num_dst = L->nodes[t].num_src =
                    P->nodes[t].num_src;
        }
        for (int e = 0; e < s->net; e++)
            L->edges[e].n = 0;
        R->L = L;
        R->last = h == nlayers - 1;
        for (int t = 0; t < s->nnt; t++) {
            s->fv[t] = L->ids[t];
            s->nfv[t] = L->nodes[t].num_dst;
        }
        graph__hop_set(s, fan, nfan, bi, h);
        if ((rc = graph__hop_run(s)) != GKV_OK)
            goto out;
    }
out:
    graph__markers_reset(s, L);
    if (rc != GKV_OK)
        return rc;
    for (int i = 0; i < nlayers; i++) {
        struct blay *B = &s->lay[i];
        for (int t = 0; t < s->nnt; t++)
            B->nodes[t].ids = B->ids[t];
        for (int e = 0; e < s->net; e++) {
            B->edges[e].src = B->ea[e].s;
            B->edges[e].dst = B->ea[e].d;
            B->edges[e].eid = B->ea[e].e;
        }
        blocks[i].num_ntypes = s->nnt;
        blocks[i].num_etypes = s->net;
        blocks[i].nodes = B->nodes;
        blocks[i].edges = B->edges;
    }
    return GKV_OK;
}

static gkv_err
blocks_call(gkv_sampler *s, const int64_t *const *seeds,
            const size_t *nseeds, const int *fanouts, int nfan, int nlayers,
            const gkv_sample_opts *opts, gkv_block *blocks)
{
    struct blay *L;
    gkv_err rc;

    if (blocks == NULL)
        return s_fail(s, GKV_EINVAL, "blocks is NULL");
    if (nlayers < 1)
        return s_fail(s, GKV_EINVAL, "nlayers %d: at least one layer",
                      nlayers);
    memset(blocks, 0, (size_t)nlayers * sizeof *blocks);
    if ((rc = graph__fan_check(s, fanouts, nfan, nlayers)) != GKV_OK ||
        (rc = graph__seeds_check(s, seeds, nseeds)) != GKV_OK ||
        (rc = graph__opts_prep(s, opts, fanouts, nfan, nlayers)) != GKV_OK ||
        (rc = graph__markers_alloc(s)) != GKV_OK ||
        (rc = graph__lay_reserve(s, nlayers)) != GKV_OK)
        return rc;
    graph__ex_finish(s);
    L = &s->lay[nlayers - 1];
    for (int t = 0; t < s->nnt; t++) {
        L->nodes[t].num_src = L->nodes[t].num_dst = 0;
        if (graph__grow(&L->ids[t], &L->idcap[t], nseeds[t],
                        sizeof *L->ids[t]))
            return s_fail(s, GKV_ENOMEM, "out of memory for %zu seeds",
                          nseeds[t]);
    }
    for (int t = 0; t < s->nnt; t++) {
        amark *mk = s->mk[t];
        for (size_t i = 0; i < nseeds[t]; i++) {
            int64_t v = seeds[t][i];
            uint64_t m = LOAD(&mk[v]);
            if (m != 0) {
                rc = s_fail(s, GKV_EINVAL, "seeds[%d][%zu] = %lld is given "
                            "twice (first at index %llu)", t, i, (long long)v,
                            (unsigned long long)(m - 1));
                graph__markers_reset(s, L);
                return rc;
            }
            L->ids[t][i] = v;
            STORE(&mk[v], i + 1);
            L->nodes[t].num_src = L->nodes[t].num_dst = i + 1;
        }
    }
    return graph__blocks_run(s, fanouts, nfan, nlayers, blocks);
}

gkv_err
gkv_sample_blocks(gkv_sampler *s, const int64_t *const *seeds,
                  const size_t *nseeds, const int *fanouts, int nfan,
                  int nlayers, const gkv_sample_opts *opts, gkv_block *blocks)
{
    gkv_err rc;

    if (s == NULL)
        return GKV_EINVAL;
    graph__call_begin(s);
    rc = blocks_call(s, seeds, nseeds, fanouts, nfan, nlayers, opts, blocks);
    graph__call_end(s, rc);
    return rc;
}
