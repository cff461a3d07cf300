/* csc.c - compressed adjacency by a stable counting sort.
 *
 * Count: edges per column into indptr (one thread), or into one array per
 * thread over contiguous slices of the edges, summed into indptr.
 *
 * Scatter: the plain counting sort writes every edge to a random place in
 * two large arrays; on big graphs that is a cache and TLB miss per write
 * and costs 4-5x the rest. So large inputs scatter in two passes:
 *   pass 1  stable partition of the edges into at most 256 buckets of
 *           consecutive columns, written into indices/eids at their
 *           bucket's place (a few hundred sequential write streams), with
 *           each edge's column offset within the bucket in a uint32 side
 *           array;
 *   pass 2  per bucket, copy its edges aside and counting-sort them into
 *           the bucket's own region (which fits in cache).
 * Both passes keep input order within a column, so the result is the same
 * as the plain sort's, for any thread count. Pass 1 is split over threads
 * by edge slices (slice t's edges of a bucket go after slices 0..t-1's),
 * pass 2 by buckets. Extra memory: 4 bytes per edge plus one bucket copy
 * per thread; a bucket holding more than 1/8 of the edges (a skewed graph)
 * sends the build back to the plain sort, which needs none.
 *
 * Cursors: where one thread owns a column's cursor, indptr[k] itself is
 * the cursor (it ends at the old indptr[k + 1]) and indptr is shifted right
 * by one at the end; no extra array. */
#include <string.h>
#include "graph/graph_int.h"

#define MAX_THREADS     64
#define MIN_PER_THREAD  32768         /* edges below which a thread is idle */
#define BUCKET_BITS     8             /* at most 256 buckets in pass 1 */
#define TWO_PASS_EDGES  (1u << 18)    /* below: the plain sort is in cache */
#define TWO_PASS_COLS   (1u << 14)

struct ctx {
    const int64_t *col, *other, *eid;
    size_t n;
    int64_t num_cols;
    int64_t *indptr, *indices, *eids;
    uint32_t *lc;          /* two-pass: column offset within the bucket */
    unsigned sh;           /* two-pass: bucket = col >> sh */
    int64_t *bstart;       /* two-pass: nb + 1 bucket starts (edges) */
};

struct job {
    const struct ctx *c;
    size_t lo, hi;         /* edge slice [lo, hi) */
    int64_t *cur;          /* count: num_cols counts; plain: cursors;
                            * pass 1: bucket cursors */
    int64_t blo, bhi;      /* pass 2: buckets [blo, bhi) */
    int64_t *tmp;          /* pass 2: room for 2 x its largest bucket */
    int bad;               /* count: a col outside [0, num_cols) */
};

static void
job_count(void *p)
{
    struct job *j = p;
    const int64_t *col = j->c->col;
    uint64_t nc = (uint64_t)j->c->num_cols;
    int64_t *cur = j->cur;

    memset(cur, 0, (size_t)nc * sizeof *cur);
    for (size_t i = j->lo; i < j->hi; i++) {
        uint64_t k = (uint64_t)col[i];
        if (k >= nc) {
            j->bad = 1;
            return;
        }
        cur[k]++;
    }
}

static void
job_plain(void *p)
{
    struct job *j = p;
    const struct ctx *c = j->c;

    for (size_t i = j->lo; i < j->hi; i++) {
        int64_t q = j->cur[c->col[i]]++;
        c->indices[q] = c->other[i];
        c->eids[q] = c->eid != NULL ? c->eid[i] : (int64_t)i;
    }
}

static void
job_pass1(void *p)
{
    struct job *j = p;
    const struct ctx *c = j->c;
    const unsigned sh = c->sh;
    const uint64_t mask = (UINT64_C(1) << sh) - 1;

    for (size_t i = j->lo; i < j->hi; i++) {
        uint64_t k = (uint64_t)c->col[i];
        int64_t q = j->cur[k >> sh]++;
        c->indices[q] = c->other[i];
        c->eids[q] = c->eid != NULL ? c->eid[i] : (int64_t)i;
        c->lc[q] = (uint32_t)(k & mask);
    }
}

static void
job_pass2(void *p)
{
    struct job *j = p;
    const struct ctx *c = j->c;
    int64_t *ptr = c->indptr;

    for (int64_t b = j->blo; b < j->bhi; b++) {
        int64_t s = c->bstart[b], len = c->bstart[b + 1] - s;
        int64_t *ti = j->tmp, *te = j->tmp + len;
        int64_t *cur = ptr + ((uint64_t)b << c->sh);

        memcpy(ti, c->indices + s, (size_t)len * sizeof *ti);
        memcpy(te, c->eids + s, (size_t)len * sizeof *te);
        for (int64_t i = 0; i < len; i++) {
            int64_t q = cur[c->lc[s + i]]++;
            c->indices[q] = ti[i];
            c->eids[q] = te[i];
        }
    }
}

/* Bits needed for values 0 .. x - 1. */
static unsigned
bits_for(uint64_t x)
{
    unsigned b = 0;

    while (b < 64 && (UINT64_C(1) << b) < x)
        b++;
    return b;
}

/* Pass 1 and 2 on t threads; 'cnt' holds the t per-slice count arrays
 * (NULL when t = 1). GKV_ENOMEM leaves indptr in its counted form and the
 * caller falls back to the plain sort; any other result is final. */
static gkv_err
two_pass(struct ctx *c, struct job *jobs, int t, int64_t **cnt, unsigned sh)
{
    int64_t nb = (int64_t)((((uint64_t)c->num_cols - 1) >> sh) + 1);
    int64_t *bstart = NULL, *bcur = NULL, maxb = 0;
    size_t per = (c->n + (size_t)t - 1) / (size_t)t;
    int64_t **tmp = NULL;
    gkv_err rc = GKV_ENOMEM;

    if ((bstart = gkv__malloc(((size_t)nb + 1) * sizeof *bstart)) == NULL)
        goto out;
    for (int64_t b = 0; b <= nb; b++) {
        uint64_t k = (uint64_t)b << sh;
        if (k > (uint64_t)c->num_cols)
            k = (uint64_t)c->num_cols;
        bstart[b] = c->indptr[k];
        if (b > 0 && bstart[b] - bstart[b - 1] > maxb)
            maxb = bstart[b] - bstart[b - 1];
    }
    if ((uint64_t)maxb > c->n / 8) {        /* skewed: plain sort instead */
        rc = GKV_EINVAL;
        goto out;
    }
    /* Pass 2 split: contiguous buckets, about n / t edges each. */
    for (int i = 0, b = 0; i < t; i++) {
        int64_t goal = (int64_t)(c->n / (size_t)t) * (i + 1);
        jobs[i].blo = b;
        while (b < nb && (i == t - 1 || bstart[b + 1] <= goal))
            b++;
        jobs[i].bhi = b;
    }
    if ((bcur = gkv__malloc((size_t)t * (size_t)nb * sizeof *bcur)) == NULL ||
        (tmp = gkv__calloc((size_t)t, sizeof *tmp)) == NULL)
        goto out;
    for (int i = 0; i < t; i++) {
        int64_t m = 0;
        for (int64_t b = jobs[i].blo; b < jobs[i].bhi; b++)
            if (bstart[b + 1] - bstart[b] > m)
                m = bstart[b + 1] - bstart[b];
        if ((tmp[i] = gkv__malloc(2 * (size_t)m * sizeof **tmp)) == NULL)
            goto out;
    }
    c->lc = gkv__malloc(c->n * sizeof *c->lc);
    if (c->lc == NULL)
        goto out;
    c->sh = sh;
    c->bstart = bstart;
    /* Bucket cursors per slice: slice i's edges of bucket b follow those
     * of slices 0..i-1. */
    for (int64_t b = 0; b < nb; b++) {
        int64_t at = bstart[b];
        for (int i = 0; i < t; i++) {
            int64_t m = 0;
            if (cnt == NULL) {
                m = bstart[b + 1] - bstart[b];
            } else {
                uint64_t k0 = (uint64_t)b << sh, k1 = k0 + (UINT64_C(1) << sh);
                if (k1 > (uint64_t)c->num_cols)
                    k1 = (uint64_t)c->num_cols;
                for (uint64_t k = k0; k < k1; k++)
                    m += cnt[i][k];
            }
            bcur[(size_t)i * (size_t)nb + (size_t)b] = at;
            at += m;
        }
    }
    for (int i = 0; i < t; i++) {
        size_t lo = per * (size_t)i;
        jobs[i].c = c;
        jobs[i].lo = lo < c->n ? lo : c->n;
        jobs[i].hi = lo + per < c->n ? lo + per : c->n;
        jobs[i].cur = bcur + (size_t)i * (size_t)nb;
        jobs[i].tmp = tmp[i];
    }
    graph__parallel(job_pass1, jobs, sizeof jobs[0], t);
    graph__parallel(job_pass2, jobs, sizeof jobs[0], t);
    memmove(c->indptr + 1, c->indptr, (size_t)c->num_cols * sizeof *c->indptr);
    c->indptr[0] = 0;
    rc = GKV_OK;
out:
    if (tmp != NULL)
        for (int i = 0; i < t; i++)
            gkv__free(tmp[i]);
    gkv__free(tmp);
    gkv__free(bcur);
    gkv__free(bstart);
    gkv__free(c->lc);
    c->lc = NULL;
    return rc;
}

/* Plain scatter. t = 1: indptr is the cursor. t > 1: cnt[i] become the
 * cursors of slice i. */
static void
plain(struct ctx *c, struct job *jobs, int t, int64_t **cnt)
{
    size_t per = (c->n + (size_t)t - 1) / (size_t)t;

    for (int i = 0; i < t; i++) {
        size_t lo = per * (size_t)i;
        jobs[i].c = c;
        jobs[i].lo = lo < c->n ? lo : c->n;
        jobs[i].hi = lo + per < c->n ? lo + per : c->n;
        jobs[i].cur = t == 1 ? c->indptr : cnt[i];
    }
    if (t > 1)
        for (int64_t k = 0; k < c->num_cols; k++) {
            int64_t at = c->indptr[k];
            for (int i = 0; i < t; i++) {
                int64_t m = cnt[i][k];
                cnt[i][k] = at;
                at += m;
            }
        }
    graph__parallel(job_plain, jobs, sizeof jobs[0], t);
    if (t == 1) {
        memmove(c->indptr + 1, c->indptr,
                (size_t)c->num_cols * sizeof *c->indptr);
        c->indptr[0] = 0;
    }
}

gkv_err
gkv_csc_build(gkv_csc *out, const int64_t *col, const int64_t *other,
              const int64_t *eid, size_t n, int64_t num_cols, int nthreads)
{
    struct job jobs[MAX_THREADS];
    int64_t *cnt[MAX_THREADS] = {0}, *cntmem = NULL;
    struct ctx c;
    gkv_csc a;
    gkv_err rc = GKV_OK;
    unsigned sh = 0;
    int t, two;

    if (out == NULL)
        return GKV_EINVAL;
    memset(out, 0, sizeof *out);
    if (num_cols < 0 || (n > 0 && (col == NULL || other == NULL)) ||
        n > (size_t)INT64_MAX)
        return GKV_EINVAL;
    if ((uint64_t)num_cols >= SIZE_MAX / sizeof(int64_t) / MAX_THREADS ||
        n > SIZE_MAX / sizeof(int64_t))
        return GKV_ENOMEM;
    memset(&a, 0, sizeof a);
    memset(jobs, 0, sizeof jobs);
    a.num_cols = num_cols;
    a.num_edges = (int64_t)n;
    a.indptr = gkv__calloc((size_t)num_cols + 1, sizeof *a.indptr);
    a.indices = gkv__malloc(n * sizeof *a.indices);
    a.eids = gkv__malloc(n * sizeof *a.eids);
    if (a.indptr == NULL || a.indices == NULL || a.eids == NULL) {
        rc = GKV_ENOMEM;
        goto out;
    }
    c.col = col;
    c.other = other;
    c.eid = eid;
    c.n = n;
    c.num_cols = num_cols;
    c.indptr = a.indptr;
    c.indices = a.indices;
    c.eids = a.eids;
    c.lc = NULL;

    /* Threads: only with MIN_PER_THREAD edges each, and only while their
     * count arrays are no larger than the edge list. */
    t = nthreads < 1 ? 1 : nthreads > MAX_THREADS ? MAX_THREADS : nthreads;
    if (n / MIN_PER_THREAD < (size_t)t)
        t = n / MIN_PER_THREAD > 1 ? (int)(n / MIN_PER_THREAD) : 1;
    if (t > 1 && (uint64_t)num_cols * (uint64_t)t > (uint64_t)n)
        t = 1;
    if (t > 1 && (cntmem = gkv__malloc((size_t)t * (size_t)num_cols *
                                       sizeof *cntmem)) == NULL)
        t = 1;                            /* fewer threads, not a failure */

    /* Count, then indptr = exclusive prefix sums (indptr[num_cols] = n). */
    if (t == 1) {
        for (size_t i = 0; i < n; i++) {
            uint64_t k = (uint64_t)col[i];
            if (k >= (uint64_t)num_cols) {
                rc = GKV_ERANGE;
                goto out;
            }
            a.indptr[k + 1]++;
        }
        for (int64_t k = 0; k < num_cols; k++)
            a.indptr[k + 1] += a.indptr[k];
    } else {
        size_t per = (n + (size_t)t - 1) / (size_t)t;
        for (int i = 0; i < t; i++) {
            size_t lo = per * (size_t)i;
            cnt[i] = cntmem + (size_t)i * (size_t)num_cols;
            jobs[i].c = &c;
            jobs[i].lo = lo < n ? lo : n;
            jobs[i].hi = lo + per < n ? lo + per : n;
            jobs[i].cur = cnt[i];
        }
        graph__parallel(job_count, jobs, sizeof jobs[0], t);
        for (int i = 0; i < t; i++)
            if (jobs[i].bad) {
                rc = GKV_ERANGE;
                goto out;
            }
        for (int64_t k = 0; k < num_cols; k++) {
            int64_t m = 0;
            for (int i = 0; i < t; i++)
                m += cnt[i][k];
            a.indptr[k + 1] = a.indptr[k] + m;
        }
    }

    /* Scatter. indptr now holds the column starts. */
    two = n >= TWO_PASS_EDGES && (uint64_t)num_cols >= TWO_PASS_COLS;
    if (two) {
        unsigned b = bits_for((uint64_t)num_cols);
        sh = b > BUCKET_BITS ? b - BUCKET_BITS : 0;
        two = sh >= 1 && sh <= 32;        /* offsets fit the uint32 array */
    }
    if (two && two_pass(&c, jobs, t, t > 1 ? cnt : NULL, sh) == GKV_OK)
        goto out;
    plain(&c, jobs, t, cnt);
out:
    gkv__free(cntmem);
    if (rc != GKV_OK) {
        gkv_csc_free(&a);
        return rc;
    }
    *out = a;
    return GKV_OK;
}

static gkv_err
graph_adj(const gkv_graph *g, int etype, int nthreads, int in, gkv_csc *out)
{
    const struct graph_etype *et;

    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (g == NULL || out == NULL || etype < 0 || etype >= g->g_net)
        return GKV_EINVAL;
    et = &g->g_et[etype];
    if (in)
        return gkv_csc_build(out, et->et_dstv, et->et_srcv, NULL,
                             (size_t)et->et_n, g->g_nt[et->et_dst].nt_count,
                             nthreads);
    return gkv_csc_build(out, et->et_srcv, et->et_dstv, NULL,
                         (size_t)et->et_n, g->g_nt[et->et_src].nt_count,
                         nthreads);
}

gkv_err
gkv_graph_csc(const gkv_graph *g, int etype, int nthreads, gkv_csc *out)
{
    return graph_adj(g, etype, nthreads, 1, out);
}

gkv_err
gkv_graph_csr(const gkv_graph *g, int etype, int nthreads, gkv_csc *out)
{
    return graph_adj(g, etype, nthreads, 0, out);
}

void
gkv_csc_free(gkv_csc *a)
{
    if (a == NULL)
        return;
    gkv__free(a->indptr);
    gkv__free(a->indices);
    gkv__free(a->eids);
    memset(a, 0, sizeof *a);
}
