/* client_weights.c - sampling by edge weights the servers cannot find
 * themselves: an edge_w array the caller holds, or an edge feature along
 * out-edges, sent with the seeds as weights by position
 * (net__sample_hop). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/base.h"
#include "graph/graph_seam.h"   /* graph__wpos */
#include "net/gkv_net.h"
#include "net/wire.h"
#include "net/client_int.h"

/* rc, with the message of the failed pull of edge feature 'name' (edge
 * type e) put in context. */
static gkv_err
wpos_fail(gkv_err rc, int e, const char *name)
{
    char why[1024];

    snprintf(why, sizeof why, "%s", gkv_net_errmsg());
    return net__fail(rc, "sample: weights of edge type %d from edge feature "
                     "'%s': %s", e, name, why);
}

/* Out-edge weights from edge feature e's tensor 'name' for the n edges
 * eids (int64), converted to floats into w (n of them). */
static gkv_err
wpos_pull(gkv_client *c, int e, const char *name, const int64_t *eids,
          size_t n, float *w)
{
    const struct route *r;
    size_t rb, es;
    gkv_dtype dt;
    unsigned char *buf = NULL;
    int64_t bad;
    gkv_err rc;

    if ((rc = net__route_fresh(c, name,
                               net__deadline((uint64_t)c->timeout_ms), &r))
        != GKV_OK)
        return wpos_fail(rc, e, name);
    rb = (size_t)r->t.row_bytes;
    dt = (gkv_dtype)r->t.dtype;
    es = gkv_dtype_size(dt);
    if (es == 0 || rb != es)
        return net__fail(GKV_EINVAL, "sample: edge feature '%s' has rows of "
                         "%zu elements; a sampling weight needs one per edge "
                         "(row shape () or (1))", name, es ? rb / es : 0);
    if (n == 0)
        return GKV_OK;
    if ((buf = gkv__malloc(n * rb)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory for %zu weights", n);
    if ((rc = net__pull_locked(c, name, r, (const uint64_t *)eids, n, buf,
                               n * rb)) != GKV_OK) {
        gkv__free(buf);
        return wpos_fail(rc, e, name);
    }
    bad = gkv_sample_weights_from(buf, dt, n, w);
    gkv__free(buf);
    if (bad >= 0) {
        int32_t own = -1;
        gkv_pbook_edge_owner(c->book, e, &eids[bad], 1, &own);
        return net__fail(GKV_EINVAL, "sample: edge feature '%s': edge %lld "
                         "(on partition %d) has weight %g; sampling weights "
                         "must be finite and >= 0", name,
                         (long long)eids[bad], own, (double)w[bad]);
    }
    return GKV_OK;
}

/* Weights of the n listed edges eids of type e from the caller's edge_w
 * array, into w: the checks in-process sampling makes. */
static gkv_err
wpos_array(const gkv_sample_opts *o, int e, const int64_t *eids, size_t n,
           float *w)
{
    int64_t lo = o->edge_w_lo != NULL ? o->edge_w_lo[e] : 0;
    int64_t len = o->edge_w_len[e];

    for (size_t j = 0; j < n; j++) {
        int64_t id = eids[j];
        float v;

        if (id < lo || id - lo >= len)
            return net__fail(GKV_ERANGE, "sample: edge type %d: edge %lld "
                             "has no entry in edge_w[%d] (%lld weights, of "
                             "edges from %lld)", e, (long long)id, e,
                             (long long)len, (long long)lo);
        v = o->edge_w[e][id - lo];
        if (!(v >= 0.0f) || isinf(v))
            return net__fail(GKV_EINVAL, "sample: edge type %d: edge %lld "
                             "has weight %g in edge_w; weights must be "
                             "finite and >= 0", e, (long long)id, (double)v);
        w[j] = v;
    }
    return GKV_OK;
}

/* Edge type e's weights by position into *wp (arena memory), for the
 * edges *ea that a listing hop found for the distinct seeds u[0 .. nu) of
 * the centre type: seed i's slice is off[i] .. off[i + 1). From the
 * caller's edge_w array, else pulled from feature o->edge_w_feat[e]. */
static gkv_err
wpos_etype(gkv_client *c, const gkv_sample_opts *o, int e,
           const gkv_sample_edges *ea, const int64_t *u, size_t nu,
           graph__wpos *wp)
{
    char name[GKV_NAME_MAX + 2];
    const int64_t *ctr = o->dir == GKV_DIR_IN ? ea->dst : ea->src;
    size_t j = 0, n = ea->n;
    int64_t *off = net__arena_alloc(c, (nu + 1) * sizeof *off);
    float *w = net__arena_alloc(c, n * sizeof *w + 4);
    gkv_err rc;

    if (off == NULL || w == NULL)
        return net__fail(GKV_ENOMEM, "out of memory for %zu weights", n);
    for (size_t i = 0; i < nu; i++) {
        off[i] = (int64_t)j;
        while (j < n && ctr[j] == u[i])
            j++;
    }
    off[nu] = (int64_t)j;
    if (j != n)
        return net__fail(GKV_EPROTO, "sample: the edges of edge type %d "
                         "came back out of seed order", e);
    if (o->edge_w != NULL && o->edge_w[e] != NULL) {
        rc = wpos_array(o, e, ea->eid, n, w);
    } else {
        snprintf(name, sizeof name, "edge/%s/%s",
                 gkv_pbook_etype_name(c->book, e), o->edge_w_feat[e]);
        rc = wpos_pull(c, e, name, ea->eid, n, w);
    }
    if (rc != GKV_OK)
        return rc;
    wp->off = off;
    wp->w = w;
    return GKV_OK;
}

/* One hop through the servers (net__hop_once). Weights the servers cannot
 * find themselves go by position, in three steps: an edge_w array the
 * caller holds (either direction), and an edge feature along out-edges
 * (a node's out-edges include edges other machines own, with their
 * feature rows). A fanout -1 hop lists each distinct seed's non-excluded
 * edges of those types, the client takes their weights from the array or
 * pulls them from the edges' owners, and the hop proper sends them with
 * the seeds: the servers sample exactly as in-process edge_w would. When
 * some type goes by position, so do in-edge features of the hop (a
 * request carries one source of weights). */
gkv_err
net__sample_hop(gkv_client *c, const int64_t *const *seeds_in,
                const size_t *nseeds_in, const int *fan, int nfan, int layer,
                const gkv_sample_opts *o, struct relab *rl,
                gkv_sample_edges *out)
{
    int nnt = gkv_pbook_num_ntypes(c->book), net_ = gkv_pbook_num_etypes(c->book);
    int any = 0, *fa = NULL;
    int64_t **useeds = NULL;
    const int64_t **u = NULL;
    size_t *nu = NULL, **smap = NULL;
    gkv_sample_edges *ea = NULL;
    graph__wpos *wp = NULL;
    gkv_sample_opts oa;
    gkv_err rc = GKV_OK;

#define HOP_ARR(e)  (o->edge_w != NULL && o->edge_w[e] != NULL)
#define HOP_FEAT(e) (o->edge_w_feat != NULL && o->edge_w_feat[e] != NULL)
#define HOP_FAN(e)  (fan[nfan == 1 ? 0 : (e)] != 0)
    for (int e = 0; o != NULL && e < net_; e++)
        any |= HOP_FAN(e) && (HOP_ARR(e) ||
                              (o->dir == GKV_DIR_OUT && HOP_FEAT(e)));
    if (!any && (o == NULL || (o->dir == GKV_DIR_IN && o->edge_w == NULL)))
        return net__hop_once(c, seeds_in, nseeds_in, fan, nfan, layer, o, rl,
                             out, NULL);
    oa = *o;
    oa.edge_w = NULL;           /* the weights go, not arrays */
    oa.edge_w_len = NULL;
    oa.edge_w_lo = NULL;
    if (!any) {
        if (o->dir == GKV_DIR_OUT)
            oa.edge_w_feat = NULL;
        return net__hop_once(c, seeds_in, nseeds_in, fan, nfan, layer, &oa, rl,
                             out, NULL);
    }
    oa.edge_w_feat = NULL;      /* ... nor names */
    /* (+ 1: never a request for 0 bytes) */
    if ((fa = gkv__calloc((size_t)net_ + 1, sizeof *fa)) == NULL ||
        (useeds = gkv__calloc((size_t)nnt + 1, sizeof *useeds)) == NULL ||
        (u = gkv__calloc((size_t)nnt + 1, sizeof *u)) == NULL ||
        (nu = gkv__calloc((size_t)nnt + 1, sizeof *nu)) == NULL ||
        (smap = gkv__calloc((size_t)nnt + 1, sizeof *smap)) == NULL ||
        (ea = gkv__calloc((size_t)net_ + 1, sizeof *ea)) == NULL ||
        (wp = gkv__calloc((size_t)net_ + 1, sizeof *wp)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    /* the distinct seeds, in net__hop_once's order (first appearance) */
    if ((rc = net__seeds_distinct(nnt, rl != NULL, seeds_in, nseeds_in, u, nu,
                                  useeds, smap)) != GKV_OK)
        goto out;
    for (int e = 0; e < net_; e++)
        fa[e] = HOP_FAN(e) && (HOP_ARR(e) || HOP_FEAT(e)) ? -1 : 0;
    if ((rc = net__hop_once(c, u, nu, fa, net_, layer, &oa, NULL, ea, NULL))
        != GKV_OK)
        goto out;
    for (int e = 0; e < net_; e++) {
        gkv_etype_info ei;
        int ct;

        if (fa[e] == 0)
            continue;
        gkv_pbook_etype_info(c->book, e, &ei);
        ct = o->dir == GKV_DIR_IN ? ei.dst_ntype : ei.src_ntype;
        if ((rc = wpos_etype(c, o, e, &ea[e], u[ct], nu[ct], &wp[e])) !=
            GKV_OK)
            goto out;
    }
#undef HOP_ARR
#undef HOP_FEAT
#undef HOP_FAN
    rc = net__hop_once(c, seeds_in, nseeds_in, fan, nfan, layer, &oa, rl, out,
                       wp);
out:
    for (int t = 0; useeds != NULL && t < nnt; t++)   /* as net__hop_once */
        gkv__free(useeds[t]);
    for (int t = 0; smap != NULL && t < nnt; t++)
        gkv__free(smap[t]);
    gkv__free(useeds);
    gkv__free(smap);
    gkv__free((void *)u);
    gkv__free(nu);
    gkv__free(fa);
    gkv__free(ea);
    gkv__free(wp);
    if (rc != GKV_OK && rl == NULL)
        memset(out, 0, (size_t)net_ * sizeof *out);
    return rc;
}
