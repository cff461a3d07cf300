/* part_assign.c - the partitioner's steps 2 and 3 (see part_write.c):
 * nodes assigned to partitions (random, range or given here, METIS in
 * part_write_metis.c) and given new IDs, and edges numbered in CSC order
 * without sorting. */
#include <string.h>
#include "graph/part_write.h"

/* ---- node assignment ---------------------------------------------------- */

static uint64_t
splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

gkv_err
pw__assign(struct pw *w, gkv_part_report *rep)
{
    const int P = w->P;
    int64_t objval = 0;
    gkv_err rc;
    uint64_t t0 = gkv__now_ns();

    if ((rc = pw__progress(w, "assign", 0, 0)) != GKV_OK)
        return rc;
    for (int t = 0; t < w->nnt; t++) {
        size_t n = (size_t)w->ncount[t];
        if ((w->owner[t] = gkv__malloc(n ? n * sizeof(uint16_t) : 1)) == NULL)
            return pw__fail_nodes(w, t, (uint64_t)n * sizeof(uint16_t),
                                  "the owners");
        if (w->sp->method == GKV_PART_METIS)
            continue;
        if (w->sp->method == GKV_PART_GIVEN) {
            const int32_t *o = w->sp->owners[t];
            for (size_t v = 0; v < n; v++) {
                if (o == NULL || o[v] < 0 || o[v] >= P)
                    return pw__fail(w, GKV_EINVAL, "owners[%d][%zu] = %d: "
                                    "expected a partition 0..%d", t, v,
                                    o != NULL ? (int)o[v] : -1, P - 1);
                w->owner[t][v] = (uint16_t)o[v];
            }
            continue;
        }
        /* equal slices: range keeps them, random shuffles them */
        for (int p = 0; p < P; p++) {
            int64_t a = slice_lo((int64_t)n, p, P), b = slice_lo((int64_t)n, p + 1, P);
            for (int64_t v = a; v < b; v++)
                w->owner[t][v] = (uint16_t)p;
        }
        if (w->sp->method == GKV_PART_RANDOM && n > 1) {
            uint64_t s = w->sp->seed ^ (0x5851f42d4c957f2dull * (uint64_t)(t + 1));
            for (size_t v = n - 1; v > 0; v--) {
                size_t j = (size_t)(splitmix(&s) % (v + 1));
                uint16_t x = w->owner[t][v];
                w->owner[t][v] = w->owner[t][j];
                w->owner[t][j] = x;
            }
        }
    }
    if (w->sp->method == GKV_PART_METIS &&
        (rc = pw__metis(w->g, P, w->sp->seed, w->sp->flags,
                        w->sp->metis_keep, w->mask, w->owner, &objval,
                        w->msg, w->msglen)) != GKV_OK)
        return rc;

    /* counts, starts, new IDs */
    for (int t = 0; t < w->nnt; t++) {
        int64_t *st = w->nstart + (size_t)t * (size_t)(P + 1), *cur;
        memset(st, 0, (size_t)(P + 1) * sizeof *st);
        for (int64_t v = 0; v < w->ncount[t]; v++)
            st[w->owner[t][v] + 1]++;
        for (int p = 0; p < P; p++)
            st[p + 1] += st[p];
        if (w->sp->method == GKV_PART_RANGE)
            continue;                     /* new ID = old ID */
        if ((w->newid[t] = gkv__malloc(w->ncount[t] ? (size_t)w->ncount[t] *
                                       sizeof(int64_t) : 1)) == NULL ||
            (cur = gkv__malloc((size_t)P * sizeof *cur)) == NULL)
            return pw__fail_nodes(w, t,
                                  (uint64_t)w->ncount[t] * sizeof(int64_t),
                                  "the new IDs");
        memcpy(cur, st, (size_t)P * sizeof *cur);
        for (int64_t v = 0; v < w->ncount[t]; v++)
            w->newid[t][v] = cur[w->owner[t][v]]++;
        gkv__free(cur);
    }
    rep->assign_seconds = (double)(gkv__now_ns() - t0) * 1e-9;
    return pw__progress(w, "assign", 1, 1);
}

/* ---- edge numbering ----------------------------------------------------- */

/* Numbering one edge type on T threads, each over a slice of the edges
 * (slices in edge order, so the result is the same for any T). */
struct num_job {
    const struct pw *w;
    int et;
    int64_t lo, hi;               /* edge slice */
    int64_t *cnt;                 /* count: in-edges per new dst; scatter:
                                   * this slice's cursor per new dst */
    int64_t *oc;                  /* P: out-edges per owner of the source */
};

static void
num_count(void *p)
{
    struct num_job *j = p;
    const struct pw *w = j->w;
    const gkv_etype_info *ei = &w->einfo[j->et];
    const int64_t *did = w->newid[ei->dst_ntype];
    const uint16_t *so = w->owner[ei->src_ntype];
    int64_t *cnt = j->cnt, *oc = j->oc;
    gkv_coo c;

    gkv_graph_edges(w->g, j->et, &c);
    for (int64_t i = j->lo; i < j->hi; i++)
        cnt[nid(did, c.dst[i])]++;
    if (w->sp->flags & GKV_PART_CSR)        /* the CSR's edges per owner */
        for (int64_t i = j->lo; i < j->hi; i++)
            oc[so[c.src[i]]]++;
}

static void
num_scatter(void *p)
{
    struct num_job *j = p;
    const struct pw *w = j->w;
    const int64_t *did = w->newid[w->einfo[j->et].dst_ntype];
    int64_t *cur = j->cnt, *emap = w->emap[j->et];
    gkv_coo c;

    gkv_graph_edges(w->g, j->et, &c);
    for (int64_t i = j->lo; i < j->hi; i++)
        emap[i] = cur[nid(did, c.dst[i])]++;
}

/* eptr[et] (nd + 1 global CSC offsets over the new dst IDs: ptr[v] is the
 * first new edge ID into v, ptr[nd] the edge count) and emap[et]; with
 * GKV_PART_CSR also the type's out-edge counts per owner in w->ocnt. */
gkv_err
pw__number_edges(struct pw *w, int et)
{
    const gkv_etype_info *ei = &w->einfo[et];
    int64_t nd = w->ncount[ei->dst_ntype], *ptr, *cnt = NULL, *oc = NULL, at;
    struct num_job jobs[64];
    int T = w->nthreads;
    gkv_coo c;

    gkv_graph_edges(w->g, et, &c);
    /* a thread needs its own counts: only worth it on many edges per node */
    if (c.n < (int64_t)T * 65536)
        T = 1;
    while (T > 1 && nd * T > c.n)
        T--;
    if ((ptr = w->eptr[et] = gkv__malloc(((size_t)nd + 1) * sizeof *ptr)) == NULL ||
        (w->emap[et] = gkv__malloc(c.n ? (size_t)c.n * sizeof(int64_t) : 1)) == NULL ||
        (cnt = gkv__calloc((size_t)T * (size_t)(nd ? nd : 1), sizeof *cnt)) == NULL ||
        (oc = gkv__calloc((size_t)T * (size_t)w->P, sizeof *oc)) == NULL) {
        gkv__free(cnt);
        /* the arrays per destination node are the large ones, unless the
         * edges outnumber the nodes */
        if (nd >= c.n)
            return pw__fail_nodes(w, ei->dst_ntype,
                                  ((uint64_t)nd + 1) * 8 * (uint64_t)(T + 1),
                                  "numbering the edges into the destination "
                                  "nodes");
        return pw__fail(w, GKV_ENOMEM, "out of memory numbering the %lld "
                        "edges of '%s'", (long long)c.n, ei->canonical);
    }
    for (int i = 0; i < T; i++) {
        jobs[i].w = w;
        jobs[i].et = et;
        jobs[i].lo = slice_lo(c.n, i, T);
        jobs[i].hi = slice_lo(c.n, i + 1, T);
        jobs[i].cnt = cnt + (size_t)i * (size_t)nd;
        jobs[i].oc = oc + (size_t)i * (size_t)w->P;
    }
    graph__parallel(num_count, jobs, sizeof jobs[0], T);
    /* v's edges: slice 0's first, then slice 1's, ...; counts -> cursors */
    at = 0;
    for (int64_t v = 0; v < nd; v++) {
        ptr[v] = at;
        for (int i = 0; i < T; i++) {
            int64_t k = jobs[i].cnt[v];
            jobs[i].cnt[v] = at;
            at += k;
        }
    }
    ptr[nd] = at;
    graph__parallel(num_scatter, jobs, sizeof jobs[0], T);
    for (int i = 0; i < T; i++) {
        for (int p = 0; p < w->P; p++)
            w->ocnt[(size_t)et * (size_t)w->P + (size_t)p] += jobs[i].oc[(size_t)p];
    }
    gkv__free(cnt);
    gkv__free(oc);
    return GKV_OK;
}
