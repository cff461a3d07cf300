/* sample_par.c - a hop on several threads: the frontier cut into chunks
 * that the workers take in any order, and the relabel made deterministic
 * (phases A, C, D1, D2 in sample_hop.c's opening comment), so that the
 * result is the one-thread result; and the parallel reset of the markers. */
#include <limits.h>
#include "graph/sample_int.h"

/* Phase A: picks into the thread's buffers; with relabel, the atomic
 * minimum of each pick's key on its neighbour's marker. */
static void
ph_pick(gkv_sampler *s, int tid)
{
    struct tbuf *tb = &s->tb[tid];
    const struct run *R = &s->R;

    for (;;) {
        size_t ci = atomic_fetch_add_explicit(&s->next, 1,
                                              memory_order_relaxed);
        struct chunk *c;
        if (ci >= s->nch)
            break;
        c = &s->ch[ci];
        c->tid = tid;
        c->uoff = tb->ue_len;
        c->coff = tb->cnt_len;
        c->n = 0;
        if ((long)ci > atomic_load_explicit(&s->fail_ci, memory_order_relaxed))
            continue;
        if (R->relabel) {
            graph__pipe_range(s, tb, (long)ci, c->et, c->lo, c->hi, P3_KEYS,
                              c->uoff);
        } else {
            /* P1 and P2 only: the copy waits for the offsets */
            graph__pipe_range(s, tb, (long)ci, c->et, c->lo, c->hi, P3_NONE,
                              0);
        }
        c->n = tb->ue_len - c->uoff;
        if (c->n >= (UINT64_C(1) << KEY_IX_BITS))
            graph__tb_fail(s, tb, (long)ci, GKV_ENOMEM, "%zu picks in one "
                           "chunk of edge type %d: too many", c->n, c->et);
    }
}

/* Phase C: the chunk's first appearances (picks whose key is still on the
 * marker), their indices compacted in order into the front of its rank
 * array. */
static void
ph_first(gkv_sampler *s, int tid)
{
    (void)tid;
    for (;;) {
        size_t ci = atomic_fetch_add_explicit(&s->next, 1,
                                              memory_order_relaxed);
        struct chunk *c;
        struct tbuf *tb;
        amark *mk;
        const int64_t *u;
        int64_t *rank;
        size_t nnew = 0;
        if (ci >= s->nch)
            break;
        c = &s->ch[ci];
        tb = &s->tb[c->tid];
        mk = s->mk[nbr_ntype(s->sg, c->et, s->R.dir)];
        u = tb->u + c->uoff;
        rank = tb->rank + c->uoff;
        for (size_t j = 0; j < c->n; j++)
            if (rank[j] && LOAD(&mk[u[j]]) == KEY(ci, j))
                rank[nnew++] = (int64_t)j;
        c->nnew = nnew;
    }
}

/* Phase D1: the first appearances get their local IDs (marker = local ID
 * + 1) and their place in the node list. */
static void
ph_newlab(gkv_sampler *s, int tid)
{
    struct blay *L = s->R.L;

    (void)tid;
    for (;;) {
        size_t ci = atomic_fetch_add_explicit(&s->next, 1,
                                              memory_order_relaxed);
        const struct chunk *c;
        const struct tbuf *tb;
        const int64_t *u, *rank;
        int64_t *ids;
        amark *mk;
        int nb;
        if (ci >= s->nch)
            break;
        c = &s->ch[ci];
        tb = &s->tb[c->tid];
        nb = nbr_ntype(s->sg, c->et, s->R.dir);
        mk = s->mk[nb];
        ids = L->ids[nb] + c->base;
        u = tb->u + c->uoff;
        rank = tb->rank + c->uoff;
        for (size_t r = 0; r < c->nnew; r++) {
            int64_t x = u[rank[r]];
            ids[r] = x;
            STORE(&mk[x], (uint64_t)(c->base + (int64_t)r) + 1);
        }
    }
}

/* Phase D2: every pick's local source from its marker, into the block. */
static void
ph_label(gkv_sampler *s, int tid)
{
    struct blay *L = s->R.L;

    (void)tid;
    for (;;) {
        size_t ci = atomic_fetch_add_explicit(&s->next, 1,
                                              memory_order_relaxed);
        const struct chunk *c;
        const struct tbuf *tb;
        const int64_t *u, *e, *cnt;
        struct earr *ea;
        amark *mk;
        size_t j = 0, o;
        if (ci >= s->nch)
            break;
        c = &s->ch[ci];
        tb = &s->tb[c->tid];
        mk = s->mk[nbr_ntype(s->sg, c->et, s->R.dir)];
        ea = &L->ea[c->et];
        u = tb->u + c->uoff;
        e = tb->e + c->uoff;
        cnt = tb->cnt + c->coff;
        o = c->eoff;
        for (int64_t i = c->lo; i < c->hi; i++) {
            for (int64_t k = cnt[i - c->lo]; k > 0; k--, j++, o++) {
                ea->s[o] = (int64_t)LOAD(&mk[u[j]]) - 1;
                ea->d[o] = i;
                ea->e[o] = e[j];
            }
        }
    }
}

/* Phase D of a single hop: the picks in global IDs at their offsets. */
static void
ph_copy(gkv_sampler *s, int tid)
{
    const struct run *R = &s->R;

    (void)tid;
    for (;;) {
        size_t ci = atomic_fetch_add_explicit(&s->next, 1,
                                              memory_order_relaxed);
        const struct chunk *c;
        const struct tbuf *tb;
        const int64_t *u, *e, *cnt, *f;
        struct earr *ea;
        int64_t *os, *od;
        size_t j = 0, o;
        if (ci >= s->nch)
            break;
        c = &s->ch[ci];
        tb = &s->tb[c->tid];
        ea = &R->out[c->et];
        f = R->f[col_ntype(s->sg, c->et, R->dir)];
        u = tb->u + c->uoff;
        e = tb->e + c->uoff;
        cnt = tb->cnt + c->coff;
        os = R->dir == GKV_DIR_IN ? ea->s : ea->d;
        od = R->dir == GKV_DIR_IN ? ea->d : ea->s;
        o = c->eoff;
        counts_out(s, c->et, c->lo, c->hi, cnt);
        for (int64_t i = c->lo; i < c->hi; i++)
            for (int64_t k = cnt[i - c->lo]; k > 0; k--, j++, o++) {
                os[o] = u[j];
                od[o] = f[i];
                ea->e[o] = e[j];
            }
    }
}

/* After a failed parallel hop: markers still holding a key go back to 0. */
static void
keys_clear(gkv_sampler *s)
{
    for (size_t ci = 0; ci < s->nch; ci++) {
        const struct chunk *c = &s->ch[ci];
        const int64_t *u = s->tb[c->tid].u + c->uoff;
        amark *mk = s->mk[nbr_ntype(s->sg, c->et, s->R.dir)];
        for (size_t j = 0; j < c->n; j++)
            if (LOAD(&mk[u[j]]) >= KEYBIT)
                STORE(&mk[u[j]], 0);
    }
}

gkv_err
graph__hop_parallel(gkv_sampler *s, size_t total)
{
    struct run *R = &s->R;
    struct tbuf *tb0 = &s->tb[0];
    size_t chs = total / ((size_t)s->nt * 8), maxch;

    if (chs < SUB)
        chs = SUB;
    if (chs > 1024)
        chs = 1024;
    /* a key holds the chunk index in KEY_CH_BITS bits */
    maxch = ((size_t)1 << KEY_CH_BITS) - 1;
    for (;;) {
        size_t n = 0;
        for (int et = 0; et < s->net; et++)
            if (R->fan[et] != 0)
                n += (R->nf[col_ntype(s->sg, et, R->dir)] + chs - 1) / chs;
        if (n <= maxch)
            break;
        chs *= 2;
    }
    s->nch = 0;
    for (int et = 0; et < s->net; et++) {
        size_t nf;
        if (R->fan[et] == 0)
            continue;
        nf = R->nf[col_ntype(s->sg, et, R->dir)];
        for (size_t lo = 0; lo < nf; lo += chs) {
            struct chunk *c;
            if (graph__grow(&s->ch, &s->chcap, s->nch + 1, sizeof *s->ch)) {
                graph__tb_fail(s, tb0, 0, GKV_ENOMEM, "out of memory for the "
                               "work list");
                return GKV_ENOMEM;
            }
            c = &s->ch[s->nch++];
            memset(c, 0, sizeof *c);
            c->et = et;
            c->lo = (int64_t)lo;
            c->hi = (int64_t)(lo + chs < nf ? lo + chs : nf);
        }
    }
    for (int i = 0; i < s->nt; i++)
        s->tb[i].ue_len = s->tb[i].cnt_len = 0;
    atomic_store(&s->next, 0);
    graph__pool_run(s, ph_pick);
    if (atomic_load(&s->fail_ci) != LONG_MAX) {
        if (R->relabel)
            keys_clear(s);
        return GKV_EINVAL;
    }
    if (R->relabel) {
        struct blay *L = R->L;
        size_t *ntot = s->ntot, *etot = s->nlen;
        atomic_store(&s->next, 0);
        graph__pool_run(s, ph_first);
        for (int t = 0; t < s->nnt; t++)
            ntot[t] = L->nodes[t].num_src;
        for (int e = 0; e < s->net; e++)
            etot[e] = L->edges[e].n;
        for (size_t ci = 0; ci < s->nch; ci++) {
            struct chunk *c = &s->ch[ci];
            int nb = nbr_ntype(s->sg, c->et, R->dir);
            c->base = (int64_t)ntot[nb];
            ntot[nb] += c->nnew;
            c->eoff = etot[c->et];
            etot[c->et] += c->n;
        }
        for (int t = 0; t < s->nnt; t++)
            if (graph__grow(&L->ids[t], &L->idcap[t], ntot[t],
                            sizeof *L->ids[t]))
                goto nomem;
        for (int e = 0; e < s->net; e++)
            if (graph__earr_grow(&L->ea[e], etot[e]))
                goto nomem;
        atomic_store(&s->next, 0);
        graph__pool_run(s, ph_newlab);
        atomic_store(&s->next, 0);
        graph__pool_run(s, ph_label);
        for (int t = 0; t < s->nnt; t++) {
            L->nodes[t].num_src = ntot[t];
            R->f[t] = L->ids[t];
        }
        for (int e = 0; e < s->net; e++)
            L->edges[e].n = etot[e];
    } else {
        for (size_t ci = 0; ci < s->nch; ci++) {
            struct chunk *c = &s->ch[ci];
            c->eoff = R->olen[c->et];
            R->olen[c->et] += c->n;
        }
        for (int e = 0; e < s->net; e++)
            if (graph__earr_grow(&R->out[e], R->olen[e]))
                goto nomem;
        atomic_store(&s->next, 0);
        graph__pool_run(s, ph_copy);
    }
    return GKV_OK;
nomem:
    if (R->relabel)
        keys_clear(s);
    graph__tb_fail(s, tb0, 0, GKV_ENOMEM, "out of memory for the sampled "
                   "edges");
    return GKV_ENOMEM;
}

#define RESET_CHUNK 4096

/* Markers of the nodes in L's lists back to 0, in chunks of RESET_CHUNK
 * nodes taken from s->next. */
static void
ph_reset(gkv_sampler *s, int tid)
{
    const struct blay *L = s->R.L;

    (void)tid;
    for (;;) {
        size_t ci = atomic_fetch_add_explicit(&s->next, 1,
                                              memory_order_relaxed);
        size_t lo = ci * RESET_CHUNK;
        int t;
        for (t = 0; t < s->nnt; t++) {
            size_t n = L->nodes[t].num_src;
            if (lo < n)
                break;
            lo -= (n + RESET_CHUNK - 1) / RESET_CHUNK * RESET_CHUNK;
        }
        if (t == s->nnt)
            break;
        {
            size_t n = L->nodes[t].num_src;
            size_t hi = lo + RESET_CHUNK < n ? lo + RESET_CHUNK : n;
            const int64_t *ids = L->ids[t];
            amark *mk = s->mk[t];
            for (size_t i = lo; i < hi; i++)
                STORE(&mk[ids[i]], 0);
        }
    }
}

void
graph__markers_reset(gkv_sampler *s, struct blay *L)
{
    size_t n = 0;

    for (int t = 0; t < s->nnt; t++)
        n += L->nodes[t].num_src;
    s->R.L = L;
    atomic_store(&s->next, 0);
    if (n >= 2 * RESET_CHUNK && s->solo == 0)
        graph__pool_run(s, ph_reset);
    else
        ph_reset(s, 0);
}
