/* client_graph.c - the graph family: FIND_EDGES, IN_DEGREES, OUT_DEGREES
 * and IN_SUBGRAPH, and the routing by the partition book that sampling
 * shares (net__graph_route, net__gpieces, net__dedup).
 *
 * Seeds and IDs are routed by the partition book: machine m serves
 * partition m. A machine's share goes in one message to one of its servers,
 * or is cut into slices spread over its servers when it is large. Each
 * slice keeps the request's order, and each node is asked once (net__dedup),
 * so the answers, node by node in the order asked, merge back in request
 * order.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/base.h"
#include "net/gkv_net.h"
#include "net/wire.h"
#include "net/client_int.h"

#define GSPLIT   512          /* IDs per server before a machine's share is
                               * spread over its servers */

/* ---- routing by the partition book -------------------------------------- */

const gkv_pbook *
gkv_client_pbook(const gkv_client *c)
{
    return c != NULL ? c->book : NULL;
}

gkv_err
net__need_book(gkv_client *c, const char *what)
{
    if (c->book == NULL)
        return net__fail(GKV_ENOTSUP, "%s: the servers serve a store, not "
                         "the partitions of a graph (start them with "
                         "--part-config)", what);
    if (c->single)
        return net__fail(GKV_ENOTSUP, "%s: a client of one server "
                         "(gkv_client_connect_addr) does not route graph "
                         "requests; connect with the job's ip_config", what);
    return GKV_OK;
}

size_t
net__gpieces(gkv_client *c, size_t cnt, size_t per)
{
    size_t k = 1, most = (cnt + per - 1) / per;

    if (c->nserv > 1 && cnt >= 2 * GSPLIT) {
        k = cnt / GSPLIT;
        if (k > c->nserv)
            k = c->nserv;
    }
    return most > k ? most : k;
}

/* Splits a slice's answer (edges grouped node by node, the nodes distinct
 * and in the slice's order; col[] the node each edge belongs to) into
 * per-node counts cnt[]. -1 when the edges do not match the nodes. */
static int
split_edges(const int64_t *ids, const size_t *idx, size_t n,
            const int64_t *col, size_t m, size_t *cnt)
{
    size_t e = 0;

    for (size_t j = 0; j < n; j++) {
        int64_t v = ids[idx != NULL ? idx[j] : j];
        size_t t = 0;

        while (e + t < m && col[e + t] == v)
            t++;
        cnt[j] = t;
        e += t;
    }
    return e == m ? 0 : -1;
}

/* The relabelling table of one block: (node type, global ID) -> local ID,
 * open addressing. */
struct hent {
    int64_t v;
    int32_t t;                 /* -1: an empty slot */
    int32_t loc;
};

static uint64_t
hmix(int64_t v, int t)
{
    uint64_t z = (uint64_t)v + (uint64_t)t * 0x9e3779b97f4a7c15ull;

    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ull;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The entry of (t, v): found, or the empty slot where it goes. */
static struct hent *
hfind(struct hent *h, size_t mask, int t, int64_t v)
{
    size_t i = (size_t)hmix(v, t) & mask;

    while (h[i].t >= 0 && (h[i].v != v || h[i].t != t))
        i = (i + 1) & mask;
    return &h[i];
}

/* The distinct values of ids[0..n) in order of first appearance into
 * *uniq (*nu of them), and map[i] = the index of ids[i] there. Asking each
 * node once keeps the servers' answers unambiguous: they list edges node
 * by node, and a node without edges leaves no trace. */
gkv_err
net__dedup(const int64_t *ids, size_t n, int64_t **uniq, size_t *nu,
           size_t **map)
{
    size_t cap = 16, mask, k = 0;
    struct hent *h;
    int64_t *u;
    size_t *mp;

    while (cap < 2 * n + 16)
        cap <<= 1;
    mask = cap - 1;
    h = gkv__malloc(cap * sizeof *h);
    u = gkv__malloc(n * 8 + 8);
    mp = gkv__malloc(n * sizeof *mp + 8);
    if (h == NULL || u == NULL || mp == NULL) {
        gkv__free(h);
        gkv__free(u);
        gkv__free(mp);
        return net__fail(GKV_ENOMEM, "out of memory for %zu IDs", n);
    }
    memset(h, 0xff, cap * sizeof *h);
    for (size_t i = 0; i < n; i++) {
        struct hent *x = hfind(h, mask, 0, ids[i]);
        if (x->t < 0) {
            x->t = 0;
            x->v = ids[i];
            x->loc = (int32_t)k;
            u[k++] = ids[i];
        }
        mp[i] = (size_t)x->loc;
    }
    gkv__free(h);
    *uniq = u;
    *nu = k;
    *map = mp;
    return GKV_OK;
}

/* Which machine owns each ID (of node type ty, or edge type ty when
 * by_edge), and the positions of each machine's IDs in request order:
 * pos[start[m] .. start[m] + count[m]). */
gkv_err
net__graph_route(gkv_client *c, const char *what, int ty, int by_edge,
                 const int64_t *ids, size_t n, size_t *count, size_t *start,
                 size_t **posout)
{
    int32_t *own = gkv__malloc(n * sizeof *own + 4);
    size_t *pos = gkv__malloc(n * sizeof *pos + 8), *fill = NULL;
    gkv_err rc;

    *posout = NULL;
    if (own == NULL || pos == NULL ||
        (fill = gkv__malloc(c->nmach * sizeof *fill)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    rc = by_edge ? gkv_pbook_edge_owner(c->book, ty, ids, n, own) :
                   gkv_pbook_node_owner(c->book, ty, ids, n, own);
    if (rc != GKV_OK) {
        net__fail(rc, "%s: %s", what, gkv_pbook_errmsg(c->book));
        goto out;
    }
    memset(count, 0, c->nmach * sizeof *count);
    for (size_t i = 0; i < n; i++) {
        if (own[i] < 0 || (size_t)own[i] >= c->nmach) {
            rc = net__fail(GKV_EINVAL, "%s: ID %lld belongs to partition %d, "
                           "and the job has %zu machines", what,
                           (long long)ids[i], own[i], c->nmach);
            goto out;
        }
        count[own[i]]++;
    }
    for (size_t m = 0, a = 0; m < c->nmach; m++) {
        start[m] = fill[m] = a;
        a += count[m];
    }
    for (size_t i = 0; i < n; i++)
        pos[fill[own[i]]++] = i;
    *posout = pos;
    pos = NULL;
out:
    gkv__free(own);
    gkv__free(pos);
    gkv__free(fill);
    return rc;
}

/* ---- find_edges, degrees, in_subgraph ---- */

struct gids {                  /* one message of an ID request */
    uint32_t etype;
    const int64_t *ids;        /* the caller's */
    const size_t *idx;         /* the positions of this slice's IDs */
    size_t n;
    int64_t *out[2];           /* find_edges, degrees: scattered by idx */
    int64_t *sub[3];           /* in_subgraph: the slice's edges */
    size_t m;
};

static void
penc_ids(net_wr *w, const struct part *p)
{
    const struct gids *g = p->arg;

    net__enc_ids_req(w, g->etype, g->ids, g->idx, g->n);
}

static gkv_err
done_ids(gkv_client *c, struct part *p, net_rd *rd)
{
    struct gids *g = p->arg;
    uint16_t type = p->ops->type;
    unsigned k = type == NET_FIND_EDGES ? 2 : type == NET_IN_SUBGRAPH ? 3 : 1;
    net_cols co;

    (void)c;
    if (net__dec_cols(rd, k, &co, "reply") != 0)
        return net__cfail(p->cn, GKV_EPROTO, "malformed %s reply: %s",
                          net__type_name(type), rd->why);
    if (type == NET_IN_SUBGRAPH) {
        for (int i = 0; i < 3; i++) {
            if ((g->sub[i] = gkv__malloc((size_t)co.n * 8 + 8)) == NULL)
                return net__fail(GKV_ENOMEM, "out of memory");
            memcpy(g->sub[i], co.c[i], (size_t)co.n * 8);
        }
        g->m = (size_t)co.n;
        return GKV_OK;
    }
    if (co.n != g->n)
        return net__cfail(p->cn, GKV_EPROTO, "%s reply holds %llu answers for "
                          "%zu IDs", net__type_name(type),
                          (unsigned long long)co.n, g->n);
    for (unsigned i = 0; i < k; i++)
        for (size_t j = 0; j < g->n; j++)
            memcpy(&g->out[i][g->idx[j]], co.c[i] + 8 * j, 8);
    return GKV_OK;
}

static const struct part_ops find_edges_ops = {
    .type = NET_FIND_EDGES, .enc = penc_ids, .done = done_ids,
};
static const struct part_ops in_degrees_ops = {
    .type = NET_IN_DEGREES, .enc = penc_ids, .done = done_ids,
};
static const struct part_ops out_degrees_ops = {
    .type = NET_OUT_DEGREES, .enc = penc_ids, .done = done_ids,
};
static const struct part_ops in_subgraph_ops = {
    .type = NET_IN_SUBGRAPH, .enc = penc_ids, .done = done_ids,
};

/* The IDs one message of request 'type' to machine m may carry: the
 * request (8 bytes an ID) and the reply (8 bytes an ID a column: 2 for
 * find_edges, 1 for the degrees) within the smaller of the servers' and
 * this client's message limits, less room for the fixed fields, as pulls
 * and pushes are cut (net__part_cap). nanomsg drops a larger request without
 * a word: the call would time out, blaming the server. An in_subgraph
 * reply holds the nodes' in-edges, which the client cannot know: a
 * server refuses one over its limit (GKV_EINVAL, "ask for fewer").
 * 0 when not one ID fits. */
static size_t
ids_per_msg(gkv_client *c, size_t m, uint16_t type)
{
    size_t per = net__part_cap(c, m, UINT64_MAX) /
                 (type == NET_FIND_EDGES ? 16 : 8);

    return per < GMAX_IDS ? per : GMAX_IDS;
}

/* Routes ids[0..n) (nodes of type 'ty', or edges when by_edge) to their
 * owners with request ops->type on edge type 'etype'; answers go to o0, o1
 * (find_edges, degrees), or with gs != NULL (in_subgraph) stay in the
 * slices *gs[0 .. *ngs), whose idx point into *keep: the caller frees
 * both (and each slice's sub arrays). */
static gkv_err
ids_call(gkv_client *c, const struct part_ops *ops, int etype, int ty,
         int by_edge, const int64_t *ids, size_t n, int64_t *o0, int64_t *o1,
         struct gids **gs, size_t *ngs, size_t **keep)
{
    const char *what = net__type_name(ops->type);
    size_t *count = NULL, *start = NULL, *pos = NULL, *per = NULL, np = 0,
           maxp = 0;
    struct part *parts = NULL;
    struct gids *g = NULL;
    gkv_err rc;

    if (gs != NULL) {
        *gs = NULL;
        *ngs = 0;
        *keep = NULL;
    }
    if ((count = gkv__calloc(c->nmach, sizeof *count)) == NULL ||
        (start = gkv__calloc(c->nmach, sizeof *start)) == NULL ||
        (per = gkv__calloc(c->nmach, sizeof *per)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = net__graph_route(c, what, ty, by_edge, ids, n, count, start,
                               &pos)) != GKV_OK)
        goto out;
    for (size_t m = 0; m < c->nmach; m++)
        if (count[m] > 0) {
            if ((per[m] = ids_per_msg(c, m, ops->type)) == 0) {
                rc = net__fail(GKV_EINVAL, "%s: machine %zu's servers take "
                               "messages of %llu bytes, too small for one "
                               "ID", what, m, (unsigned long long)
                               c->cn[m * c->nserv].id.max_msg);
                goto out;
            }
            maxp += net__gpieces(c, count[m], per[m]);
        }
    if ((parts = gkv__calloc(maxp + 1, sizeof *parts)) == NULL ||
        (g = gkv__calloc(maxp + 1, sizeof *g)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t m = 0; m < c->nmach; m++) {
        size_t cnt = count[m], k, base;

        if (cnt == 0)
            continue;
        k = net__gpieces(c, cnt, per[m]);
        base = c->rr++;
        for (size_t j = 0; j < k; j++) {
            size_t a = cnt * j / k, b = cnt * (j + 1) / k;

            if (a == b)
                continue;
            g[np].etype = (uint32_t)etype;
            g[np].ids = ids;
            g[np].idx = pos + start[m] + a;
            g[np].n = b - a;
            g[np].out[0] = o0;
            g[np].out[1] = o1;
            parts[np].cn = &c->cn[m * c->nserv + (base + j) % c->nserv];
            parts[np].ops = ops;
            parts[np].arg = &g[np];
            np++;
        }
    }
    rc = net__exchange(c, parts, np, net__deadline((uint64_t)c->timeout_ms));
out:
    if (rc == GKV_OK && gs != NULL) {
        /* in_subgraph: the slices and their positions, for the merge */
        *gs = g;
        *ngs = np;
        *keep = pos;
        g = NULL;
        pos = NULL;
    } else if (g != NULL) {
        for (size_t i = 0; i < np; i++)
            for (int k = 0; k < 3; k++)
                gkv__free(g[i].sub[k]);
    }
    gkv__free(g);
    gkv__free(parts);
    gkv__free(count);
    gkv__free(start);
    gkv__free(per);
    gkv__free(pos);
    return rc;
}

/* Checks an edge type and the arrays of an ID request. */
static gkv_err
ids_args(gkv_client *c, const char *what, int etype, const void *in,
         size_t n, const void *o0, const void *o1, gkv_etype_info *ei)
{
    gkv_err rc;

    if ((rc = net__need_book(c, what)) != GKV_OK)
        return rc;
    if (gkv_pbook_etype_info(c->book, etype, ei) != GKV_OK)
        return net__fail(GKV_EINVAL, "%s: edge type %d: the graph has %d",
                         what, etype, gkv_pbook_num_etypes(c->book));
    if (n > 0 && (in == NULL || o0 == NULL || o1 == NULL))
        return net__fail(GKV_EINVAL, "%s: NULL array with n = %zu", what, n);
    return GKV_OK;
}

/* (the edge batch calls it inside its own call) */
gkv_err
net__find_edges_locked(gkv_client *c, int etype, const int64_t *eids, size_t n,
                       int64_t *src, int64_t *dst)
{
    gkv_etype_info ei;
    gkv_err rc;

    if ((rc = ids_args(c, "find_edges", etype, eids, n, src, dst, &ei)) !=
        GKV_OK || n == 0)
        return rc;
    return ids_call(c, &find_edges_ops, etype, etype, 1, eids, n, src, dst,
                    NULL, NULL, NULL);
}

gkv_err
gkv_client_find_edges(gkv_client *c, int etype, const int64_t *eids, size_t n,
                      int64_t *src, int64_t *dst)
{
    gkv_err rc;

    net__clear();
    if (c == NULL)
        return net__fail(GKV_EINVAL, "find_edges: no client");
    pthread_mutex_lock(&c->mu);
    rc = net__find_edges_locked(c, etype, eids, n, src, dst);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static gkv_err
degrees(gkv_client *c, const struct part_ops *ops, int etype,
        const int64_t *nodes, size_t n, int64_t *deg)
{
    const char *what = net__type_name(ops->type);
    gkv_etype_info ei;
    gkv_err rc;

    net__clear();
    if (c == NULL)
        return net__fail(GKV_EINVAL, "%s: no client", what);
    pthread_mutex_lock(&c->mu);
    if ((rc = ids_args(c, what, etype, nodes, n, deg, deg, &ei)) == GKV_OK &&
        n > 0)
        rc = ids_call(c, ops, etype, ops->type == NET_IN_DEGREES ?
                      ei.dst_ntype : ei.src_ntype, 0, nodes, n, deg, NULL,
                      NULL, NULL, NULL);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

gkv_err
gkv_client_in_degrees(gkv_client *c, int etype, const int64_t *nodes,
                      size_t n, int64_t *deg)
{
    return degrees(c, &in_degrees_ops, etype, nodes, n, deg);
}

gkv_err
gkv_client_out_degrees(gkv_client *c, int etype, const int64_t *nodes,
                       size_t n, int64_t *deg)
{
    return degrees(c, &out_degrees_ops, etype, nodes, n, deg);
}

gkv_err
gkv_client_in_subgraph(gkv_client *c, int etype, const int64_t *nodes,
                       size_t n, int64_t **src, int64_t **dst, int64_t **eid,
                       size_t *m)
{
    struct gids *g = NULL;
    size_t ng = 0, *pos = NULL, *cnt = NULL, *off = NULL, *pc = NULL, total = 0;
    size_t nu = 0, *map = NULL;
    int64_t *uniq = NULL;
    uint32_t *which = NULL;
    int64_t *o[3] = {NULL, NULL, NULL};
    gkv_etype_info ei;
    gkv_err rc;

    net__clear();
    if (c == NULL || src == NULL || dst == NULL || eid == NULL || m == NULL)
        return net__fail(GKV_EINVAL, "in_subgraph: missing argument");
    *src = *dst = *eid = NULL;
    *m = 0;
    pthread_mutex_lock(&c->mu);
    if ((rc = ids_args(c, "in_subgraph", etype, nodes, n, src, dst, &ei)) !=
        GKV_OK || n == 0)
        goto out;
    if ((rc = net__dedup(nodes, n, &uniq, &nu, &map)) != GKV_OK ||
        (rc = ids_call(c, &in_subgraph_ops, etype, ei.dst_ntype, 0, uniq, nu,
                            NULL, NULL, &g, &ng, &pos)) != GKV_OK)
        goto out;
    if ((cnt = gkv__malloc(nu * sizeof *cnt)) == NULL ||
        (off = gkv__malloc(nu * sizeof *off)) == NULL ||
        (pc = gkv__malloc(nu * sizeof *pc)) == NULL ||
        (which = gkv__malloc(nu * sizeof *which)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    /* each slice's edges, node by node, back to the request's order */
    for (size_t k = 0; k < ng; k++) {
        size_t a = 0;

        if (split_edges(uniq, g[k].idx, g[k].n, g[k].sub[1], g[k].m, pc) != 0) {
            rc = net__fail(GKV_EPROTO, "in_subgraph: a server's edges do not "
                           "match the nodes asked for");
            goto out;
        }
        for (size_t j = 0; j < g[k].n; j++) {
            size_t i = g[k].idx[j];
            which[i] = (uint32_t)k;
            off[i] = a;
            cnt[i] = pc[j];
            a += pc[j];
        }
    }
    for (size_t i = 0; i < n; i++)
        total += cnt[map[i]];
    for (int i = 0; i < 3; i++)
        if ((o[i] = gkv__malloc(total * 8 + 8)) == NULL) {
            rc = net__fail(GKV_ENOMEM, "out of memory for %zu edges", total);
            goto out;
        }
    for (size_t i = 0, at = 0; i < n; i++) {
        size_t u = map[i];
        const struct gids *gi = &g[which[u]];
        for (int k = 0; k < 3; k++)
            memcpy(o[k] + at, gi->sub[k] + off[u], cnt[u] * 8);
        at += cnt[u];
    }
    if (total > 0) {
        *src = o[0];
        *dst = o[1];
        *eid = o[2];
        o[0] = o[1] = o[2] = NULL;
    }
    *m = total;
out:
    for (int i = 0; i < 3; i++)
        gkv__free(o[i]);
    for (size_t k = 0; k < ng; k++)
        for (int i = 0; i < 3; i++)
            gkv__free(g[k].sub[i]);
    gkv__free(g);
    gkv__free(pos);
    gkv__free(cnt);
    gkv__free(off);
    gkv__free(pc);
    gkv__free(which);
    gkv__free(uniq);
    gkv__free(map);
    pthread_mutex_unlock(&c->mu);
    return rc;
}
