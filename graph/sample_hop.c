/* sample_hop.c - one hop of neighbour sampling (gkv_sample_neighbors,
 * graph__sample_hop): picking, the software pipeline and the one-thread
 * hop; the several-thread hop is sample_par.c's.
 *
 * Sampling is bound by memory latency: per pick, one random cache line for
 * the neighbour and its edge ID (side by side in sgraphs built by
 * sgraph.c, see struct sg_adj) and one for the neighbour's relabel
 * marker; per frontier node, one for its column start. The large arrays
 * sit on 2 MiB pages (graph__huge_alloc), so those misses are rarely TLB
 * misses too.
 *
 * How a hop runs. The frontier (the destination nodes of the hop) of each
 * edge type is cut into sub-blocks of SUB nodes, each sampled in three
 * passes:
 *   P1  per node: its column's start (indptr, prefetched PF nodes ahead)
 *       and its picks as absolute positions, prefetching the picks;
 *   P2  per pick: the neighbour and the edge ID, prefetching the
 *       neighbour's marker;
 *   P3  relabel: a neighbour seen for the first time in the batch gets the
 *       next local ID of its type (dense markers per node type hold
 *       local ID + 1; 0 = unseen).
 * The passes are software-pipelined (graph__pipe_range): step j runs P1 of
 * sub-block j, P2 of j - 1 and P3 of j - 2, so each prefetch has a
 * sub-block's time to land.
 *
 * On one thread P3 writes the block directly. On several (a relabelling
 * hop; sample_par.c), the frontier is cut into chunks, and the relabel is
 * made deterministic one of two ways.
 *
 * Ordered (two threads): both threads take chunks in frontier order from
 * a shared counter and pick them (P1 and P2) into buffers that belong to
 * the chunk; labels (P3) are given chunk by chunk in frontier order by
 * whichever thread finds the next chunk picked and no other thread
 * labelling (graph__label_chunk). The picks, about 60 % of the work, run
 * side by side; the labelling, one random marker access per pick, runs
 * on one thread at a time beside the other's picks, so two threads do
 * little more work than one, but the labelling caps the gain at about
 * 2.5x whatever the thread count.
 *
 * Keyed (three threads or more), without a second pass over the markers:
 *   A   the caller takes chunks from the front, in order, and labels them
 *       as one thread would (the prefix: P3 with plain loads, and an
 *       atomic exchange where it gives a node its local ID); the workers
 *       take chunks from the back (the suffix) and, as P3, put
 *       KEY(chunk, index) on each neighbour's marker as an atomic minimum
 *       (a local ID + 1, always below KEYBIT, stays). A pick's rank is its
 *       key when it went in, else what the marker held. Whoever takes a
 *       key off a marker logs it with what replaced it;
 *   -   the logs are applied to the ranks: a pick whose rank is still its
 *       own key is its node's first appearance in edge order, as the
 *       keys follow edge order and the prefix comes first;
 *   -   (serial, per chunk) the suffix's first local IDs and edge offsets;
 *   W   every suffix pick's local source from its rank (following the
 *       keys it names), into the block; the first appearances write the
 *       node list and, unless it is the batch's last hop, their markers.
 * Front and back meet where the work runs out, so a worker that the OS
 * does not run only lengthens the prefix. Two threads do about 1.3x one
 * thread's work this way, but every thread labels.
 *
 * Either way the result is the one-thread result, for any thread count
 * and any schedule. Markers are not reset between hops: the next hop's
 * destination nodes are this hop's node list in the same order, so the
 * local IDs stay right. They are reset once at the end of a batch (every
 * node labelled is in the last list).
 */
#include <limits.h>
#include <math.h>
#include "graph/sample_int.h"

/* ---- picking ------------------------------------------------------------ */

/* First element of sorted a[0..n) that is >= x. */
static inline const int64_t *
lower(const int64_t *a, size_t n, int64_t x)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return a + lo;
}

/* The xi-th position of [b, ...) that is not in E[0..x) (sorted, unique,
 * all >= b). Before E[q] lie E[q] - b - q allowed positions, which never
 * decreases with q; the answer is b + xi + the number of q with
 * E[q] - q <= b + xi (the excluded positions below it). O(log x). */
static inline int64_t
nth_allowed(int64_t b, int64_t xi, const int64_t *E, size_t x)
{
    size_t lo = 0, hi = x;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (E[mid] - (int64_t)mid <= b + xi)
            lo = mid + 1;
        else
            hi = mid;
    }
    return b + xi + (int64_t)lo;
}

/* A set of indices for Floyd and weighted rejection with large k. */
static int
hset_init(struct tbuf *tb, int64_t k, unsigned *bits)
{
    unsigned b = 4;

    while ((UINT64_C(1) << b) < 2 * (uint64_t)k)
        b++;
    if (graph__grow(&tb->hset, &tb->hset_cap, (size_t)1 << b,
                    sizeof *tb->hset))
        return -1;
    memset(tb->hset, 0xff, ((size_t)1 << b) * sizeof *tb->hset);
    *bits = b;
    return 0;
}

/* Adds x; returns 1 if it was there already. */
static inline int
hset_add(int64_t *h, unsigned bits, int64_t x)
{
    size_t mask = ((size_t)1 << bits) - 1;
    size_t i = (size_t)(((uint64_t)x * G64) >> (64 - bits));

    for (;; i = (i + 1) & mask) {
        if (h[i] == x)
            return 1;
        if (h[i] < 0) {
            h[i] = x;
            return 0;
        }
    }
}

/* Floyd: k distinct indices of [0, m) (k < m) into out, in order chosen. */
static int
floyd(struct tbuf *tb, uint64_t bv, int64_t m, int64_t k, int64_t *out)
{
    int64_t t = 0;

    if (k <= FLOYD_SMALL) {
        gkv_gen_floyd(bv, m, k, out);
        return 0;
    }
    {
        unsigned bits;
        if (hset_init(tb, k, &bits))
            return -1;
        for (int64_t j = m - k; j < m; j++, t++) {
            int64_t x = (int64_t)below(draw(bv, (uint64_t)t),
                                       (uint64_t)j + 1);
            if (hset_add(tb->hset, bits, x)) {
                x = j;
                hset_add(tb->hset, bits, x);
            }
            out[t] = x;
        }
    }
    return 0;
}

/* First i with S[i+1] > t; when none, the last i with wv[i] > 0. */
static inline int64_t
wsearch(const double *S, const float *wv, int64_t m, double t)
{
    int64_t lo = 0, hi = m;

    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (S[mid + 1] > t)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (lo < m)
        return lo;
    for (int64_t i = m - 1; i > 0; i--)
        if (wv[i] > 0)
            return i;
    return 0;
}

/* Makes room for 'need' entries in tb->u, tb->e and tb->rank. */
static int
ue_room(struct tbuf *tb, size_t need)
{
    return graph__grow3(&tb->u, sizeof *tb->u, &tb->e, sizeof *tb->e,
                        &tb->rank, sizeof *tb->rank, &tb->ue_cap, need);
}

/* Makes room for 'need' more positions after the first np. */
static inline int
pos_room(struct tbuf *tb, size_t np, size_t need)
{
    return graph__grow(&tb->pos, &tb->pos_cap, np + need, sizeof *tb->pos);
}

/* The general column: exclusions, weights, replacement, any k. Appends
 * the picks of node v (frontier entry fi, column positions [b, b + d)) to
 * tb->pos at *np. */
static gkv_err
pick_general(gkv_sampler *s, struct tbuf *tb, long ci, int et, int64_t v,
             int64_t fi, int64_t b, int64_t d, size_t *np)
{
    const struct run *R = &s->R;
    const struct sg_adj *sa = &s->sg->adj[2 * et + R->dir];
    const int64_t k = R->fan[et];
    const int replace = (R->flags & GKV_SAMPLE_REPLACE) != 0;
    const int wmode = R->wmode[et];
    const int64_t *E = NULL;
    size_t x = 0, n = *np;
    uint64_t bv = absorb(R->key[et], (uint64_t)v);

    if (s->nex[et] > 0) {
        const int64_t *ex = s->ex[et], *end = ex + s->nex[et];
        E = lower(ex, s->nex[et], b);
        x = (size_t)(lower(E, (size_t)(end - E), b + d) - E);
    }
    if (wmode == 0) {
        int64_t m = d - (int64_t)x;
        if (k < 0 || (!replace && m <= k)) {
            size_t q = 0;
            if (pos_room(tb, n, (size_t)m))
                goto nomem;
            for (int64_t p = b; p < b + d; p++) {
                if (q < x && E[q] == p) {
                    q++;
                    continue;
                }
                tb->pos[n++] = p;
            }
        } else if (replace) {
            if (m > 0) {
                if (pos_room(tb, n, (size_t)k))
                    goto nomem;
                for (int64_t t = 0; t < k; t++)
                    tb->pos[n++] = nth_allowed(b, (int64_t)below(
                        draw(bv, (uint64_t)t), (uint64_t)m), E, x);
            }
        } else {
            if (pos_room(tb, n, (size_t)k) || floyd(tb, bv, m, k, tb->pos + n))
                goto nomem;
            for (int64_t t = 0; t < k; t++, n++)
                tb->pos[n] = nth_allowed(b, tb->pos[n], E, x);
        }
        *np = n;
        return GKV_OK;
    }

    /* weighted */
    {
        const float *ew = wmode == 2 ? R->ew[et] : NULL;
        int64_t ewlen = wmode == 2 ? R->ewlen[et] : 0, m = 0, z = 0;
        int64_t ewlo = wmode == 2 && R->ewlo != NULL ? R->ewlo[et] : 0;
        const float *wp = NULL;
        int64_t nwp = 0;
        const gkv_adj *a = &sa->a;
        double T;
        size_t q = 0;

        if (d >= (int64_t)tb->w_cap) {
            size_t c1 = tb->w_cap, c2 = tb->w_cap, c3 = tb->w_cap,
                   c4 = tb->w_cap;
            if (graph__grow(&tb->allow, &c1, (size_t)d + 1,
                            sizeof *tb->allow) ||
                graph__grow(&tb->S, &c2, (size_t)d + 1, sizeof *tb->S) ||
                graph__grow(&tb->wv, &c3, (size_t)d + 1, sizeof *tb->wv) ||
                graph__grow(&tb->pick, &c4, (size_t)d + 1, sizeof *tb->pick))
                goto nomem;
            tb->w_cap = c1 < c2 ? c1 : c2;
            tb->w_cap = tb->w_cap < c3 ? tb->w_cap : c3;
            tb->w_cap = tb->w_cap < c4 ? tb->w_cap : c4;
        }
        if (wmode == 3) {
            const int64_t *off = R->wp[et].off;
            wp = R->wp[et].w + off[fi];
            nwp = off[fi + 1] - off[fi];
            if (nwp != d - (int64_t)x)
                return graph__tb_fail(s, tb, ci, GKV_EINVAL, "edge type %d: "
                                      "node %lld has %lld %s edges to sample "
                                      "from, and %lld weights were given for "
                                      "it", et, (long long)v,
                                      (long long)(d - (int64_t)x),
                                      R->dir == GKV_DIR_IN ? "in" : "out",
                                      (long long)nwp);
        }
        tb->S[0] = 0.0;
        for (int64_t p = b; p < b + d; p++) {
            float w;
            if (q < x && E[q] == p) {
                q++;
                continue;
            }
            if (wp != NULL) {
                w = wp[m];
            } else if (ew != NULL) {
                int64_t id = at_eid(sa, p);
                if (id < ewlo || id - ewlo >= ewlen)
                    return graph__tb_fail(s, tb, ci, GKV_ERANGE, "edge type "
                                          "%d: edge %lld has no entry in "
                                          "edge_w[%d] (%lld weights, of edges "
                                          "from %lld)", et, (long long)id, et,
                                          (long long)ewlen, (long long)ewlo);
                w = ew[id - ewlo];
            } else {
                w = a->w[p];
            }
            if (!(w >= 0.0f) || isinf(w)) {
                int64_t id = at_eid(sa, p);
                return graph__tb_fail(s, tb, ci, GKV_EINVAL, "edge type %d: "
                                      "edge %lld (%s node %lld) has weight %g "
                                      "in %s; weights must be finite and >= 0",
                                      et, (long long)id,
                                      R->dir == GKV_DIR_IN ? "into" : "out of",
                                      (long long)v, (double)w,
                                      wp != NULL ? "the weights given"
                                      : ew != NULL ? "edge_w"
                                      : "the adjacency's w");
            }
            tb->allow[m] = p;
            tb->wv[m] = w;
            tb->S[m + 1] = tb->S[m] + (double)w;
            z += w > 0.0f;
            m++;
        }
        T = tb->S[m];
        if (k < 0 || (!replace && z <= k)) {
            if (pos_room(tb, n, (size_t)z))
                goto nomem;
            for (int64_t i = 0; i < m; i++)
                if (tb->wv[i] > 0.0f)
                    tb->pos[n++] = tb->allow[i];
        } else if (replace) {
            if (z > 0) {
                if (pos_room(tb, n, (size_t)k))
                    goto nomem;
                for (int64_t t = 0; t < k; t++)
                    tb->pos[n++] = tb->allow[wsearch(tb->S, tb->wv, m,
                        unit(draw(bv, (uint64_t)t)) * T)];
            }
        } else {
            int64_t nch = 0, t = 0, lim = 8 * k + 32;
            unsigned bits = 0;
            if (pos_room(tb, n, (size_t)k) ||
                (k > FLOYD_SMALL && hset_init(tb, k, &bits)))
                goto nomem;
            while (nch < k && t < lim) {
                int64_t i = wsearch(tb->S, tb->wv, m,
                                    unit(draw(bv, (uint64_t)t++)) * T), dup = 0;
                if (k > FLOYD_SMALL) {
                    dup = hset_add(tb->hset, bits, i);
                } else {
                    for (int64_t c = 0; c < nch; c++)
                        if (tb->pick[c] == i) {
                            dup = 1;
                            break;
                        }
                }
                if (!dup)
                    tb->pick[nch++] = i;
            }
            if (nch < k) {
                for (int64_t c = 0; c < nch; c++)
                    tb->wv[tb->pick[c]] = 0.0f;
                while (nch < k) {
                    int64_t i;
                    for (int64_t j = 0; j < m; j++)
                        tb->S[j + 1] = tb->S[j] + (double)tb->wv[j];
                    i = wsearch(tb->S, tb->wv, m,
                                unit(draw(bv, (uint64_t)t++)) * tb->S[m]);
                    tb->pick[nch++] = i;
                    tb->wv[i] = 0.0f;
                }
            }
            for (int64_t c = 0; c < k; c++)
                tb->pos[n++] = tb->allow[tb->pick[c]];
        }
        *np = n;
        return GKV_OK;
    }
nomem:
    return graph__tb_fail(s, tb, ci, GKV_ENOMEM, "out of memory for the picks "
                          "of node %lld (edge type %d)", (long long)v, et);
}

/* P1 for frontier nodes [lo, hi) of edge type et: their picks as column
 * positions into tb->pos (*np of them), their counts appended to tb->cnt;
 * prefetches the picks' indices and edge IDs. */
static gkv_err
p1(gkv_sampler *s, struct tbuf *tb, long ci, int et, int64_t lo, int64_t hi,
   size_t *npo)
{
    const struct run *R = &s->R;
    const struct sg_adj *sa = &s->sg->adj[2 * et + R->dir];
    /* with the packed pairs (pk), a.indices and a.eids are not read: a
     * concurrent gkv_sgraph_adj() may be filling them in */
    const int64_t *pk = sa->pk, *ip = sa->a.indptr,
                  *ix = pk == NULL ? sa->a.indices : NULL,
                  *ei = pk == NULL ? sa->a.eids : NULL;
    const int64_t clo = sa->a.col_lo;
    const uint64_t ncols = (uint64_t)sa->ncols;
    const int cnt_nt = col_ntype(s->sg, et, R->dir);
    const int64_t *f = R->f[cnt_nt];
    const int64_t fend = (int64_t)R->nf[cnt_nt];
    const int64_t k = R->fan[et];
    const uint64_t K = R->key[et];
    const int fast = R->fast[et];
    size_t ns = (size_t)(hi - lo), np = 0;
    int64_t *cnt, *pos;
    gkv_err rc;

    if (graph__grow(&tb->cnt, &tb->cnt_cap, tb->cnt_len + ns,
                    sizeof *tb->cnt) ||
        (fast && pos_room(tb, 0, ns * (size_t)k)))
        return graph__tb_fail(s, tb, ci, GKV_ENOMEM, "out of memory for the "
                              "picks of edge type %d", et);
    cnt = tb->cnt + tb->cnt_len;
    for (int64_t i = lo; i < hi; i++) {
        int64_t c = f[i] - clo, b, d;
        size_t st = np;
        if (i + PF < fend) {
            uint64_t c2 = (uint64_t)(f[i + PF] - clo);
            if (c2 < ncols)
                __builtin_prefetch(ip + c2);
        }
        if ((uint64_t)c >= ncols)
            return graph__tb_fail(s, tb, ci, GKV_ERANGE, "node %lld (type %d) "
                                  "is outside the columns [%lld, %lld) that "
                                  "the %s adjacency of edge type %d covers",
                                  (long long)f[i], cnt_nt, (long long)clo,
                                  (long long)sa->a.col_hi, dir_name(R->dir),
                                  et);
        b = ip[c];
        d = ip[c + 1] - b;
        if (fast) {
            pos = tb->pos;
            if (d <= k) {
                for (int64_t j = 0; j < d; j++)
                    pos[np++] = b + j;
            } else {
                uint64_t bv = absorb(K, (uint64_t)f[i]);
                int64_t t = 0;
                for (int64_t j = d - k; j < d; j++, t++) {
                    int64_t x = b + (int64_t)below(draw(bv, (uint64_t)t),
                                                   (uint64_t)j + 1);
                    for (size_t q = st; q < np; q++)
                        if (pos[q] == x) {
                            x = b + j;
                            break;
                        }
                    pos[np++] = x;
                }
            }
        } else if ((rc = pick_general(s, tb, ci, et, f[i], i, b, d, &np)) !=
                   GKV_OK) {
            return rc;
        }
        pos = tb->pos;
        cnt[i - lo] = (int64_t)(np - st);
        if (np - st > 16)
            continue;
        if (pk != NULL) {
            for (size_t q = st; q < np; q++)
                __builtin_prefetch(pk + 2 * pos[q]);
        } else {
            for (size_t q = st; q < np; q++) {
                __builtin_prefetch(ix + pos[q]);
                if (ei != NULL)
                    __builtin_prefetch(ei + pos[q]);
            }
        }
    }
    tb->cnt_len += ns;
    *npo = np;
    return GKV_OK;
}

/* P2: the neighbour and edge ID of the np positions at pos, appended to
 * tb->u / tb->e; prefetches the neighbours' markers 'mkpf' (may be NULL). */
static gkv_err
p2(gkv_sampler *s, struct tbuf *tb, long ci, int et, const int64_t *pos,
   size_t np, amark *mkpf)
{
    const struct sg_adj *sa = &s->sg->adj[2 * et + s->R.dir];
    const int64_t *pk = sa->pk, *ix = pk == NULL ? sa->a.indices : NULL,
                  *ei = pk == NULL ? sa->a.eids : NULL;      /* as in p1 */
    const int64_t elo = sa->a.eid_lo;
    int64_t *u, *e;

    if (ue_room(tb, tb->ue_len + np))
        return graph__tb_fail(s, tb, ci, GKV_ENOMEM, "out of memory for the "
                              "picks of edge type %d", et);
    u = tb->u + tb->ue_len;
    e = tb->e + tb->ue_len;
    if (pk != NULL) {
        for (size_t q = 0; q < np; q++) {
            const int64_t *x = pk + 2 * pos[q];
            u[q] = x[0];
            e[q] = x[1];
            if (mkpf != NULL)
                __builtin_prefetch((const void *)(mkpf + x[0]), 1);
        }
    } else if (ei != NULL) {
        for (size_t q = 0; q < np; q++) {
            int64_t p = pos[q], x = ix[p];
            u[q] = x;
            e[q] = ei[p];
            if (mkpf != NULL)
                __builtin_prefetch((const void *)(mkpf + x), 1);
        }
    } else {
        for (size_t q = 0; q < np; q++) {
            int64_t p = pos[q], x = ix[p];
            u[q] = x;
            e[q] = elo + p;
            if (mkpf != NULL)
                __builtin_prefetch((const void *)(mkpf + x), 1);
        }
    }
    tb->ue_len += np;
    return GKV_OK;
}

struct sbk {                  /* one sub-block in the pipeline */
    int64_t lo, hi;           /* frontier nodes */
    size_t  coff, uoff, np;   /* its counts, picks in tb's buffers */
};

/* Logs that key k left a marker for v (a later key's replacement, or a
 * local ID + 1). -1 when out of memory. */
static inline int
ovr_add(struct tbuf *tb, uint64_t k, uint64_t v)
{
    if (graph__grow(&tb->ovr, &tb->ovr_cap, tb->ovr_len + 2,
                    sizeof *tb->ovr))
        return -1;
    tb->ovr[tb->ovr_len++] = k;
    tb->ovr[tb->ovr_len++] = v;
    return 0;
}

/* P3, relabel in edge order: new neighbours get the next local IDs; the
 * edges go straight into the block. One thread (pre 0): the node list is
 * the block's. The caller's prefix of a keyed parallel hop (pre 1): the
 * workers read the frontier, which may be the block's node list, so the
 * new nodes go to s->pid until the hop's merge; a marker holding a
 * worker's key (sample_par.c) is overwritten too, as the prefix comes
 * first. A chunk of an ordered parallel hop (pre 2): new nodes to s->pid
 * as well; no marker holds a key there. */
static inline __attribute__((always_inline)) gkv_err
p3_label(gkv_sampler *s, struct tbuf *tb, int et, const struct sbk *d,
         int pre)
{
    struct run *R = &s->R;
    struct blay *L = R->L;
    struct earr *ea = &L->ea[et];
    int nb = nbr_ntype(s->sg, et, R->dir);
    amark *mk = s->mk[nb];
    size_t nn = L->nodes[nb].num_src, o = L->edges[et].n, j = d->uoff;
    size_t ni = pre ? nn - s->ntot[nb] : 0;       /* pre: next in ids */
    const int64_t *cnt = tb->cnt + d->coff, *u = tb->u, *e = tb->e;
    int64_t *ids, *es, *ed, *ee;
    uint64_t m0;

    if (graph__earr_grow(ea, o + d->np) ||
        (pre ? graph__grow(&s->pid[nb], &s->pidcap[nb], ni + d->np,
                           sizeof *s->pid[nb])
         : graph__grow(&L->ids[nb], &L->idcap[nb], nn + d->np,
                       sizeof *L->ids[nb])))
        return graph__tb_fail(s, tb, 0, GKV_ENOMEM, "out of memory for a "
                              "block of %zu edges", o + d->np);
    if (pre) {
        ids = s->pid[nb];
    } else {
        R->f[nb] = L->ids[nb];
        ids = L->ids[nb];
    }
    es = ea->s;
    ed = ea->d;
    ee = ea->e;
    for (int64_t i = d->lo; i < d->hi; i++) {
        for (int64_t c = cnt[i - d->lo]; c > 0; c--, j++, o++) {
            int64_t x = u[j];
            uint64_t m = LOAD(&mk[x]);
            if (m - 1 >= KEYBIT - 1) {      /* 0 (unseen) or a key */
                ids[pre ? ni++ : nn] = x;
                m = ++nn;
                if (pre != 1) {
                    STORE(&mk[x], m);
                } else if ((m0 = atomic_exchange_explicit(
                                &mk[x], m, memory_order_relaxed)) != 0) {
                    /* a worker's key: its pick is no first appearance */
                    if (ovr_add(tb, m0, m))
                        goto nomem;
                }
            }
            es[o] = (int64_t)m - 1;
            ed[o] = i;
            ee[o] = e[j];
        }
    }
    L->nodes[nb].num_src = nn;
    L->edges[et].n = o;
    return GKV_OK;
nomem:
    /* the nodes labelled so far go in the list, so that the reset after
     * the failed call clears their markers (else the next call on this
     * sampler took them for labelled, with stale IDs) */
    L->nodes[nb].num_src = nn;
    L->edges[et].n = o;
    return graph__tb_fail(s, tb, 0, GKV_ENOMEM, "out of memory for the "
                          "relabel");
}

/* P3, one thread, single hop: the edges in global IDs. */
static gkv_err
p3_copy(gkv_sampler *s, struct tbuf *tb, int et, const struct sbk *d)
{
    struct run *R = &s->R;
    struct earr *ea = &R->out[et];
    const int64_t *f = R->f[col_ntype(s->sg, et, R->dir)];
    const int64_t *cnt = tb->cnt + d->coff;
    size_t o = R->olen[et], j = d->uoff;
    int64_t *os, *od;

    if (graph__earr_grow(ea, o + d->np))
        return graph__tb_fail(s, tb, 0, GKV_ENOMEM, "out of memory for %zu "
                              "sampled edges", o + d->np);
    os = R->dir == GKV_DIR_IN ? ea->s : ea->d;
    od = R->dir == GKV_DIR_IN ? ea->d : ea->s;
    counts_out(s, et, d->lo, d->hi, cnt);
    for (int64_t i = d->lo; i < d->hi; i++)
        for (int64_t c = cnt[i - d->lo]; c > 0; c--, j++, o++) {
            os[o] = tb->u[j];
            od[o] = f[i];
            ea->e[o] = tb->e[j];
        }
    R->olen[et] = o;
    return GKV_OK;
}

/* P3 of a worker's chunk in a parallel relabel: each pick's key (chunk
 * ci, index from the chunk's start 'cbase' in tb->u) as an atomic minimum
 * on its neighbour's marker; tb->rank[j] = the key when it went in, else
 * what the marker held (a local ID + 1, or an earlier pick's key). A key
 * taken off a marker is logged with the one that replaced it. */
static gkv_err
p3_keys(gkv_sampler *s, struct tbuf *tb, int et, const struct sbk *d,
        long ci, size_t cbase)
{
    amark *mk = s->mk[nbr_ntype(s->sg, et, s->R.dir)];

    for (size_t j = d->uoff; j < d->uoff + d->np; j++) {
        uint64_t key = KEY(ci, j - cbase);
        amark *p = &mk[tb->u[j]];
        uint64_t m = LOAD(p);
        while (m == 0 || m > key) {
            if (atomic_compare_exchange_weak_explicit(
                    p, &m, key, memory_order_relaxed, memory_order_relaxed)) {
                if (m != 0 && ovr_add(tb, m, key))
                    return graph__tb_fail(s, tb, ci, GKV_ENOMEM, "out of "
                                          "memory for the relabel");
                m = key;
                break;
            }
        }
        tb->rank[j] = (int64_t)m;
    }
    return GKV_OK;
}

/* A chunk of an ordered parallel hop (sample_par.c): the picks of
 * frontier nodes [lo, hi) of edge type et, which tb's buffers hold from
 * their start (picked by any thread), labelled as one thread would after
 * the chunks before it; the new nodes go to s->pid. Each sub-block's
 * markers are prefetched while the one before it is labelled, as P2 does
 * for P3 on one thread. */
gkv_err
graph__label_chunk(gkv_sampler *s, struct tbuf *tb, int et, int64_t lo,
                   int64_t hi)
{
    amark *mk = s->mk[nbr_ntype(s->sg, et, s->R.dir)];
    struct sbk d[2];
    int k = 0;
    gkv_err rc;

    d[0].hi = lo;
    d[0].uoff = d[0].np = 0;
    for (int first = 1;; first = 0, k ^= 1) {
        struct sbk *x = &d[k], *y = &d[k ^ 1];
        /* y: the sub-block after x, its markers prefetched */
        y->lo = x->hi;
        y->hi = y->lo + SUB < hi ? y->lo + SUB : hi;
        y->coff = (size_t)(y->lo - lo);
        y->uoff = x->uoff + x->np;
        y->np = 0;
        for (int64_t i = y->lo; i < y->hi; i++)
            y->np += (size_t)tb->cnt[i - lo];
        for (size_t q = y->uoff; q < y->uoff + y->np; q++)
            __builtin_prefetch((const void *)(mk + tb->u[q]), 1);
        if (!first && (rc = p3_label(s, tb, et, x, 2)) != GKV_OK)
            return rc;
        if (y->lo == hi)
            return GKV_OK;
    }
}

/* Samples frontier nodes [lo, hi) of edge type et in sub-blocks of SUB,
 * software-pipelined so that every prefetch has a sub-block's time to
 * land: step j runs P1 of sub-block j, P2 of j - 1 and P3 of j - 2. Counts
 * and picks are appended to tb's buffers; 'cbase' is where chunk ci's
 * picks start there (P3_KEYS). */
gkv_err
graph__pipe_range(gkv_sampler *s, struct tbuf *tb, long ci, int et, int64_t lo,
                  int64_t hi, int mode, size_t cbase)
{
    const int nb = nbr_ntype(s->sg, et, s->R.dir);
    amark *mk = mode == P3_LABEL || mode == P3_KEYS || mode == P3_PREFIX ?
                s->mk[nb] : NULL;
    int64_t nsub = (hi - lo + SUB - 1) / SUB;
    struct sbk q[3];
    gkv_err rc;

    for (int64_t j = 0; j < nsub + 2; j++) {
        if (j < nsub) {
            struct sbk *d = &q[j % 3];
            d->lo = lo + j * SUB;
            d->hi = d->lo + SUB < hi ? d->lo + SUB : hi;
            d->coff = tb->cnt_len;
            tb->pos = tb->spos[j & 1];
            tb->pos_cap = tb->scap[j & 1];
            rc = p1(s, tb, ci, et, d->lo, d->hi, &d->np);
            tb->spos[j & 1] = tb->pos;
            tb->scap[j & 1] = tb->pos_cap;
            if (rc != GKV_OK)
                return rc;
        }
        if (j >= 1 && j - 1 < nsub) {
            struct sbk *d = &q[(j - 1) % 3];
            d->uoff = tb->ue_len;
            if ((rc = p2(s, tb, ci, et, tb->spos[(j - 1) & 1], d->np, mk)) !=
                GKV_OK)
                return rc;
        }
        if (j >= 2 && mode != P3_NONE) {
            const struct sbk *d = &q[(j - 2) % 3];
            /* p3_label inlined twice: the one-thread loop stays plain */
            if ((rc = mode == P3_KEYS ? p3_keys(s, tb, et, d, ci, cbase)
                      : mode == P3_COPY ? p3_copy(s, tb, et, d)
                      : mode == P3_PREFIX ? p3_label(s, tb, et, d, 1)
                      : p3_label(s, tb, et, d, 0)) != GKV_OK)
                return rc;
        }
    }
    return GKV_OK;
}

/* ---- hops --------------------------------------------------------------- */

/* Records the message of the lowest failing chunk as s's. */
static gkv_err
hop_error(gkv_sampler *s)
{
    struct tbuf *best = NULL;

    for (int i = 0; i < s->nt; i++)
        if (s->tb[i].err_ci >= 0 &&
            (best == NULL || s->tb[i].err_ci < best->err_ci))
            best = &s->tb[i];
    if (best == NULL)
        return s_fail(s, GKV_EINVAL, "sampling failed");
    return s_fail(s, best->err, "%s", best->msg);
}

#define FUSE_CHUNK 4096   /* one-thread hops: frontier nodes per pipeline */

/* One thread: the pipeline writes the block (or the single-hop result)
 * directly. */
static gkv_err
hop_serial(gkv_sampler *s)
{
    struct run *R = &s->R;
    struct tbuf *tb = &s->tb[0];

    for (int et = 0; et < s->net; et++) {
        size_t nf;
        if (R->fan[et] == 0)
            continue;
        nf = R->nf[col_ntype(s->sg, et, R->dir)];
        for (size_t lo = 0; lo < nf; lo += FUSE_CHUNK) {
            size_t hi = lo + FUSE_CHUNK < nf ? lo + FUSE_CHUNK : nf;
            tb->ue_len = tb->cnt_len = 0;
            if (graph__pipe_range(s, tb, 0, et, (int64_t)lo, (int64_t)hi,
                                  R->relabel ? P3_LABEL : P3_COPY,
                                  0) != GKV_OK)
                return GKV_EINVAL;
        }
    }
    return GKV_OK;
}

/* Runs the hop described by s->R (fan, key, fast, f, nf, and L or out). */
gkv_err
graph__hop_run(gkv_sampler *s)
{
    struct run *R = &s->R;
    size_t total = 0;
    gkv_err rc;

    for (int et = 0; et < s->net; et++)
        if (R->fan[et] != 0)
            total += R->nf[col_ntype(s->sg, et, R->dir)];
    for (int i = 0; i < s->nt; i++)
        s->tb[i].err_ci = -1;
    atomic_store(&s->fail_ci, LONG_MAX);
    if (s->nt > 1 && s->solo == 0 && total >= PAR_MIN)
        rc = graph__hop_parallel(s, total);
    else
        rc = hop_serial(s);
    if (rc != GKV_OK)
        return hop_error(s);
    return GKV_OK;
}

static gkv_err
neighbors_call(gkv_sampler *s, const int64_t *const *seeds,
               const size_t *nseeds, const int *fanout, int nfan, int layer,
               const gkv_sample_opts *opts, gkv_sample_edges *out)
{
    struct run *R;
    gkv_err rc;

    if (out == NULL)
        return s_fail(s, GKV_EINVAL, "out is NULL");
    memset(out, 0, (size_t)s->net * sizeof *out);
    if ((rc = graph__fan_check(s, fanout, nfan, 1)) != GKV_OK ||
        (rc = graph__seeds_check(s, seeds, nseeds)) != GKV_OK)
        return rc;
    if (layer < 0)
        return s_fail(s, GKV_EINVAL, "layer %d is negative", layer);
    if ((rc = graph__opts_prep(s, opts, fanout, nfan, 1)) != GKV_OK)
        return rc;
    graph__ex_finish(s);
    R = &s->R;
    R->relabel = 0;
    R->out = s->nea;
    R->olen = s->nlen;
    for (int e = 0; e < s->net; e++)
        s->nlen[e] = 0;
    for (int t = 0; t < s->nnt; t++) {
        s->fv[t] = seeds[t];
        s->nfv[t] = nseeds[t];
    }
    graph__hop_set(s, fanout, nfan, 0, layer);
    if ((rc = graph__hop_run(s)) != GKV_OK)
        return rc;
    for (int e = 0; e < s->net; e++) {
        out[e].src = s->nea[e].s;
        out[e].dst = s->nea[e].d;
        out[e].eid = s->nea[e].e;
        out[e].n = s->nlen[e];
    }
    return GKV_OK;
}

gkv_err
gkv_sample_neighbors(gkv_sampler *s, const int64_t *const *seeds,
                     const size_t *nseeds, const int *fanout, int nfan,
                     int layer, const gkv_sample_opts *opts,
                     gkv_sample_edges *out)
{
    gkv_err rc;

    if (s == NULL)
        return GKV_EINVAL;
    graph__call_begin(s);
    rc = neighbors_call(s, seeds, nseeds, fanout, nfan, layer, opts, out);
    graph__call_end(s, rc);
    return rc;
}

gkv_err
graph__sample_hop(gkv_sampler *s, const int64_t *const *seeds,
                  const size_t *nseeds, const int *fanout, int nfan,
                  int layer, const gkv_sample_opts *opts,
                  const graph__wpos *wp, int64_t *const *cnt,
                  gkv_sample_edges *out)
{
    gkv_err rc = GKV_OK;

    if (s == NULL)
        return GKV_EINVAL;
    graph__call_begin(s);
    /* zero first: an edge type the hop does not sample has no picks */
    for (int e = 0; cnt != NULL && seeds != NULL && nseeds != NULL &&
         e < s->net; e++) {
        int t = col_ntype(s->sg, e, opts != NULL ? opts->dir : GKV_DIR_IN);
        if (cnt[e] != NULL && nseeds[t] > 0)
            memset(cnt[e], 0, nseeds[t] * sizeof *cnt[e]);
    }
    for (int e = 0; wp != NULL && opts != NULL && opts->edge_w != NULL &&
         e < s->net; e++)
        if (wp[e].off != NULL && opts->edge_w[e] != NULL)
            rc = s_fail(s, GKV_EINVAL, "edge type %d has both an edge_w "
                        "array and weights by position", e);
    if (rc == GKV_OK) {
        s->wpv = wp;
        s->cntv = cnt;
        rc = neighbors_call(s, seeds, nseeds, fanout, nfan, layer, opts, out);
        s->wpv = NULL;
        s->cntv = NULL;
    }
    graph__call_end(s, rc);
    return rc;
}
