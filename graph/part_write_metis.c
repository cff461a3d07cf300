/* part_write_metis.c - METIS assignment for the partitioner.
 *
 * libmetis wants an undirected graph in CSR form (xadj, adjncy) without
 * self-loops or duplicate entries, in its idx_t, which Debian builds as 32
 * bits (IDXTYPEWIDTH in /usr/include/metis.h). The homogeneous view puts
 * every node type in one ID space (type t starts at the sum of the counts of
 * types 0..t-1) and lists each edge (u, v), u != v, at both ends. Counting
 * and filling use int64 offsets, so a graph too big for idx_t is refused
 * with a message before METIS sees it, never truncated.
 *
 * What METIS gets (doc/BENCHMARKS.md, "METIS against DGL", has the
 * figures behind each choice):
 *   - each neighbour once, weighing the input edges between the two nodes
 *     (duplicates and both directions), so METIS's cut is the cut that the
 *     partitioner reports: input edges whose ends lie in different parts;
 *   - only the nodes with a neighbour, when node count is the only balance
 *     constraint and METIS bisects: a node without one cannot change the
 *     cut, and an R-MAT graph has ~38 % of them, which slowed recursive
 *     bisection 6x. They then fill, in order, the parts holding fewer
 *     than ceil(nodes / nparts), so each part
 *     still holds its share of all nodes within METIS's tolerance;
 *   - by default recursive bisection (METIS_PartGraphRecursive) with random
 *     matching (CTYPE RM), 2-3x faster than k-way with heavy-edge matching
 *     (METIS's and DGL's choice) on R-MAT and with half the cut there;
 *     GKV_PART_METIS_KWAY and GKV_PART_METIS_SHEM choose METIS's own;
 *   - with 3 or more parts, bisection's first level by hand (metis_split),
 *     so that each side's nodes left without a neighbour there are placed
 *     after, as above;
 *   - on large graphs, thinned (pw__thin): each node keeps its heaviest
 *     neighbours, the idea of DROPEDGES in DGL's METIS (edges dropped
 *     while coarsening), done here before METIS, which lacks it.
 * One METIS call at a time in the process (metis_lock): libmetis keeps its
 * random state (GKlib's Mersenne Twister) in globals, so two calls at once
 * made the partition differ from run to run. */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <metis.h>
#include "graph/part_write.h"

/* Below this many vertices the top bisection is not done by hand. */
#define SPLIT_MIN 256

/* From this many symmetric adjacency entries (R-MAT scale 20 has 31 M),
 * METIS's graph is thinned by default (GKV_PART_METIS_KEEP neighbours a
 * node); below, METIS is quick enough on every edge. */
#define THIN_MIN ((int64_t)1 << 24)

static int64_t thin_min = THIN_MIN;

/* Thinning by default from n entries (THIN_MIN; n < 0: THIN_MIN again):
 * a test setting, so that the default path runs on a small graph, made
 * while no partition runs. Not in part_write.h: tests declare it, and
 * pw__thin, themselves. */
void pw__set_thin_min(int64_t n);
int64_t pw__thin(idx_t n, idx_t *xadj, idx_t *adj, idx_t *ew, int64_t keep);

void
pw__set_thin_min(int64_t n)
{
    thin_min = n < 0 ? THIN_MIN : n;
}

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

/* METIS without METIS's signal handling: for each call, libmetis (GKlib)
 * installs handlers of its own for SIGTERM and SIGABRT that longjmp out of
 * whatever it was doing (malloc included) and free its memory, so a
 * SIGTERM meant for the program made the call fail, hang on malloc's lock
 * or crash, and the program's own handler never ran. sig_hold() blocks
 * SIGTERM in the calling thread and notes the program's handlers, under
 * metis_lock (mjob_run); sig_release(), after the call, puts them back as
 * they were (GKlib restores them with signal(), which drops their flags
 * and masks) and unblocks: a SIGTERM that came meanwhile is delivered
 * then, to the program's handler, still under the lock, so a handler
 * must return or end the process (one that longjmps out leaves the lock
 * held). The blocking covers the calling thread only: in a program with
 * other threads that do not block SIGTERM, a SIGTERM sent to the process
 * during a call may reach one of them and GKlib's handler; gkv-partition
 * runs METIS on its only thread. The price: GKlib reports its own
 * internal errors with raise(SIGTERM) too, and those (out of memory inside
 * METIS; bad input is checked before the call) now end the program by
 * that signal once METIS returns, instead of the call returning
 * METIS_ERROR. */
struct sig_held {
    struct sigaction term, abrt;
    sigset_t old;
};

static void
sig_hold(struct sig_held *h)
{
    sigset_t block;

    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaction(SIGTERM, NULL, &h->term);
    sigaction(SIGABRT, NULL, &h->abrt);
    pthread_sigmask(SIG_BLOCK, &block, &h->old);
}

static void
sig_release(const struct sig_held *h)
{
    sigaction(SIGTERM, &h->term, NULL);
    sigaction(SIGABRT, &h->abrt, NULL);
    pthread_sigmask(SIG_SETMASK, &h->old, NULL);
}

/* One METIS call on a graph of its own: the whole graph, the top
 * bisection of it, or one side of that bisection. */
struct mjob {
    idx_t n, ncon, nparts, cut;
    idx_t *xadj, *adj, *vwgt, *ew, *part;   /* ew may be NULL: unit */
    real_t *tpwgts;                         /* NULL: equal parts */
    idx_t options[METIS_NOPTIONS];
    int rb, mrc;
};

static pthread_mutex_t metis_lock = PTHREAD_MUTEX_INITIALIZER;

static void
mjob_run(struct mjob *j)
{
    struct sig_held held;

    j->cut = 0;
    j->mrc = METIS_OK;
    if (j->nparts <= 1 || j->n == 0) {
        for (idx_t k = 0; k < j->n; k++)
            j->part[k] = 0;
        return;
    }
    /* the handlers are noted and put back under the lock: noted while
     * another thread's call had libmetis's installed, they were put back
     * for good (a later SIGTERM then jumped to a dead frame) */
    pthread_mutex_lock(&metis_lock);
    sig_hold(&held);
    j->mrc = (j->rb ? METIS_PartGraphRecursive : METIS_PartGraphKway)(
        &j->n, &j->ncon, j->xadj, j->adj, j->vwgt, NULL, j->ew, &j->nparts,
        j->tpwgts, NULL, j->options, &j->cut, j->part);
    sig_release(&held);
    pthread_mutex_unlock(&metis_lock);
}

/* ---- thinning: DROPEDGES on our side ------------------------------------ */

/* An entry's rank in its node's list: the edge weight first, then a hash
 * of the unordered pair (the same at both ends), so that both ends of an
 * edge rank it alike and every choice is a function of the input. */
static inline uint64_t
thin_key(idx_t u, idx_t v, idx_t w)
{
    uint64_t a = (uint64_t)(u < v ? u : v), b = (uint64_t)(u < v ? v : u);
    uint64_t z = (a << 32 | b) * 0x9e3779b97f4a7c15ull;

    z ^= z >> 29;
    z *= 0xbf58476d1ce4e5b9ull;
    z ^= z >> 32;
    return (uint64_t)(uint32_t)w << 32 | (z & 0xffffffffull);
}

/* The k-th largest of a[0..n) (0 < k <= n), reordering a. Deterministic:
 * the pivot is the median of three fixed positions. */
static uint64_t
kth_largest(uint64_t *a, int64_t n, int64_t k)
{
    int64_t lo = 0, hi = n - 1, want = k - 1;

    while (lo < hi) {
        uint64_t x = a[lo], y = a[lo + (hi - lo) / 2], z = a[hi], p, t;
        int64_t i = lo, j = hi;
        p = x < y ? (y < z ? y : x < z ? z : x) : (x < z ? x : y < z ? z : y);
        while (i <= j) {
            while (a[i] > p)
                i++;
            while (a[j] < p)
                j--;
            if (i <= j) {
                t = a[i];
                a[i++] = a[j];
                a[j--] = t;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            break;
    }
    return a[want];
}

/* Thins the symmetric graph (n vertices, xadj/adj/ew; ew NULL = unit
 * weights) in place: a vertex of more than 'keep' neighbours keeps its
 * 'keep' heaviest (ties by thin_key's hash), and an edge stays when
 * either end keeps it, so the graph stays symmetric and no vertex loses
 * its last neighbour. Returns the entries left, or -1 out of memory. */
int64_t
pw__thin(idx_t n, idx_t *xadj, idx_t *adj, idx_t *ew, int64_t keep)
{
    uint64_t *thr = NULL, *buf = NULL;
    int64_t dmax = 0, k = 0;

    for (idx_t u = 0; u < n; u++)
        if (xadj[u + 1] - xadj[u] > dmax)
            dmax = xadj[u + 1] - xadj[u];
    if (dmax <= keep)           /* every node keeps every neighbour */
        return xadj[n];
    if ((thr = gkv__calloc((size_t)n + 1, sizeof *thr)) == NULL ||
        (buf = gkv__malloc(((size_t)dmax + 1) * sizeof *buf)) == NULL) {
        gkv__free(thr);
        return -1;
    }
    /* thr[u]: the least key u keeps (0: all) */
    for (idx_t u = 0; u < n; u++) {
        int64_t d = xadj[u + 1] - xadj[u];
        if (d <= keep)
            continue;
        for (int64_t i = 0; i < d; i++) {
            idx_t j = xadj[u] + (idx_t)i;
            buf[i] = thin_key(u, adj[j], ew != NULL ? ew[j] : 1);
        }
        thr[u] = kth_largest(buf, d, keep);
    }
    /* compaction in place: entry k is written after entry i >= k is read,
     * xadj[u] after xadj[u] and xadj[u + 1] are */
    for (idx_t u = 0, s = xadj[0], e; u < n; u++, s = e) {
        e = xadj[u + 1];
        xadj[u] = (idx_t)k;
        for (idx_t i = s; i < e; i++) {
            idx_t v = adj[i], w = ew != NULL ? ew[i] : 1;
            if (thr[u] != 0 || thr[v] != 0) {
                uint64_t key = thin_key(u, v, w);
                if (key < thr[u] && key < thr[v])
                    continue;
            }
            adj[k] = v;
            if (ew != NULL)
                ew[k] = w;
            k++;
        }
    }
    xadj[n] = (idx_t)k;
    gkv__free(thr);
    gkv__free(buf);
    return k;
}

/* Recursive bisection into nparts >= 3 with its first level split by
 * hand: top bisects the whole graph (part[] 0 or 1, in the ratio of the
 * two sides' part counts), then each side becomes a graph of its own (the
 * edges across dropped: they are cut whatever happens; its nodes without
 * a neighbour left in it out, placed after) and is cut into its parts.
 * The sides run one after the other: libmetis's random state is global
 * (metis_lock), and on R-MAT one side holds nearly all the edges anyway.
 * The whole graph's arrays (top's) are freed once the sides are built.
 * part[k] ends as the final part, top->cut as the whole cut. Returns a
 * METIS status, or METIS_ERROR_MEMORY. */
static int
metis_split(struct mjob *top, idx_t **xadj, idx_t **adj, idx_t **ew,
            idx_t **vwgt)
{
    struct mjob side[2];
    idx_t *sid = NULL, nc = top->ncon, np = top->nparts;
    real_t *tp = NULL;
    int64_t *ld = NULL, all[2] = {0, 0};
    idx_t fill[2] = {0, 0};
    int mrc = METIS_ERROR_MEMORY;

    memset(side, 0, sizeof side);
    side[0].nparts = (np + 1) / 2;
    side[1].nparts = np - side[0].nparts;
    if ((tp = gkv__malloc(2 * (size_t)nc * sizeof *tp)) == NULL ||
        (sid = gkv__malloc(((size_t)top->n + 1) * sizeof *sid)) == NULL)
        goto out;
    for (idx_t c = 0; c < nc; c++) {
        tp[c] = (real_t)side[0].nparts / (real_t)np;
        tp[nc + c] = 1 - tp[c];
    }
    top->nparts = 2;
    top->tpwgts = tp;
    mjob_run(top);
    top->nparts = np;
    top->tpwgts = NULL;
    if ((mrc = top->mrc) != METIS_OK)
        goto out;

    /* the sides' sizes, each vertex's ID in its side (-1: no neighbour
     * left there, and one constraint: placed after, as pw__metis places
     * its isolated nodes; they slow bisection several times; unless that
     * left the side fewer vertices than parts, which libmetis refuses
     * with a message on stdout), then their arrays */
    {
        idx_t kept[2] = {0, 0};
        int keep_all[2];

        for (idx_t k = 0; k < top->n; k++) {
            int h = top->part[k] != 0;
            idx_t d = 0;
            for (idx_t i = top->xadj[k]; i < top->xadj[k + 1]; i++)
                d += top->part[top->adj[i]] == top->part[k];
            sid[k] = d > 0 || nc > 1 ? 0 : -1;
            kept[h] += sid[k] == 0;
            side[h].cut += d;
        }
        for (int h = 0; h < 2; h++)
            keep_all[h] = kept[h] < side[h].nparts;
        for (idx_t k = 0; k < top->n; k++) {
            int h = top->part[k] != 0;
            sid[k] = sid[k] == 0 || keep_all[h] ? side[h].n++ : -1;
        }
    }
    mrc = METIS_ERROR_MEMORY;
    for (int h = 0; h < 2; h++) {
        struct mjob *s = &side[h];
        memcpy(s->options, top->options, sizeof s->options);
        s->ncon = nc;
        s->rb = 1;
        size_t n1 = (size_t)s->n + 1, e1 = (size_t)s->cut + 1;
        if ((s->xadj = gkv__malloc(n1 * sizeof *s->xadj)) == NULL ||
            (s->adj = gkv__malloc(e1 * sizeof *s->adj)) == NULL ||
            (top->ew != NULL &&
             (s->ew = gkv__malloc(e1 * sizeof *s->ew)) == NULL) ||
            (s->vwgt = gkv__malloc(n1 * (size_t)nc *
                                   sizeof *s->vwgt)) == NULL ||
            (s->part = gkv__malloc(n1 * sizeof *s->part)) == NULL)
            goto out;
        s->n = 0;
        s->cut = 0;
    }
    for (idx_t k = 0; k < top->n; k++) {
        struct mjob *s = &side[top->part[k] != 0];
        idx_t me;
        if (sid[k] < 0)
            continue;
        me = s->n++;
        s->xadj[me] = s->cut;
        for (idx_t i = top->xadj[k]; i < top->xadj[k + 1]; i++)
            if (top->part[top->adj[i]] == top->part[k]) {
                if (s->ew != NULL)
                    s->ew[s->cut] = top->ew[i];
                s->adj[s->cut++] = sid[top->adj[i]];
            }
        memcpy(s->vwgt + (size_t)me * nc, top->vwgt + (size_t)k * nc,
               (size_t)nc * sizeof *s->vwgt);
    }
    for (int h = 0; h < 2; h++)
        side[h].xadj[side[h].n] = side[h].cut;
    gkv__free(*xadj);
    gkv__free(*adj);
    gkv__free(*ew);
    gkv__free(*vwgt);
    *xadj = *adj = *ew = *vwgt = NULL;

    mjob_run(&side[0]);
    mjob_run(&side[1]);
    if ((mrc = side[0].mrc) != METIS_OK || (mrc = side[1].mrc) != METIS_OK)
        goto out;
    /* each part's vertices, then the side's dropped ones fill its parts
     * below ceil(side's vertices / side's parts), in order */
    if ((ld = gkv__calloc((size_t)np, sizeof *ld)) == NULL) {
        mrc = METIS_ERROR_MEMORY;
        goto out;
    }
    for (int h = 0; h < 2; h++) {
        idx_t base = h ? side[0].nparts : 0;
        for (idx_t j = 0; j < side[h].n; j++) {
            if (side[h].part[j] < 0 || side[h].part[j] >= side[h].nparts)
                side[h].part[j] = 0;
            ld[base + side[h].part[j]]++;
        }
    }
    for (idx_t k = 0; k < top->n; k++)
        all[top->part[k] != 0]++;
    for (idx_t k = 0; k < top->n; k++) {
        int h = top->part[k] != 0;
        idx_t base = h ? side[0].nparts : 0, last = base + side[h].nparts - 1;
        int64_t mark = (all[h] + side[h].nparts - 1) / side[h].nparts;
        if (sid[k] >= 0) {
            top->part[k] = base + side[h].part[sid[k]];
            continue;
        }
        if (fill[h] < base)
            fill[h] = base;
        while (fill[h] < last && ld[fill[h]] >= mark)
            fill[h]++;
        ld[fill[h]]++;
        top->part[k] = fill[h];
    }
    top->cut += side[0].cut + side[1].cut;
out:
    for (int h = 0; h < 2; h++) {
        gkv__free(side[h].xadj);
        gkv__free(side[h].adj);
        gkv__free(side[h].ew);
        gkv__free(side[h].vwgt);
        gkv__free(side[h].part);
    }
    gkv__free(sid);
    gkv__free(tp);
    gkv__free(ld);
    return mrc;
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
pw__metis(const gkv_graph *g, int nparts, uint64_t seed,
          unsigned flags, int keep, uint8_t *const *mask,
          uint16_t *const *owner, int64_t *objval, char *msg, size_t msglen)
{
    int nnt = gkv_graph_num_ntypes(g), net = gkv_graph_num_etypes(g);
    int64_t *off = NULL, *ptr = NULL, *cur = NULL, *load = NULL, nv = 0;
    int64_t total = 0, pre = 0, nk = 0, w;
    idx_t *adj = NULL, *ew = NULL, *xadj = NULL, *vwgt = NULL, *part = NULL;
    idx_t *map = NULL;
    idx_t options[METIS_NOPTIONS], ncon, cut = 0;
    struct mjob job;
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
    pre = total = ptr[nv];
    if ((uint64_t)total > SIZE_MAX / sizeof *adj)
        goto nomem;
    if ((adj = gkv__malloc((size_t)(total ? total : 1) *
                           sizeof *adj)) == NULL ||
        (ew = gkv__malloc((size_t)(total ? total : 1) * sizeof *ew)) == NULL ||
        (cur = gkv__malloc((size_t)nv * sizeof *cur)) == NULL ||
        (map = gkv__malloc((size_t)nv * sizeof *map)) == NULL)
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

    /* Merge each list's repeats into one entry weighing as many input
     * edges, compacting in place (writes never pass reads): map[v] == u
     * marks v seen in u's list, at position cur[v]. The lists stay in
     * input order (METIS does not need them sorted). ptr becomes the
     * compacted offsets. */
    for (int64_t u = 0; u < nv; u++)
        map[u] = -1;
    {
        int64_t s = 0, k = 0;
        for (int64_t u = 0; u < nv; u++) {
            int64_t e = ptr[u + 1];
            ptr[u] = k;
            for (int64_t i = s; i < e; i++) {
                idx_t v = adj[i];
                if (map[v] == (idx_t)u) {
                    ew[cur[v]]++;
                } else {
                    map[v] = (idx_t)u;
                    cur[v] = k;
                    adj[k] = v;
                    ew[k++] = 1;
                }
            }
            s = e;
        }
        ptr[nv] = total = k;
    }
    gkv__free(cur);
    cur = NULL;
    if (total > IDX_LIMIT) {
        rc = pw__msg(msg, msglen, GKV_ERANGE, "graph too large for METIS: "
                     "its symmetric adjacency has %lld entries, but METIS's "
                     "idx_t is %d bits (at most %lld)", (long long)total,
                     IDXTYPEWIDTH, (long long)IDX_LIMIT);
        goto out;
    }

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
    if (flags & GKV_PART_BALANCE_EDGES)
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

    /* The vertices METIS sees: map[u] is u's vertex there, or -1 when u
     * has no neighbour, node count is the only constraint and METIS
     * bisects (placed afterwards; k-way balances better with them and
     * cuts less). Too few vertices for the parts: every node goes. */
    for (int64_t u = 0; u < nv; u++)
        nk += ncon > 1 || (flags & GKV_PART_METIS_KWAY) || ptr[u + 1] > ptr[u];
    if (nk < nparts)
        nk = nv;
    for (int64_t u = 0, k = 0; u < nv; u++)
        map[u] = nk == nv || ptr[u + 1] > ptr[u] ? (idx_t)k++ : -1;

    if ((vwgt = gkv__calloc((size_t)nk * (size_t)ncon,
                            sizeof *vwgt)) == NULL ||
        (xadj = gkv__malloc(((size_t)nk + 1) * sizeof *xadj)) == NULL ||
        (part = gkv__malloc((size_t)nk * sizeof *part)) == NULL ||
        (load = gkv__calloc((size_t)nparts, sizeof *load)) == NULL)
        goto nomem;
    for (int64_t k = 0; k < nk; k++)
        vwgt[k * ncon] = 1;
    if (use_deg)
        for (int e = 0; e < net; e++) {
            gkv_etype_info info;
            gkv_coo c;
            int64_t dof;

            gkv_graph_etype_info(g, e, &info);
            gkv_graph_edges(g, e, &c);
            dof = off[info.dst_ntype];
            for (int64_t i = 0; i < c.n; i++)
                vwgt[(int64_t)map[dof + c.dst[i]] * ncon + 1]++;
        }
    if (use_mask)
        for (int t = 0; t < nnt; t++)
            if (mask[t] != NULL)
                for (int64_t v = 0; v < gkv_graph_num_nodes(g, t); v++)
                    vwgt[(int64_t)map[off[t] + v] * ncon + ncon - 1] =
                        mask[t][v] != 0;
    /* xadj of the vertices kept; a dropped node has no list to drop */
    for (int64_t u = 0; u < nv; u++)
        if (map[u] >= 0)
            xadj[map[u]] = (idx_t)ptr[u];
    xadj[nk] = (idx_t)total;
    gkv__free(ptr);
    ptr = NULL;
    if (nk < nv)
        for (int64_t i = 0; i < total; i++)
            adj[i] = map[adj[i]];

    /* weights sum to 2x the edges: past idx_t, METIS gets none */
    if (pre > IDX_LIMIT) {
        gkv__free(ew);
        ew = NULL;
    }
    /* Thinning (DROPEDGES, done before METIS rather than inside it): on
     * R-MAT the hubs' many light edges kept every coarser level as dense
     * as the last; without them METIS coarsens faster, and cuts less. */
    if (keep == 0 && total >= thin_min)
        keep = GKV_PART_METIS_KEEP;
    if (keep > 0) {
        int64_t k = pw__thin((idx_t)nk, xadj, adj, ew, keep);
        if (k < 0)
            goto nomem;
        if (k < total) {
            idx_t *p;
            total = k;
            if ((p = gkv__realloc(adj, (size_t)total * sizeof *adj)) != NULL)
                adj = p;
            if (ew != NULL &&
                (p = gkv__realloc(ew, (size_t)total * sizeof *ew)) != NULL)
                ew = p;
        }
    }

    METIS_SetDefaultOptions(options);
    options[METIS_OPTION_OBJTYPE] = METIS_OBJTYPE_CUT;
    options[METIS_OPTION_NUMBERING] = 0;
    options[METIS_OPTION_SEED] = (idx_t)(seed & 0x7fffffff);
    if (!(flags & GKV_PART_METIS_SHEM))
        options[METIS_OPTION_CTYPE] = METIS_CTYPE_RM;
    memset(&job, 0, sizeof job);
    memcpy(job.options, options, sizeof job.options);
    job.n = (idx_t)nk;
    job.ncon = ncon;
    job.nparts = (idx_t)nparts;
    job.xadj = xadj;
    job.adj = adj;
    job.vwgt = vwgt;
    job.ew = ew;
    job.part = part;
    job.rb = !(flags & GKV_PART_METIS_KWAY);
    if (job.rb && nparts >= 3 && nk >= SPLIT_MIN) {
        mrc = metis_split(&job, &xadj, &adj, &ew, &vwgt);
    } else {
        mjob_run(&job);
        mrc = job.mrc;
    }
    cut = job.cut;
    if (mrc != METIS_OK) {
        rc = pw__msg(msg, msglen,
                     mrc == METIS_ERROR_MEMORY ? GKV_ENOMEM :
                     mrc == METIS_ERROR_INPUT ? GKV_EINVAL : GKV_EIO,
                     "METIS_PartGraph%s failed (%s) on %lld nodes and %lld "
                     "adjacency entries into %d parts",
                     flags & GKV_PART_METIS_KWAY ? "Kway" : "Recursive",
                     mrc == METIS_ERROR_MEMORY ? "out of memory" :
                     mrc == METIS_ERROR_INPUT ? "input error" : "error",
                     (long long)nk, (long long)total, nparts);
        goto out;
    }

    /* Each part's nodes from METIS, then the dropped nodes, in ID order,
     * fill the parts below ceil(nv / nparts) (there is room: the parts'
     * room to that mark adds up to at least the nodes left). */
    for (int64_t k = 0; k < nk; k++) {
        if (part[k] < 0 || part[k] >= nparts)
            part[k] = 0;
        load[part[k]]++;
    }
    {
        int64_t mark = (nv + nparts - 1) / nparts;
        int p = 0;
        for (int t = 0; t < nnt; t++)
            for (int64_t v = 0; v < gkv_graph_num_nodes(g, t); v++) {
                idx_t m = map[off[t] + v];
                if (m >= 0) {
                    w = part[m];
                } else {
                    while (p < nparts - 1 && load[p] >= mark)
                        p++;
                    load[p]++;
                    w = p;
                }
                owner[t][v] = (uint16_t)w;
            }
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
    gkv__free(ew);
    gkv__free(map);
    gkv__free(load);
    gkv__free(xadj);
    gkv__free(vwgt);
    gkv__free(part);
    return rc;
}
