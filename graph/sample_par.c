/* sample_par.c - a hop on several threads: the frontier cut into chunks;
 * with relabelling on two threads, the chunks picked side by side and
 * labelled in order by one thread at a time (ordered), on more the
 * caller's prefix labelled in order and the workers' suffix keyed on the
 * markers and merged (keyed; sample_hop.c's opening comment), so that the
 * result is the one-thread result either way; and the parallel reset of
 * the markers. */
#include <limits.h>
#include <sched.h>
#include "graph/sample_int.h"

/* The most threads that relabel ordered: one thread labels while the
 * others pick, and the labelling is about 40 % of a hop's work, which
 * caps the ordered relabel near 2.5x one thread; the keyed relabel costs
 * a third more work, but every thread labels, so past two threads it
 * wins. */
#define ORDER_MAX 2

/* Single hop: the picks (P1 and P2 only; the copy waits for the
 * offsets) into the thread's buffers, chunks taken in any order. */
static void
ph_pick(gkv_sampler *s, int tid)
{
    struct tbuf *tb = &s->tb[tid];

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
        graph__pipe_range(s, tb, (long)ci, c->et, c->lo, c->hi, P3_NONE, 0);
        c->n = tb->ue_len - c->uoff;
    }
}

/* Relabel, phase A: the caller (tid 0) takes chunks from the front, in
 * order, and labels them as one thread would (the prefix, at most
 * s->caller_max chunks); the workers take chunks from the back and leave
 * their keys on the markers (the suffix), as the caller does once it has
 * labelled caller_max chunks. Front and back meet where the work runs out,
 * so a worker that the OS does not run only makes the prefix longer. */
static void
ph_label(gkv_sampler *s, int tid)
{
    struct tbuf *tb = &s->tb[tid];
    const uint64_t lo32 = 0xffffffffu;
    size_t nfront = 0;

    for (;;) {
        uint64_t w = atomic_load_explicit(&s->fb, memory_order_relaxed);
        int front = tid == 0 && nfront < s->caller_max;
        size_t ci;
        struct chunk *c;
        do {
            if ((w & lo32) >= (w >> 32))
                return;
        } while (!atomic_compare_exchange_weak_explicit(
                     &s->fb, &w, front ? w + 1 : w - (lo32 + 1),
                     memory_order_relaxed, memory_order_relaxed));
        ci = front ? (size_t)(w & lo32) : (size_t)(w >> 32) - 1;
        c = &s->ch[ci];
        c->tid = tid;
        c->pre = front;
        if (front) {
            nfront++;
            tb->ue_len = tb->cnt_len = 0;
        }
        c->uoff = tb->ue_len;
        c->coff = tb->cnt_len;
        c->n = 0;
        if ((long)ci > atomic_load_explicit(&s->fail_ci, memory_order_relaxed))
            continue;
        graph__pipe_range(s, tb, (long)ci, c->et, c->lo, c->hi,
                          front ? P3_PREFIX : P3_KEYS, c->uoff);
        c->n = tb->ue_len - c->uoff;
        if (c->n >= (UINT64_C(1) << KEY_IX_BITS))
            graph__tb_fail(s, tb, (long)ci, GKV_ENOMEM, "%zu picks in one "
                           "chunk of edge type %d: too many", c->n, c->et);
    }
}

/* The rank entry of the pick whose key is k. */
static inline int64_t *
key_slot(const gkv_sampler *s, uint64_t k)
{
    const struct chunk *c = &s->ch[KEY_CH(k)];
    return s->tb[c->tid].rank + c->uoff + KEY_IX(k);
}

/* Relabel, after phase A: the logs (one per thread, taken from s->next).
 * The rank of a pick whose key left its marker names what replaced it: an
 * earlier pick's key, or a local ID + 1. */
static void
ph_logs(gkv_sampler *s, int tid)
{
    (void)tid;
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&s->next, 1,
                                             memory_order_relaxed);
        const struct tbuf *tb;
        if (i >= (size_t)s->nt)
            break;
        tb = &s->tb[i];
        for (size_t q = 0; q < tb->ovr_len; q += 2)
            *key_slot(s, tb->ovr[q]) = (int64_t)tb->ovr[q + 1];
    }
}

/* Relabel, after the logs: in each suffix chunk (from s->next), a pick
 * whose rank is still its own key is its node's first appearance; its
 * rank becomes FIRSTBIT | its chunk | its index among the chunk's first
 * appearances, counted in c->nnew. */
static void
ph_first(gkv_sampler *s, int tid)
{
    (void)tid;
    for (;;) {
        size_t ci = atomic_fetch_add_explicit(&s->next, 1,
                                              memory_order_relaxed);
        struct chunk *c;
        int64_t *rank;
        uint64_t r, r0;
        if (ci >= s->nch)
            break;
        c = &s->ch[ci];
        rank = s->tb[c->tid].rank + c->uoff;
        r = r0 = FIRSTBIT | ((uint64_t)ci << KEY_IX_BITS);
        for (size_t j = 0; j < c->n; j++)
            if ((uint64_t)rank[j] == KEY(ci, j))
                rank[j] = (int64_t)r++;
        c->nnew = r - r0;
    }
}

/* Relabel, between ph_first and ph_write (one thread): each suffix chunk's
 * first local ID (in chunk order, after the prefix's) and edge offset;
 * grows the node lists and the edges. */
static gkv_err
suffix_place(gkv_sampler *s, size_t front)
{
    struct run *R = &s->R;
    struct blay *L = R->L;

    for (size_t ci = front; ci < s->nch; ci++) {
        struct chunk *c = &s->ch[ci];
        int nb = nbr_ntype(s->sg, c->et, R->dir);
        c->base = (int64_t)L->nodes[nb].num_src;
        L->nodes[nb].num_src += c->nnew;
        c->eoff = L->edges[c->et].n;
        L->edges[c->et].n += c->n;
    }
    for (int t = 0; t < s->nnt; t++) {
        if (graph__grow(&L->ids[t], &L->idcap[t], L->nodes[t].num_src,
                        sizeof *L->ids[t]))
            return GKV_ENOMEM;
        R->f[t] = L->ids[t];
    }
    for (int e = 0; e < s->net; e++)
        if (graph__earr_grow(&L->ea[e], L->edges[e].n))
            return GKV_ENOMEM;
    return GKV_OK;
}

/* Relabel, the last phase: the suffix chunks' edges into the block, each
 * pick's local source from its rank, following the keys it names to a
 * local ID + 1 or a first appearance; a first appearance also writes the
 * node list and its marker (local ID + 1, for the next hop). Chunks from
 * s->next. */
static void
ph_write(gkv_sampler *s, int tid)
{
    struct blay *L = s->R.L;

    (void)tid;
    for (;;) {
        size_t ci = atomic_fetch_add_explicit(&s->next, 1,
                                              memory_order_relaxed);
        const struct chunk *c;
        const struct tbuf *tb;
        const int64_t *u, *e, *cnt, *rank;
        int64_t *ids, *es, *ed, *ee;
        amark *mk;
        size_t j = 0, o;
        int nb;
        if (ci >= s->nch)
            break;
        c = &s->ch[ci];
        tb = &s->tb[c->tid];
        nb = nbr_ntype(s->sg, c->et, s->R.dir);
        /* after the batch's last hop only the reset reads the markers,
         * and it finds the nodes in the lists */
        mk = s->R.last ? NULL : s->mk[nb];
        ids = L->ids[nb];
        es = L->ea[c->et].s;
        ed = L->ea[c->et].d;
        ee = L->ea[c->et].e;
        u = tb->u + c->uoff;
        e = tb->e + c->uoff;
        rank = tb->rank + c->uoff;
        cnt = tb->cnt + c->coff;
        o = c->eoff;
        for (int64_t i = c->lo; i < c->hi; i++) {
            for (int64_t k = cnt[i - c->lo]; k > 0; k--, j++, o++) {
                uint64_t m = (uint64_t)rank[j];
                int64_t lab;
                if (m & FIRSTBIT) {
                    lab = c->base + (int64_t)KEY_IX(m);
                    ids[lab] = u[j];
                    if (mk != NULL)
                        STORE(&mk[u[j]], (uint64_t)lab + 1);
                } else {
                    while (m >= KEYBIT && !(m & FIRSTBIT))
                        m = (uint64_t)*key_slot(s, m);
                    lab = m & FIRSTBIT ? s->ch[KEY_CH(m)].base +
                                         (int64_t)KEY_IX(m)
                          : (int64_t)m - 1;
                }
                es[o] = lab;
                ed[o] = i;
                ee[o] = e[j];
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

/* After phase A of a keyed relabel, or an ordered one: the new nodes
 * labelled in order (in s->pid) into the node lists (where the end of the
 * batch resets their markers). When there is no
 * room, their markers go back to 0 here and GKV_ENOMEM. */
static gkv_err
prefix_list(gkv_sampler *s)
{
    struct blay *L = s->R.L;
    gkv_err rc = GKV_OK;

    for (int t = 0; t < s->nnt; t++) {
        size_t n0 = s->ntot[t], n = L->nodes[t].num_src;
        if (n == n0)
            continue;
        if (graph__grow(&L->ids[t], &L->idcap[t], n, sizeof *L->ids[t])) {
            for (size_t i = 0; i < n - n0; i++)
                STORE(&s->mk[t][s->pid[t][i]], 0);
            L->nodes[t].num_src = n0;
            rc = GKV_ENOMEM;
            continue;
        }
        memcpy(L->ids[t] + n0, s->pid[t], (n - n0) * sizeof *L->ids[t]);
    }
    return rc;
}

/* After a failed relabel: markers still holding a key back to 0. */
static void
keys_clear(gkv_sampler *s)
{
    for (size_t ci = 0; ci < s->nch; ci++) {
        const struct chunk *c = &s->ch[ci];
        const int64_t *u = s->tb[c->tid].u + c->uoff;
        amark *mk = s->mk[nbr_ntype(s->sg, c->et, s->R.dir)];
        if (c->pre)
            continue;
        for (size_t j = 0; j < c->n; j++)
            if (LOAD(&mk[u[j]]) >= KEYBIT)
                STORE(&mk[u[j]], 0);
    }
}

/* The relabelling hop of s->R on the workers: phase A, the merge, the
 * suffix's edges. */
static gkv_err
hop_relabel(gkv_sampler *s)
{
    struct blay *L = s->R.L;
    size_t front;
    gkv_err rc;

    for (int t = 0; t < s->nnt; t++)
        s->ntot[t] = L->nodes[t].num_src;
    atomic_store(&s->fb, (uint64_t)s->nch << 32);
    graph__pool_run(s, ph_label);
    front = (size_t)(atomic_load(&s->fb) & 0xffffffffu);
    rc = prefix_list(s);
    for (int t = 0; t < s->nnt; t++)
        s->ntot[t] = L->nodes[t].num_src;
    if (atomic_load(&s->fail_ci) != LONG_MAX) {
        keys_clear(s);
        return GKV_EINVAL;
    }
    atomic_store(&s->next, 0);
    graph__pool_run(s, ph_logs);
    atomic_store(&s->next, front);
    graph__pool_run(s, ph_first);
    if (rc != GKV_OK || suffix_place(s, front) != GKV_OK) {
        /* the lists as the prefix left them; the suffix's nodes still
         * hold keys */
        for (int t = 0; t < s->nnt; t++)
            L->nodes[t].num_src = s->ntot[t];
        keys_clear(s);
        graph__tb_fail(s, &s->tb[0], 0, GKV_ENOMEM, "out of memory for the "
                       "sampled edges");
        return GKV_ENOMEM;
    }
    atomic_store(&s->next, front);
    graph__pool_run(s, ph_write);
    return GKV_OK;
}

/* Ordered relabel: tb and chunk buffer b swap their picks (u, e, rank,
 * cnt: rank shares u's capacity). */
static void
cb_swap(struct tbuf *tb, struct cbuf *b)
{
    struct cbuf t = *b;

    b->u = tb->u;
    b->e = tb->e;
    b->rank = tb->rank;
    b->ue_cap = tb->ue_cap;
    b->ue_len = tb->ue_len;
    b->cnt = tb->cnt;
    b->cnt_cap = tb->cnt_cap;
    b->cnt_len = tb->cnt_len;
    tb->u = t.u;
    tb->e = t.e;
    tb->rank = t.rank;
    tb->ue_cap = t.ue_cap;
    tb->ue_len = t.ue_len;
    tb->cnt = t.cnt;
    tb->cnt_cap = t.cnt_cap;
    tb->cnt_len = t.cnt_len;
}

#define CB_KEEP ((size_t)1 << 16)   /* entries a chunk's buffers keep */

/* Ordered relabel: b's buffers freed when they hold over 4x the entries
 * it used and over CB_KEEP (they grow again when needed). */
static void
cb_trim(struct cbuf *b)
{
    if (b->ue_cap > CB_KEEP && b->ue_cap / 4 > b->ue_len) {
        gkv__free(b->u);
        gkv__free(b->e);
        gkv__free(b->rank);
        b->u = b->e = b->rank = NULL;
        b->ue_cap = 0;
    }
    if (b->cnt_cap > CB_KEEP && b->cnt_cap / 4 > b->cnt_len) {
        gkv__free(b->cnt);
        b->cnt = NULL;
        b->cnt_cap = 0;
    }
}

/* Ordered relabel: while the next chunk to label has its picks and no other
 * thread labels, label chunks in order (s->tok is the right to label,
 * s->lab the next chunk, written only by the thread holding s->tok). A
 * thread that marks a chunk picked and finds another thread labelling
 * leaves the chunk to it: that thread, after letting go, looks at the
 * next chunk again, and with seq_cst on both sides one of the two sees
 * the other's store. A thread that reads s->lab and finds that chunk not
 * yet picked leaves it to whoever marks it picked later, who then looks
 * (after this read in the seq_cst order). A stale s->lab names a chunk
 * already picked; the CAS then gives a fresh one. Labelling stops at the
 * first chunk that failed. A chunk's buffers far larger than it used
 * (a node with many neighbours and fanout -1) are given back, so that
 * what the sampler keeps stays near its largest hop. */
static void
label_ready(gkv_sampler *s, struct tbuf *tb)
{
    for (;;) {
        size_t l = atomic_load(&s->lab);
        int z = 0;
        if (l >= s->nch || !atomic_load(&s->ch[l].ready) ||
            !atomic_compare_exchange_strong(&s->tok, &z, 1))
            return;
        while ((l = atomic_load_explicit(&s->lab, memory_order_relaxed)) <
               s->nch && atomic_load_explicit(&s->ch[l].ready,
                                              memory_order_acquire)) {
            const struct chunk *c = &s->ch[l];
            if ((long)l >= atomic_load(&s->fail_ci)) {
                atomic_store(&s->lab, s->nch);
                break;
            }
            cb_swap(tb, &s->cb[l]);
            (void)graph__label_chunk(s, tb, c->et, c->lo, c->hi);
            cb_swap(tb, &s->cb[l]);
            cb_trim(&s->cb[l]);
            atomic_store_explicit(&s->lab, l + 1, memory_order_relaxed);
        }
        atomic_store(&s->tok, 0);
    }
}

/* Ordered relabel: each thread takes chunks in frontier order from
 * s->next, puts their picks (P1 and P2) in the chunk's buffers and marks
 * them ready, then labels what is ready (label_ready). The caller picks at
 * most s->caller_max chunks and then only labels until every chunk is
 * taken; the job ends when the last chunk is labelled, by whoever picked
 * it or was labelling then. */
static void
ph_order(gkv_sampler *s, int tid)
{
    struct tbuf *tb = &s->tb[tid];
    size_t npick = 0;

    for (;;) {
        size_t ci;
        struct chunk *c;
        if (tid == 0 && npick >= s->caller_max) {
            for (unsigned spins = 0; atomic_load(&s->next) < s->nch;) {
                label_ready(s, tb);
                if (++spins % 4096 != 0)
                    cpu_relax();
                else
                    sched_yield();
            }
            break;
        }
        ci = atomic_fetch_add(&s->next, 1);
        if (ci >= s->nch)
            break;
        npick++;
        c = &s->ch[ci];
        if ((long)ci <= atomic_load_explicit(&s->fail_ci,
                                             memory_order_relaxed)) {
            cb_swap(tb, &s->cb[ci]);
            tb->ue_len = tb->cnt_len = 0;
            (void)graph__pipe_range(s, tb, (long)ci, c->et, c->lo, c->hi,
                                    P3_NONE, 0);
            cb_swap(tb, &s->cb[ci]);
        }
        atomic_store(&c->ready, 1);
        label_ready(s, tb);
    }
    label_ready(s, tb);
}

/* A relabelling hop of s->R on two threads, labelled in order. */
static gkv_err
hop_ordered(gkv_sampler *s)
{
    struct blay *L = s->R.L;
    gkv_err rc;

    if (s->nch > s->cbcap) {
        size_t old = s->cbcap;
        if (graph__grow(&s->cb, &s->cbcap, s->nch, sizeof *s->cb)) {
            graph__tb_fail(s, &s->tb[0], 0, GKV_ENOMEM, "out of memory for "
                           "the work list");
            return GKV_ENOMEM;
        }
        memset(s->cb + old, 0, (s->cbcap - old) * sizeof *s->cb);
    }
    for (size_t ci = 0; ci < s->nch; ci++)
        atomic_store_explicit(&s->ch[ci].ready, 0, memory_order_relaxed);
    for (int t = 0; t < s->nnt; t++)
        s->ntot[t] = L->nodes[t].num_src;
    atomic_store(&s->next, 0);
    atomic_store(&s->lab, 0);
    atomic_store(&s->tok, 0);
    graph__pool_run(s, ph_order);
    rc = prefix_list(s);
    if (atomic_load(&s->fail_ci) != LONG_MAX)
        return GKV_EINVAL;
    if (rc != GKV_OK)
        graph__tb_fail(s, &s->tb[0], 0, rc, "out of memory for the node "
                       "lists");
    return rc;
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
        s->tb[i].ue_len = s->tb[i].cnt_len = s->tb[i].ovr_len = 0;
    if (R->relabel)
        return s->nt <= ORDER_MAX ? hop_ordered(s) : hop_relabel(s);
    atomic_store(&s->next, 0);
    graph__pool_run(s, ph_pick);
    if (atomic_load(&s->fail_ci) != LONG_MAX)
        return GKV_EINVAL;
    for (size_t ci = 0; ci < s->nch; ci++) {
        struct chunk *c = &s->ch[ci];
        c->eoff = R->olen[c->et];
        R->olen[c->et] += c->n;
    }
    for (int e = 0; e < s->net; e++)
        if (graph__earr_grow(&R->out[e], R->olen[e])) {
            graph__tb_fail(s, tb0, 0, GKV_ENOMEM, "out of memory for the "
                           "sampled edges");
            return GKV_ENOMEM;
        }
    atomic_store(&s->next, 0);
    graph__pool_run(s, ph_copy);
    return GKV_OK;
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

void
graph__sample_caller_max(gkv_sampler *s, size_t n)
{
    s->caller_max = n;
}

void
graph__sample_always_par(gkv_sampler *s)
{
    s->always_par = 1;
}
