/* part_write_metis.c - METIS k-way assignment for the partitioner.
 *
 * libmetis wants an undirected graph in CSR form (xadj, adjncy) without
 * self-loops or duplicate entries, in its idx_t, which Debian builds as 32
 * bits (IDXTYPEWIDTH in /usr/include/metis.h). The homogeneous view puts
 * every node type in one ID space (type t starts at the sum of the counts of
 * types 0..t-1) and lists each edge (u, v), u != v, at both ends. Counting
 * and filling use int64 offsets, so a graph too big for idx_t is refused
 * with a message before METIS sees it, never truncated. */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <metis.h>
#include "graph/part_write.h"

#if IDXTYPEWIDTH == 32
#define IDX_LIMIT INT32_MAX
#else
#define IDX_LIMIT INT64_MAX
#endif

gkv_err
pw__msg(char *msg, size_t msglen, gkv_err rc, const char *fmt, ...)
{
    va_list ap;

    if (msg != NULL && msglen > 0) {
        va_start(ap, fmt);
        vsnprintf(msg, msglen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static int
idx_cmp(const void *a, const void *b)
{
    idx_t x = *(const idx_t *)a, y = *(const idx_t *)b;

    return (x > y) - (x < y);
}

/* METIS_PartGraphKway without METIS's signal handling: for the call,
 * libmetis (GKlib) installs handlers of its own for SIGTERM and SIGABRT
 * that longjmp out of whatever it was doing (malloc included) and free
 * its memory, so a SIGTERM meant for the program made the call fail, hang
 * on malloc's lock or crash, and the program's own handler never ran. The
 * calling thread holds SIGTERM blocked for the call and the program's
 * handlers are put back as they were (GKlib restores them with signal(),
 * which drops their flags and masks); a SIGTERM that came meanwhile is
 * delivered after, to the program's handler. The price: GKlib reports its
 * own internal errors with raise(SIGTERM) too, and those (out of memory
 * inside METIS; bad input is checked before the call) now end the
 * program by that signal once METIS returns, instead of the call
 * returning METIS_ERROR. Only the calling thread blocks the signal. */
static int
metis_call(idx_t *nv, idx_t *ncon, idx_t *xadj, idx_t *adj, idx_t *vwgt,
           idx_t *nparts, idx_t *options, idx_t *cut, idx_t *part)
{
    struct sigaction term, abrt;
    sigset_t block, old;
    int mrc;

    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaction(SIGTERM, NULL, &term);
    sigaction(SIGABRT, NULL, &abrt);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    mrc = METIS_PartGraphKway(nv, ncon, xadj, adj, vwgt, NULL, NULL, nparts,
                              NULL, NULL, options, cut, part);
    sigaction(SIGTERM, &term, NULL);
    sigaction(SIGABRT, &abrt, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return mrc;
}

/* Sorts v[0..n) and drops repeats; returns the new length. */
static int64_t
sort_unique(idx_t *v, int64_t n)
{
    int64_t k;

    if (n < 2)
        return n;
    if (n <= 32) {
        for (int64_t i = 1; i < n; i++) {
            idx_t x = v[i];
            int64_t j = i;
            while (j > 0 && v[j - 1] > x) {
                v[j] = v[j - 1];
                j--;
            }
            v[j] = x;
        }
    } else {
        qsort(v, (size_t)n, sizeof *v, idx_cmp);
    }
    k = 1;
    for (int64_t i = 1; i < n; i++)
        if (v[i] != v[k - 1])
            v[k++] = v[i];
    return k;
}

gkv_err
pw__metis_check(const gkv_graph *g, char *msg, size_t msglen)
{
    int64_t nv = 0;

    for (int t = 0; t < gkv_graph_num_ntypes(g); t++)
        nv += gkv_graph_num_nodes(g, t);
    if (nv > IDX_LIMIT)
        return pw__msg(msg, msglen, GKV_ERANGE, "graph too large for METIS: "
                       "%lld nodes, but its idx_t is %d bits (at most %lld)",
                       (long long)nv, IDXTYPEWIDTH, (long long)IDX_LIMIT);
    return GKV_OK;
}

gkv_err
pw__metis(const gkv_graph *g, int nparts, uint64_t seed, int balance_edges,
          uint8_t *const *mask, uint16_t *const *owner, int64_t *objval,
          char *msg, size_t msglen)
{
    int nnt = gkv_graph_num_ntypes(g), net = gkv_graph_num_etypes(g);
    int64_t *off = NULL, *ptr = NULL, *cur = NULL, nv = 0, total = 0, w;
    idx_t *adj = NULL, *xadj = NULL, *vwgt = NULL, *part = NULL;
    idx_t options[METIS_NOPTIONS], n_idx, ncon, np_idx, cut = 0;
    int use_deg = 0, use_mask = 0, mrc;
    int64_t degsum = 0, masksum = 0;
    gkv_err rc = GKV_OK;

    if (objval != NULL)
        *objval = 0;
    if ((off = gkv__calloc((size_t)nnt + 1, sizeof *off)) == NULL)
        goto nomem;
    for (int t = 0; t < nnt; t++)
        off[t + 1] = off[t] + gkv_graph_num_nodes(g, t);
    nv = off[nnt];
    if (nparts <= 1 || nv == 0) {
        for (int t = 0; t < nnt; t++)
            if (gkv_graph_num_nodes(g, t) > 0)
                memset(owner[t], 0, (size_t)gkv_graph_num_nodes(g, t) *
                       sizeof *owner[t]);
        goto out;
    }
    if (nv > IDX_LIMIT) {
        rc = pw__msg(msg, msglen, GKV_ERANGE, "graph too large for METIS: "
                     "%lld nodes, but its idx_t is %d bits (at most %lld)",
                     (long long)nv, IDXTYPEWIDTH, (long long)IDX_LIMIT);
        goto out;
    }

    /* Degrees in the symmetric view: ptr[u + 1] counts u's neighbours. */
    if ((ptr = gkv__calloc((size_t)nv + 1, sizeof *ptr)) == NULL)
        goto nomem;
    for (int e = 0; e < net; e++) {
        gkv_etype_info info;
        gkv_coo c;
        int64_t so, dof;

        gkv_graph_etype_info(g, e, &info);
        gkv_graph_edges(g, e, &c);
        so = off[info.src_ntype];
        dof = off[info.dst_ntype];
        for (int64_t i = 0; i < c.n; i++) {
            int64_t u = so + c.src[i], v = dof + c.dst[i];
            if (u != v) {
                ptr[u + 1]++;
                ptr[v + 1]++;
            }
        }
    }
    for (int64_t u = 0; u < nv; u++)
        ptr[u + 1] += ptr[u];
    total = ptr[nv];
    if ((uint64_t)total > SIZE_MAX / sizeof *adj)
        goto nomem;
    if ((adj = gkv__malloc((size_t)(total ? total : 1) * sizeof *adj)) == NULL ||
        (cur = gkv__malloc((size_t)nv * sizeof *cur)) == NULL)
        goto nomem;
    memcpy(cur, ptr, (size_t)nv * sizeof *cur);
    for (int e = 0; e < net; e++) {
        gkv_etype_info info;
        gkv_coo c;
        int64_t so, dof;

        gkv_graph_etype_info(g, e, &info);
        gkv_graph_edges(g, e, &c);
        so = off[info.src_ntype];
        dof = off[info.dst_ntype];
        for (int64_t i = 0; i < c.n; i++) {
            int64_t u = so + c.src[i], v = dof + c.dst[i];
            if (u != v) {
                adj[cur[u]++] = (idx_t)v;
                adj[cur[v]++] = (idx_t)u;
            }
        }
    }
    gkv__free(cur);
    cur = NULL;

    /* Sort and deduplicate each list, compacting in place; xadj in idx_t. */
    if ((xadj = gkv__malloc(((size_t)nv + 1) * sizeof *xadj)) == NULL)
        goto nomem;
    total = 0;
    for (int64_t u = 0; u < nv; u++) {
        int64_t s = ptr[u], n = sort_unique(adj + s, ptr[u + 1] - s);
        xadj[u] = (idx_t)(total <= IDX_LIMIT ? total : 0);
        if (total != s)
            memmove(adj + total, adj + s, (size_t)n * sizeof *adj);
        total += n;
    }
    if (total > IDX_LIMIT) {
        rc = pw__msg(msg, msglen, GKV_ERANGE, "graph too large for METIS: "
                     "its symmetric adjacency has %lld entries, but METIS's "
                     "idx_t is %d bits (at most %lld)", (long long)total,
                     IDXTYPEWIDTH, (long long)IDX_LIMIT);
        goto out;
    }
    xadj[nv] = (idx_t)total;
    gkv__free(ptr);
    ptr = NULL;

    if (total == 0) {
        /* No edge between distinct nodes: nothing to cut, so balance by
         * contiguous slices of the homogeneous IDs. */
        for (int t = 0; t < nnt; t++)
            for (int64_t v = 0; v < gkv_graph_num_nodes(g, t); v++)
                owner[t][v] = (uint16_t)(((unsigned __int128)(off[t] + v) *
                                          (unsigned)nparts) / (uint64_t)nv);
        goto out;
    }

    /* Vertex weights: which constraints carry weight at all. */
    if (balance_edges)
        for (int e = 0; e < net; e++)
            degsum += gkv_graph_num_edges(g, e);
    for (int t = 0; mask != NULL && t < nnt; t++)
        if (mask[t] != NULL)
            for (int64_t v = 0; v < gkv_graph_num_nodes(g, t); v++)
                masksum += mask[t][v] != 0;
    use_deg = degsum > 0;
    use_mask = masksum > 0;
    if (degsum > IDX_LIMIT || nv > IDX_LIMIT) {
        rc = pw__msg(msg, msglen, GKV_ERANGE, "graph too large for METIS: "
                     "%lld in-edges to balance, but METIS's idx_t is %d "
                     "bits", (long long)degsum, IDXTYPEWIDTH);
        goto out;
    }
    ncon = (idx_t)(1 + use_deg + use_mask);
    if ((vwgt = gkv__calloc((size_t)nv * (size_t)ncon, sizeof *vwgt)) == NULL ||
        (part = gkv__malloc((size_t)nv * sizeof *part)) == NULL)
        goto nomem;
    for (int64_t u = 0; u < nv; u++)
        vwgt[u * ncon] = 1;
    if (use_deg)
        for (int e = 0; e < net; e++) {
            gkv_etype_info info;
            gkv_coo c;
            int64_t dof;

            gkv_graph_etype_info(g, e, &info);
            gkv_graph_edges(g, e, &c);
            dof = off[info.dst_ntype];
            for (int64_t i = 0; i < c.n; i++)
                vwgt[(dof + c.dst[i]) * ncon + 1]++;
        }
    if (use_mask)
        for (int t = 0; t < nnt; t++)
            if (mask[t] != NULL)
                for (int64_t v = 0; v < gkv_graph_num_nodes(g, t); v++)
                    vwgt[(off[t] + v) * ncon + ncon - 1] = mask[t][v] != 0;

    METIS_SetDefaultOptions(options);
    options[METIS_OPTION_OBJTYPE] = METIS_OBJTYPE_CUT;
    options[METIS_OPTION_NUMBERING] = 0;
    options[METIS_OPTION_SEED] = (idx_t)(seed & 0x7fffffff);
    n_idx = (idx_t)nv;
    np_idx = (idx_t)nparts;
    mrc = metis_call(&n_idx, &ncon, xadj, adj, vwgt, &np_idx, options, &cut,
                     part);
    if (mrc != METIS_OK) {
        rc = pw__msg(msg, msglen,
                     mrc == METIS_ERROR_MEMORY ? GKV_ENOMEM :
                     mrc == METIS_ERROR_INPUT ? GKV_EINVAL : GKV_EIO,
                     "METIS_PartGraphKway failed (%s) on %lld nodes and %lld "
                     "adjacency entries into %d parts",
                     mrc == METIS_ERROR_MEMORY ? "out of memory" :
                     mrc == METIS_ERROR_INPUT ? "input error" : "error",
                     (long long)nv, (long long)total, nparts);
        goto out;
    }
    for (int t = 0; t < nnt; t++)
        for (int64_t v = 0; v < gkv_graph_num_nodes(g, t); v++) {
            w = part[off[t] + v];
            owner[t][v] = (uint16_t)(w >= 0 && w < nparts ? w : 0);
        }
    if (objval != NULL)
        *objval = cut;
    goto out;
nomem:
    rc = pw__msg(msg, msglen, GKV_ENOMEM, "out of memory building the "
                 "METIS graph (%lld nodes, %lld adjacency entries)",
                 (long long)nv, (long long)total);
out:
    gkv__free(off);
    gkv__free(ptr);
    gkv__free(cur);
    gkv__free(adj);
    gkv__free(xadj);
    gkv__free(vwgt);
    gkv__free(part);
    return rc;
}
