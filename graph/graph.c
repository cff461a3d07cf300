/* graph.c - the in-memory graph: schema, COO edges per edge type, the
 * per-graph message, and the helpers the other files of graph/ share. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "graph/graph_int.h"

/* ---- messages and small helpers --------------------------------------- */

const char *
gkv_graph_errmsg(const gkv_graph *g)
{
    return g != NULL ? gkv__errmsg_about(g) : "";
}

int
graph__name_ok(const char *name, const char **why)
{
    size_t n;

    if (name == NULL || (n = strlen(name)) == 0) {
        *why = "is empty";
        return 0;
    }
    if (n > GKV_TYPE_NAME_MAX) {
        *why = "is longer than 63 bytes";
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c <= ' ' || c >= 127) {
            *why = "holds a blank or a byte that is not printable ASCII";
            return 0;
        }
        if (c == ',' || c == ':' || c == '#' || c == '/') {
            *why = "holds one of , : # /";
            return 0;
        }
    }
    return 1;
}

const char *
graph__show(char buf[64], const char *s, size_t len)
{
    size_t n = len > 40 ? 40 : len, i;

    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[i] = (c >= ' ' && c < 127) ? (char)c : '?';
    }
    if (n < len) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
    return buf;
}

/* ---- threads ------------------------------------------------------------ */

struct par_arg {
    void (*fn)(void *);
    void *arg;
};

static void *
par_main(void *p)
{
    struct par_arg *a = p;

    a->fn(a->arg);
    return NULL;
}

void
graph__parallel(void (*fn)(void *), void *args, size_t arg_size, int n)
{
    enum { MAXT = 64 };
    pthread_t th[MAXT];
    struct par_arg pa[MAXT];
    int started[MAXT];

    if (n > MAXT)
        n = MAXT;    /* callers never ask for more; see csc.c and rmat.c */
    for (int i = 1; i < n; i++) {
        pa[i].fn = fn;
        pa[i].arg = (char *)args + (size_t)i * arg_size;
        started[i] = pthread_create(&th[i], NULL, par_main, &pa[i]) == 0;
    }
    fn(args);
    /* A thread that could not start costs time, not correctness. */
    for (int i = 1; i < n; i++)
        if (!started[i])
            fn((char *)args + (size_t)i * arg_size);
    for (int i = 1; i < n; i++)
        if (started[i])
            pthread_join(th[i], NULL);
}

/* ---- schema ------------------------------------------------------------- */

gkv_err
gkv_graph_new(gkv_graph **out)
{
    gkv_graph *g;

    if (out == NULL)
        return GKV_EINVAL;
    *out = NULL;
    if ((g = gkv__calloc(1, sizeof *g)) == NULL)
        return GKV_ENOMEM;
    *out = g;
    return GKV_OK;
}

gkv_err
gkv_graph_new_homo(gkv_graph **out, int64_t num_nodes)
{
    gkv_graph *g = NULL;
    gkv_err rc;

    if (out == NULL)
        return GKV_EINVAL;
    *out = NULL;
    if (num_nodes < GKV_GRAPH_GROW)
        return GKV_EINVAL;
    if ((rc = gkv_graph_new(&g)) != GKV_OK ||
        (rc = gkv_graph_add_ntype(g, "_N", num_nodes, NULL)) != GKV_OK ||
        (rc = gkv_graph_add_etype(g, "_N", "_E", "_N", NULL)) != GKV_OK) {
        gkv_graph_free(g);
        return rc;
    }
    *out = g;
    return GKV_OK;
}

void
gkv_graph_free(gkv_graph *g)
{
    if (g == NULL)
        return;
    for (int i = 0; i < g->g_net; i++) {
        gkv__free(g->g_et[i].et_srcv);
        gkv__free(g->g_et[i].et_dstv);
        gkv__free(g->g_et[i].et_w);
    }
    gkv__free(g->g_et);
    gkv__free(g->g_nt);
    gkv__free(g);
}

/* Grows an array of types to hold one more; *cap doubles. */
static gkv_err
grow_types(void **arr, int *cap, int used, size_t elem)
{
    int ncap;
    void *p;

    if (used < *cap)
        return GKV_OK;
    ncap = *cap ? *cap * 2 : 4;
    if (ncap > GKV_GRAPH_TYPES_MAX)
        ncap = GKV_GRAPH_TYPES_MAX;
    if ((p = gkv__realloc(*arr, (size_t)ncap * elem)) == NULL)
        return GKV_ENOMEM;
    *arr = p;
    *cap = ncap;
    return GKV_OK;
}

gkv_err
gkv_graph_add_ntype(gkv_graph *g, const char *name, int64_t num_nodes,
                    int *ntype)
{
    struct graph_ntype *nt;
    const char *why;
    int dummy;

    if (g == NULL)
        return GKV_EINVAL;
    graph__clear(g);
    if (!graph__name_ok(name, &why))
        return graph__fail(g, GKV_EINVAL, "node type name '%s' %s",
                           name ? name : "(null)", why);
    if (num_nodes < GKV_GRAPH_GROW)
        return graph__fail(g, GKV_EINVAL, "node type '%s': %lld nodes",
                           name, (long long)num_nodes);
    if (gkv_graph_ntype_find(g, name, &dummy) == GKV_OK)
        return graph__fail(g, GKV_EEXIST, "node type '%s' exists", name);
    if (g->g_nnt >= GKV_GRAPH_TYPES_MAX)
        return graph__fail(g, GKV_EINVAL, "more than %d node types",
                           GKV_GRAPH_TYPES_MAX);
    if (grow_types((void **)&g->g_nt, &g->g_ntcap, g->g_nnt, sizeof *nt))
        return graph__fail(g, GKV_ENOMEM, "out of memory");
    nt = &g->g_nt[g->g_nnt];
    memset(nt, 0, sizeof *nt);
    strcpy(nt->nt_name, name);
    nt->nt_grow = num_nodes == GKV_GRAPH_GROW;
    nt->nt_count = nt->nt_grow ? 0 : num_nodes;
    if (ntype != NULL)
        *ntype = g->g_nnt;
    g->g_nnt++;
    return GKV_OK;
}

gkv_err
gkv_graph_add_etype(gkv_graph *g, const char *src_type, const char *relation,
                    const char *dst_type, int *etype)
{
    struct graph_etype *et;
    const char *why;
    int s, d;

    if (g == NULL)
        return GKV_EINVAL;
    graph__clear(g);
    if (src_type == NULL || gkv_graph_ntype_find(g, src_type, &s) != GKV_OK)
        return graph__fail(g, GKV_ENOTFOUND, "no node type '%s'",
                           src_type ? src_type : "(null)");
    if (dst_type == NULL || gkv_graph_ntype_find(g, dst_type, &d) != GKV_OK)
        return graph__fail(g, GKV_ENOTFOUND, "no node type '%s'",
                           dst_type ? dst_type : "(null)");
    if (!graph__name_ok(relation, &why))
        return graph__fail(g, GKV_EINVAL, "relation name '%s' %s",
                           relation ? relation : "(null)", why);
    for (int i = 0; i < g->g_net; i++)
        if (g->g_et[i].et_src == s && g->g_et[i].et_dst == d &&
            strcmp(g->g_et[i].et_rel, relation) == 0)
            return graph__fail(g, GKV_EEXIST, "edge type '%s' exists",
                               g->g_et[i].et_canon);
    if (g->g_net >= GKV_GRAPH_TYPES_MAX)
        return graph__fail(g, GKV_EINVAL, "more than %d edge types",
                           GKV_GRAPH_TYPES_MAX);
    if (grow_types((void **)&g->g_et, &g->g_etcap, g->g_net, sizeof *et))
        return graph__fail(g, GKV_ENOMEM, "out of memory");
    et = &g->g_et[g->g_net];
    memset(et, 0, sizeof *et);
    strcpy(et->et_rel, relation);
    snprintf(et->et_canon, sizeof et->et_canon, "%s:%s:%s", src_type,
             relation, dst_type);
    et->et_src = s;
    et->et_dst = d;
    et->et_rel_unique = 1;
    for (int i = 0; i < g->g_net; i++)
        if (strcmp(g->g_et[i].et_rel, relation) == 0)
            et->et_rel_unique = g->g_et[i].et_rel_unique = 0;
    if (etype != NULL)
        *etype = g->g_net;
    g->g_net++;
    return GKV_OK;
}

gkv_err
gkv_graph_set_num_nodes(gkv_graph *g, int ntype, int64_t num_nodes)
{
    struct graph_ntype *nt;

    if (g == NULL)
        return GKV_EINVAL;
    graph__clear(g);
    if (ntype < 0 || ntype >= g->g_nnt)
        return graph__fail(g, GKV_EINVAL, "no node type %d", ntype);
    nt = &g->g_nt[ntype];
    if (num_nodes < nt->nt_count)
        return graph__fail(g, GKV_ERANGE,
                           "node type '%s': %lld nodes is fewer than the %lld "
                           "it has", nt->nt_name, (long long)num_nodes,
                           (long long)nt->nt_count);
    nt->nt_count = num_nodes;
    nt->nt_grow = 0;
    return GKV_OK;
}

int
gkv_graph_num_ntypes(const gkv_graph *g)
{
    return g != NULL ? g->g_nnt : 0;
}

int
gkv_graph_num_etypes(const gkv_graph *g)
{
    return g != NULL ? g->g_net : 0;
}

const char *
gkv_graph_ntype_name(const gkv_graph *g, int ntype)
{
    if (g == NULL || ntype < 0 || ntype >= g->g_nnt)
        return NULL;
    return g->g_nt[ntype].nt_name;
}

int64_t
gkv_graph_num_nodes(const gkv_graph *g, int ntype)
{
    if (g == NULL || ntype < 0 || ntype >= g->g_nnt)
        return -1;
    return g->g_nt[ntype].nt_count;
}

int64_t
gkv_graph_num_edges(const gkv_graph *g, int etype)
{
    if (g == NULL || etype < 0 || etype >= g->g_net)
        return -1;
    return g->g_et[etype].et_n;
}

gkv_err
gkv_graph_ntype_find(const gkv_graph *g, const char *name, int *ntype)
{
    if (g == NULL || name == NULL)
        return GKV_EINVAL;
    for (int i = 0; i < g->g_nnt; i++)
        if (strcmp(g->g_nt[i].nt_name, name) == 0) {
            if (ntype != NULL)
                *ntype = i;
            return GKV_OK;
        }
    return GKV_ENOTFOUND;
}

gkv_err
gkv_graph_etype_find(const gkv_graph *g, const char *name, int *etype)
{
    int found = -1;

    if (g == NULL || name == NULL)
        return GKV_EINVAL;
    if (strchr(name, ':') != NULL) {
        for (int i = 0; i < g->g_net; i++)
            if (strcmp(g->g_et[i].et_canon, name) == 0) {
                found = i;
                break;
            }
    } else {
        for (int i = 0; i < g->g_net; i++)
            if (strcmp(g->g_et[i].et_rel, name) == 0) {
                if (!g->g_et[i].et_rel_unique)
                    return GKV_EINVAL;
                found = i;
                break;
            }
    }
    if (found < 0)
        return GKV_ENOTFOUND;
    if (etype != NULL)
        *etype = found;
    return GKV_OK;
}

gkv_err
gkv_graph_etype_info(const gkv_graph *g, int etype, gkv_etype_info *out)
{
    const struct graph_etype *et;

    if (g == NULL || out == NULL || etype < 0 || etype >= g->g_net)
        return GKV_EINVAL;
    et = &g->g_et[etype];
    out->canonical = et->et_canon;
    out->relation = et->et_rel;
    out->src_ntype = et->et_src;
    out->dst_ntype = et->et_dst;
    out->src_type = g->g_nt[et->et_src].nt_name;
    out->dst_type = g->g_nt[et->et_dst].nt_name;
    out->num_edges = et->et_n;
    out->weighted = et->et_w != NULL;
    return GKV_OK;
}

/* ---- edges -------------------------------------------------------------- */

gkv_err
graph__reserve(gkv_graph *g, int e, int64_t extra, int weighted)
{
    struct graph_etype *et = &g->g_et[e];
    int64_t need, ncap;
    int64_t *s, *d;
    float *w;

    if (extra < 0 || et->et_n > INT64_MAX - extra)
        return GKV_EINVAL;
    need = et->et_n + extra;
    if ((uint64_t)need > SIZE_MAX / sizeof(int64_t))
        return GKV_ENOMEM;
    if (need > et->et_cap) {
        ncap = et->et_cap < 1024 ? 1024 : et->et_cap + et->et_cap / 2;
        if (ncap < need || (uint64_t)ncap > SIZE_MAX / sizeof(int64_t))
            ncap = need;
        /* realloc one array at a time; a failure leaves the others larger,
         * which is harmless: et_cap moves only when all three have grown. */
        if ((s = gkv__realloc(et->et_srcv, (size_t)ncap * sizeof *s)) == NULL)
            return GKV_ENOMEM;
        et->et_srcv = s;
        if ((d = gkv__realloc(et->et_dstv, (size_t)ncap * sizeof *d)) == NULL)
            return GKV_ENOMEM;
        et->et_dstv = d;
        if (et->et_w != NULL) {
            if ((w = gkv__realloc(et->et_w, (size_t)ncap * sizeof *w)) == NULL)
                return GKV_ENOMEM;
            et->et_w = w;
        }
        et->et_cap = ncap;
    }
    if (weighted && et->et_w == NULL) {
        size_t cap = et->et_cap > 0 ? (size_t)et->et_cap : 1;
        if ((w = gkv__malloc(cap * sizeof *w)) == NULL)
            return GKV_ENOMEM;
        for (int64_t i = 0; i < et->et_n; i++)
            w[i] = 1.0f;
        et->et_w = w;
    }
    return GKV_OK;
}

gkv_err
gkv_graph_edges(const gkv_graph *g, int etype, gkv_coo *out)
{
    const struct graph_etype *et;

    if (g == NULL || out == NULL || etype < 0 || etype >= g->g_net)
        return GKV_EINVAL;
    et = &g->g_et[etype];
    out->src = et->et_srcv;
    out->dst = et->et_dstv;
    out->w = et->et_w;
    out->n = et->et_n;
    return GKV_OK;
}

/* Checks ids[0..n) against node type nt; *max gets the largest ID. */
static gkv_err
check_ids(gkv_graph *g, const struct graph_ntype *nt, const int64_t *ids,
          size_t n, const char *which, int64_t *max)
{
    int64_t m = -1;

    for (size_t i = 0; i < n; i++) {
        int64_t v = ids[i];
        /* a growing type's count, v + 1, must fit: v < INT64_MAX */
        if (v < 0 || v >= (nt->nt_grow ? INT64_MAX : nt->nt_count)) {
            if (v < 0)
                return graph__fail(g, GKV_ERANGE, "edge %zu: %s %lld is "
                                   "negative", i, which, (long long)v);
            if (nt->nt_grow)
                return graph__fail(g, GKV_ERANGE, "edge %zu: %s %lld is too "
                                   "large for the growing node type '%s' "
                                   "(at most 2^63 - 1 nodes)", i, which,
                                   (long long)v, nt->nt_name);
            return graph__fail(g, GKV_ERANGE, "edge %zu: %s %lld is not "
                               "below %lld, the number of '%s' nodes", i,
                               which, (long long)v, (long long)nt->nt_count,
                               nt->nt_name);
        }
        if (v > m)
            m = v;
    }
    *max = m;
    return GKV_OK;
}

gkv_err
gkv_graph_add_edges(gkv_graph *g, int etype, const int64_t *src,
                    const int64_t *dst, const float *w, size_t n)
{
    struct graph_etype *et;
    struct graph_ntype *ns, *nd;
    int64_t smax, dmax;
    gkv_err rc;

    if (g == NULL)
        return GKV_EINVAL;
    graph__clear(g);
    if (etype < 0 || etype >= g->g_net)
        return graph__fail(g, GKV_EINVAL, "no edge type %d", etype);
    if (n > 0 && (src == NULL || dst == NULL))
        return graph__fail(g, GKV_EINVAL, "NULL src or dst array");
    if (n > (size_t)INT64_MAX)
        return graph__fail(g, GKV_EINVAL, "too many edges");
    et = &g->g_et[etype];
    ns = &g->g_nt[et->et_src];
    nd = &g->g_nt[et->et_dst];
    if ((rc = check_ids(g, ns, src, n, "src", &smax)) != GKV_OK ||
        (rc = check_ids(g, nd, dst, n, "dst", &dmax)) != GKV_OK)
        return rc;
    if (w != NULL)
        for (size_t i = 0; i < n; i++)
            if (!isfinite(w[i]) || w[i] < 0)
                return graph__fail(g, GKV_EFORMAT, "edge %zu: weight %g is "
                                   "%s", i, (double)w[i], isfinite(w[i]) ?
                                   "negative (weights must be 0 or more)" :
                                   "not finite");
    if ((rc = graph__reserve(g, etype, (int64_t)n, w != NULL)) != GKV_OK)
        return graph__fail(g, rc, "edge type '%s': no memory for %zu more "
                           "edges", et->et_canon, n);
    if (n > 0) {
        memcpy(et->et_srcv + et->et_n, src, n * sizeof *src);
        memcpy(et->et_dstv + et->et_n, dst, n * sizeof *dst);
    }
    if (et->et_w != NULL) {
        if (w != NULL && n > 0)
            memcpy(et->et_w + et->et_n, w, n * sizeof *w);
        else
            for (size_t i = 0; i < n; i++)
                et->et_w[et->et_n + (int64_t)i] = 1.0f;
    }
    et->et_n += (int64_t)n;
    if (ns->nt_grow && smax >= ns->nt_count)
        ns->nt_count = smax + 1;
    if (nd->nt_grow && dmax >= nd->nt_count)
        nd->nt_count = dmax + 1;
    return GKV_OK;
}

/* ---- mark and rollback -------------------------------------------------- */

gkv_err
graph__mark(const gkv_graph *g, graph_mark *m)
{
    memset(m, 0, sizeof *m);
    m->mk_n = gkv__malloc(((size_t)g->g_net + 1) * sizeof *m->mk_n);
    m->mk_hadw = gkv__malloc((size_t)g->g_net + 1);
    m->mk_count = gkv__malloc(((size_t)g->g_nnt + 1) * sizeof *m->mk_count);
    if (m->mk_n == NULL || m->mk_hadw == NULL || m->mk_count == NULL) {
        graph__mark_free(m);
        return GKV_ENOMEM;
    }
    for (int i = 0; i < g->g_net; i++) {
        m->mk_n[i] = g->g_et[i].et_n;
        m->mk_hadw[i] = g->g_et[i].et_w != NULL;
    }
    for (int i = 0; i < g->g_nnt; i++)
        m->mk_count[i] = g->g_nt[i].nt_count;
    return GKV_OK;
}

void
graph__rollback(gkv_graph *g, const graph_mark *m)
{
    for (int i = 0; i < g->g_net; i++) {
        g->g_et[i].et_n = m->mk_n[i];
        if (!m->mk_hadw[i]) {
            gkv__free(g->g_et[i].et_w);
            g->g_et[i].et_w = NULL;
        }
    }
    for (int i = 0; i < g->g_nnt; i++)
        g->g_nt[i].nt_count = m->mk_count[i];
}

void
graph__mark_free(graph_mark *m)
{
    gkv__free(m->mk_n);
    gkv__free(m->mk_hadw);
    gkv__free(m->mk_count);
    memset(m, 0, sizeof *m);
}
